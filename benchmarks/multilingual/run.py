"""Multilingual retrieval benchmark: graphrecall against BM25 alone and dense-only, per language and per kind of
question, on hand-written histories in Russian, Chinese, German, Spanish, French and mixed English/Russian and
English/Chinese (``tests/data/multilingual/``).

Why it exists: graphrecall was written for English, and the held-out multilingual set it is measured on is not
ours to look at. This set, written independently, tells how far each embedder and each change to the text layer
(terms, stopwords, stemming, segmentation, the cues like "now" and "last month") carries memory in other languages,
a question in another language than its answer (cross-lingual), a fact that changed, and a relative date.

Each history is ingested into its own scope through ``Memory.add_sessions`` with the embedder named by
``--embedder`` (a spec of ``graphrecall.embed.spec``: ``minilm``, ``e5-small``, ``hashing``...); each question is
asked with ``question_date`` = the day after the last session. The systems and the scoring are the small-store
benchmark's (``benchmarks/sessionrank.py``): graphrecall (``Memory.search``, library defaults), plain BM25,
dense-only and each ``--variant NAME=JSON`` (RetrievalConfig overrides on the defaults) over the same rounds; R@1, R@3 and MRR by gold session. Reported per history language, for
cross-lingual, same-language, changed-fact and relative-date questions, over both halves and each half.

Questions and gold labels never reach the store. Only dev misses are listed (the test half is for reporting).

    python -m benchmarks.multilingual.run --embedder e5-small --split all
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument
from benchmarks.jsonfile import write_json, write_markdown
from benchmarks.multilingual import data
from benchmarks.provenance import Run
from benchmarks.sessionrank import (
    BASE_SYSTEMS,
    SEARCH_K,
    dense_retriever,
    means,
    rank_questions,
    score,
)
from benchmarks.variants import add_variant_argument
from graphrecall import Memory, testing
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.models import Scope
from graphrecall.retrieve.retriever import HybridRetriever

RESULTS = Path("benchmarks/results/multilingual")
LANGUAGE_ORDER = ("ru", "zh", "de", "es", "fr", "en+ru", "en+zh")  # the README's order; others follow, sorted
CATEGORIES = (
    ("cross-lingual", lambda r: r["cross_lingual"]),
    ("same language", lambda r: not r["cross_lingual"]),
    ("changed fact", lambda r: r["changed"]),
    ("relative date", lambda r: r["relative_date"]),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.multilingual.run", description=__doc__.split("\n")[0]
    )
    add_embedder_argument(p)
    p.add_argument("--split", choices=(*data.SPLITS, "all"), default="all")
    p.add_argument("--data-dir", type=Path, default=data.DATA_DIR)
    p.add_argument(
        "--history",
        action="append",
        metavar="ID",
        help="only this history (repeatable): smoke runs and tests",
    )
    p.add_argument("--out", type=Path, help=f"report directory (default {RESULTS}/<embedder>)")
    p.add_argument(
        "--embed-cache",
        type=Path,
        default=RESULTS / "embed_cache.sqlite",
        help="persistent vector cache, keyed by model and text (reruns embed nothing twice)",
    )
    add_variant_argument(
        p,
        reserved=BASE_SYSTEMS,
        help="an extra system: RetrievalConfig overrides on the defaults (repeatable); settings are chosen on one "
        "half and reported on the other",
    )
    return p


def run_history(
    mem: Memory, h: data.History, split: str, retrievers: Sequence[tuple[str, HybridRetriever]]
) -> list[dict[str, Any]]:
    """One history in a fresh scope: every question asked with every system, one row per question."""
    ranked = rank_questions(mem, Scope(org_id="multilingual", user_id=h.id), h, retrievers)
    return [
        {
            "split": split,
            "history": h.id,
            "history_language": h.language,
            "id": q.id,
            "question": q.question,
            "language": q.language,
            "gold": q.gold,
            "gold_round": q.gold_round,
            "changed": q.changed,
            "relative_date": q.relative_date,
            "cross_lingual": q.cross_lingual,
            "top_sessions": {name: s[:3] for name, s in sessions.items()},
            "scores": {name: score(s, q.gold) for name, s in sessions.items()},
        }
        for q, sessions in zip(h.questions, ranked, strict=True)
    ]


def groups(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The reported groups, in table order: all, each history language, then the kinds of question."""
    out: dict[str, list[dict[str, Any]]] = {"all": list(rows)}
    present = {r["history_language"] for r in rows}
    order = [x for x in LANGUAGE_ORDER if x in present] + sorted(present - set(LANGUAGE_ORDER))
    for lang in order:
        out[lang] = [r for r in rows if r["history_language"] == lang]
    for name, keep in CATEGORIES:
        out[name] = [r for r in rows if keep(r)]
    return {g: rs for g, rs in out.items() if rs}


