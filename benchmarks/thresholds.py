"""Similarity thresholds per model (``graphrecall.embed.profile``): each model's profile over the reference set, and
whether the decisions the thresholds make (the same fact, worth versioning against, a restatement, the same entity)
agree between MiniLM and another model once the thresholds are translated.

    python -m benchmarks.thresholds                          # minilm and e5-small: profiles, agreement, report
    python -m benchmarks.thresholds --embedder ollama:bge-m3 # another model beside MiniLM
    python -m benchmarks.thresholds --write-profiles         # after editing embed/reference_pairs.json

The decisions (``tests/data/thresholds/decisions.json``, none of them a reference pair) are pairs labelled with the
threshold that decides them and whether a person would call them the same; each model decides ``cosine >=
threshold``, MiniLM with the configuration's values, the other model with them translated and, for comparison,
untranslated. Writes ``<out>/thresholds.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run
from graphrecall.config import ConsolidationConfig, RetrievalConfig
from graphrecall.embed import profile as mp
from graphrecall.embed.base import Embedder
from graphrecall.extract.extractor import ExtractionConfig

ROOT = Path(__file__).resolve().parent.parent
DECISIONS = ROOT / "tests" / "data" / "thresholds" / "decisions.json"
PROFILES = ROOT / "src" / "graphrecall" / "embed" / "profiles.json"
SHIPPED = ("minilm", "e5-small")


def config_thresholds() -> dict[str, float]:
    """Every threshold of ``profile.THRESHOLDS`` with its default (reference scale)."""
    defaults = {
        "ExtractionConfig": ExtractionConfig(),
        "ConsolidationConfig": ConsolidationConfig(),
        "RetrievalConfig": RetrievalConfig(),
    }
    return {f: float(getattr(defaults[c], f)) for c, fields in mp.THRESHOLDS.items() for f in fields}


def load_decisions(path: Path = DECISIONS) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return items


def cosines(embedder: Embedder, items: Sequence[dict[str, Any]]) -> list[float]:
    pairs = [mp.ReferencePair("decision", "", x["a"], x["b"]) for x in items]
    return mp.pair_scores(embedder, pairs)


def decide(items: Sequence[dict[str, Any]], scores: Sequence[float], translate: Any = None) -> list[bool]:
    """Each item's decision: its cosine against its threshold (translated by ``translate`` when given)."""
    limits = config_thresholds()
    out = []
    for x, s in zip(items, scores, strict=True):
        t = limits[x["threshold"]]
        out.append(s >= (translate(t) if translate is not None else t))
    return out