def summarize(rows: Sequence[dict[str, Any]], systems: Sequence[str]) -> dict[str, Any]:
    """{half: {group: {system: means}}} for both halves together and each half present."""
    halves: dict[str, list[dict[str, Any]]] = {"both": list(rows)}
    for split in data.SPLITS:
        halves[split] = [r for r in rows if r["split"] == split]
    if sum(bool(rs) for rs in halves.values()) == 2:  # one half only: "both" would repeat it
        del halves["both"]
    return {
        half: {g: {s: means(rs, s) for s in systems} for g, rs in groups(hrows).items()}
        for half, hrows in halves.items()
        if hrows
    }


def _flags(r: dict[str, Any]) -> str:
    names = [("changed", "changed"), ("relative_date", "relative date"), ("cross_lingual", "cross-lingual")]
    return "; ".join([r["language"], *(label for key, label in names if r[key])])


def render_markdown(summary: dict[str, Any], rows: Sequence[dict[str, Any]], config: dict[str, Any]) -> str:
    systems: list[str] = config["systems"]
    lines = [
        f"# Multilingual retrieval: embedder `{config['embedder']}`",
        "",
        f"Command: `{config['command']}`  ",
        f"Embedder: `{config['embedder']}` ({config['embedder_id']})  ",
        f"Wall {config['wall_s']:.0f} s (the run's commit, machine and load: the last line)",
        "",
        "R@1 / R@3 / MRR by gold session. Rows: all questions, the questions of each history language, then "
        "cross-lingual (asked in another language than the answer was said in), same-language, changed-fact and "
        "relative-date questions.",
    ]
    for half, by_group in summary.items():
        title = "Both halves" if half == "both" else f"{half} half"
        lines += ["", f"## {title}", "", "| group | n | " + " | ".join(systems) + " |"]
        lines.append("|---|---:|" + "---|" * len(systems))
        for group, by_sys in by_group.items():
            n = next(iter(by_sys.values()))["n"]
            cells = [f"{m['r@1']:.3f} / {m['r@3']:.3f} / {m['mrr']:.3f}" for m in by_sys.values()]
            lines.append(f"| {group} | {n} | " + " | ".join(cells) + " |")
    variants = config.get("variants") or {}
    if variants:
        lines += ["", "Variants (RetrievalConfig overrides on the defaults):", ""]
        lines += [f"- `{name}`: `{json.dumps(o)}`" for name, o in variants.items()]
    misses = [r for r in rows if r["split"] == "dev" and r["scores"]["graphrecall"]["r@1"] < 1.0]
    if misses:
        lines += ["", "## Dev questions graphrecall does not answer with its first hit", ""]
        for r in misses:
            lines.append(
                f'- {r["id"]} ({_flags(r)}) "{r["question"]}" gold {r["gold"]}: top '
                f"{r['top_sessions']['graphrecall']} (dense {r['top_sessions']['dense'][:1]}, "
                f"BM25 {r['top_sessions']['bm25'][:1]})"
            )
    return "\n".join(lines) + "\n"


def _slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_") or "default"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    splits = list(data.SPLITS) if args.split == "all" else [args.split]
    histories = data.load_splits(splits, args.data_dir)
    if args.history:
        unknown = sorted(set(args.history) - {h.id for _, h in histories})
        if unknown:
            _parser().error(f"--history {', '.join(unknown)}: not in {', '.join(splits)}")
        histories = [(split, h) for split, h in histories if h.id in args.history]
    out: Path = args.out or RESULTS / _slug(args.embedder)
    out.mkdir(parents=True, exist_ok=True)
    this_run = Run.begin()
    t0 = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="multilingual-"))
    rows: list[dict[str, Any]] = []
    try:
        settings = Settings(root=root, embed_cache=args.embed_cache)
        with Memory.open(root, embedder=args.embedder, settings=settings) as mem:
            embedder_id = mem.embedder.id
            defaults = settings.retrieval.model_dump()
            reranker = testing.retriever(mem).reranker
            retrievers = [
                ("dense", dense_retriever(mem, settings)),
                *(
                    (
                        name,
                        HybridRetriever(mem.embedder, RetrievalConfig.model_validate(defaults | o), reranker),
                    )
                    for name, o in args.variant
                ),
            ]
            for split, h in histories:
                rows += run_history(mem, h, split, retrievers)
                print(
                    f"{split} {h.id} ({h.language}): {len(h.sessions)} sessions, {len(h.questions)} questions"
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    systems = [*BASE_SYSTEMS, *(name for name, _ in args.variant)]
    summary = summarize(rows, systems)
    config: dict[str, Any] = {
        "command": "python -m benchmarks.multilingual.run "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "embedder": args.embedder,
        "embedder_id": embedder_id,
        "splits": splits,
        "histories": [h.id for _, h in histories],
        "systems": systems,
        "variants": dict(args.variant),
        "retrieval_config": settings.retrieval.model_dump(),
        "search_k": SEARCH_K,
        "wall_s": time.perf_counter() - t0,
    }
    write_json(
        out / "multilingual.json",
        {"config": config, "summary": summary, "questions": rows},
        this_run,
        indent=1,
    )
    md = render_markdown(summary, rows, config)
    write_markdown(out / "multilingual.md", md, this_run)
    print("\n" + md)
    print(f"wrote {out / 'multilingual.json'} and {out / 'multilingual.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