def agreement(a: Sequence[bool], b: Sequence[bool]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def compare(
    items: Sequence[dict[str, Any]],
    reference: Sequence[float],
    model: Sequence[float],
    profile: mp.ModelProfile,
) -> dict[str, Any]:
    """MiniLM's decisions against the model's, translated and not; each against the labels."""
    gold = [bool(x["same"]) for x in items]
    ref = decide(items, reference)
    translated = decide(items, model, profile.translate)
    raw = decide(items, model)
    per: dict[str, dict[str, Any]] = {}
    for i, x in enumerate(items):
        row = per.setdefault(x["threshold"], {"n": 0, "agree": 0, "agree_untranslated": 0})
        row["n"] += 1
        row["agree"] += ref[i] == translated[i]
        row["agree_untranslated"] += ref[i] == raw[i]
    disagreements = [
        {
            "threshold": x["threshold"],
            "a": x["a"],
            "b": x["b"],
            "same": x["same"],
            "reference": [reference[i], ref[i]],
            "model": [model[i], translated[i]],
        }
        for i, x in enumerate(items)
        if ref[i] != translated[i]
    ]
    return {
        "n": len(items),
        "agreement": round(agreement(ref, translated), 4),
        "agreement_untranslated": round(agreement(ref, raw), 4),
        "accuracy_reference": round(agreement(ref, gold), 4),
        "accuracy_translated": round(agreement(translated, gold), 4),
        "accuracy_untranslated": round(agreement(raw, gold), 4),
        "per_threshold": per,
        "disagreements": disagreements,
    }


def write_profiles(scores: dict[str, tuple[str, list[float]]]) -> None:
    """``profiles.json``: MiniLM's score per reference pair, and each shipped model's quantiles."""
    reference = scores["minilm"][1]
    data: dict[str, Any] = {
        "reference_set": mp.reference_digest(),
        "reference_model": mp.REFERENCE_ID,
        "reference_scores": reference,
        "profiles": {},
    }
    PROFILES.write_text(json.dumps(data) + "\n", encoding="utf-8")  # reference_scores() reads it next
    mp.shipped.cache_clear()
    for spec in SHIPPED:
        eid, s = scores[spec]
        profile = mp.profile_from(eid, s, "shipped")
        data["profiles"][eid] = {
            "quantiles": list(profile.model or mp.quantiles(s)),
            "rank_agreement": profile.rank_agreement,
        }
    PROFILES.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    mp.shipped.cache_clear()
    mp.forget_profiles()


def markdown(result: dict[str, Any]) -> str:
    lines = ["# Similarity thresholds per model", ""]
    limits = result["thresholds"]
    models = result["models"]
    lines.append("| threshold (reference scale) | " + " | ".join(m for m in models) + " |")
    lines.append("|---|" + "---:|" * len(models))
    for name, t in limits.items():
        lines.append(
            f"| `{name}` {t} | " + " | ".join(f"{models[m]['translated'][name]:.3f}" for m in models) + " |"
        )
    lines.append("")
    for m, r in result["comparisons"].items():
        lines.append(
            f"**{m}** against minilm over {r['n']} labelled decisions: agreement {r['agreement']:.3f} with "
            f"translated thresholds, {r['agreement_untranslated']:.3f} untranslated; right by the labels: minilm "
            f"{r['accuracy_reference']:.3f}, {m} translated {r['accuracy_translated']:.3f}, untranslated "
            f"{r['accuracy_untranslated']:.3f}."
        )
        lines.append("")
        lines.append("| threshold | n | agree | agree untranslated |")
        lines.append("|---|---:|---:|---:|")
        for name, row in r["per_threshold"].items():
            lines.append(f"| `{name}` | {row['n']} | {row['agree']} | {row['agree_untranslated']} |")
        lines.append("")
        for d in r["disagreements"]:
            lines.append(
                f'- `{d["threshold"]}` ({"same" if d["same"] else "different"}): "{d["a"]}" / "{d["b"]}": '
                f"minilm {d['reference'][0]:.3f} -> {d['reference'][1]}, {m} {d['model'][0]:.3f} -> {d['model'][1]}"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--embedder", default=None, metavar="SPEC", help="a model beside minilm (default: e5-small)"
    )
    p.add_argument(
        "--write-profiles", action="store_true", help="rewrite src/graphrecall/embed/profiles.json"
    )
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "thresholds")
    args = p.parse_args(argv)
    from graphrecall.embed.spec import embedder_from_spec

    run = Run.begin()
    specs = ["minilm", args.embedder or "e5-small"]
    if args.write_profiles:
        specs = list(dict.fromkeys([*SHIPPED, *specs]))
    items = load_decisions()
    embedders = {s: embedder_from_spec(s) for s in specs}
    ref_scores: dict[str, tuple[str, list[float]]] = {}
    dec_scores: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    for spec, e in embedders.items():
        t0 = time.perf_counter()
        ref_scores[spec] = (e.id, mp.pair_scores(e))
        dec_scores[spec] = cosines(e, items)
        seconds[spec] = round(time.perf_counter() - t0, 1)
    if args.write_profiles:
        write_profiles(ref_scores)
    limits = config_thresholds()
    models: dict[str, Any] = {}
    comparisons: dict[str, Any] = {}
    for spec, e in embedders.items():
        mp.forget_profiles()
        prof = mp.profile_of(e)
        models[spec] = {
            "embedder": e.id,
            "source": prof.source,
            "rank_agreement": prof.rank_agreement,
            "quantiles": list(prof.model),
            "reference_by_kind": _by_kind(ref_scores[spec][1]),
            "translated": {k: round(prof.translate(t), 4) for k, t in limits.items()},
            "seconds": seconds[spec],
        }
        if spec != "minilm":
            comparisons[spec] = compare(items, dec_scores["minilm"], dec_scores[spec], prof)
    result = {"thresholds": limits, "models": models, "comparisons": comparisons}
    save_report(args.out, "thresholds", result, markdown(result), run)


def _by_kind(scores: Sequence[float]) -> dict[str, list[float]]:
    """Per kind of reference pair (and English or not): min, median, max cosine."""
    groups: dict[str, list[float]] = {}
    for pair, s in zip(mp.reference_pairs(), scores, strict=True):
        groups.setdefault(f"{pair.kind}/{'en' if pair.lang == 'en' else 'other'}", []).append(s)
    return {
        k: [round(float(np.min(v)), 3), round(float(np.median(v)), 3), round(float(np.max(v)), 3)]
        for k, v in sorted(groups.items())
    }


if __name__ == "__main__":
    main()
