"""The prompt hook's relevance threshold: at what similarity a stored exchange is relevant to a prompt.

``relevance.json`` holds a coding project's memory (24 exchanges in 12 sessions) and 48 prompts: 24 that each ask
about one stored exchange in other words, 24 about the same project's other work (the hard case: same vocabulary,
nothing stored on it). For each prompt the store is searched (k=5) as the prompt hook searches it, and the prompt's
score is the best ``vector`` signal among the hits (``hooks.relevance`` keeps hits at or above the threshold, so a
prompt gets context exactly when its best hit reaches it). The threshold is the midpoint of the widest interval of
best accuracy over the 48 prompts; 5-fold cross-validation (thresholds chosen on four folds, scored on the fifth)
says how well such a choice holds on prompts it was not chosen on.

    python -m benchmarks.hooks.relevance --out benchmarks/results/hooks
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.arguments import DEFAULT_EMBEDDER, add_embedder_argument
from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run
from graphrecall import Memory, Scope

DATA = Path(__file__).with_name("relevance.json")
SCOPE = Scope(org_id="bench", user_id="_project-tidewater")
FOLDS = 5


def best_threshold(scored: list[tuple[float, bool]]) -> tuple[float, float]:
    """(threshold, accuracy): the midpoint of the widest interval of best accuracy of ``score >= threshold``."""
    values = sorted({s for s, _ in scored})
    cuts = [
        values[0] - 0.01,
        *((a + b) / 2 for a, b in itertools.pairwise(values)),
        values[-1] + 0.01,
    ]
    best: tuple[float, float, float] = (-1.0, 0.0, 0.0)  # accuracy, -width, threshold
    for i, t in enumerate(cuts):
        acc = sum((s >= t) == rel for s, rel in scored) / len(scored)
        width = (cuts[i + 1] - cuts[i - 1]) if 0 < i < len(cuts) - 1 else 0.0
        if (acc, width) > best[:2]:
            best = (acc, width, t)
    return round(best[2], 3), best[0]


def cross_validate(scored: list[tuple[float, bool]]) -> dict[str, Any]:
    correct, chosen = 0, []
    for fold in range(FOLDS):
        train = [x for i, x in enumerate(scored) if i % FOLDS != fold]
        test = [x for i, x in enumerate(scored) if i % FOLDS == fold]
        t, _ = best_threshold(train)
        chosen.append(t)
        correct += sum((s >= t) == rel for s, rel in test)
    return {"accuracy": round(correct / len(scored), 3), "thresholds": chosen}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_embedder_argument(p, default=DEFAULT_EMBEDDER)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/hooks"), help="report directory")
    args = p.parse_args(argv)
    run = Run.begin()
    data = json.loads(DATA.read_text())
    prompts = [(q, True, i) for i, q in enumerate(data["related"])] + [
        (q, False, -1) for q in data["unrelated"]
    ]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, Memory.open(tmp, embedder=args.embedder) as mem:
        for s in data["sessions"]:
            mem.add_session(SCOPE, s["messages"], session_id=s["session_id"], date=s["date"])
        order = [f"{s['session_id']}@{r}" for s in data["sessions"] for r in range(len(s["messages"]) // 2)]
        embedder_id = mem.embedder.id
        for query, related, target in prompts:
            hits = mem.search(SCOPE, query, k=5)
            best = max(hits, key=lambda h: h.signals.get("vector", 0.0))
            rows.append({
                "prompt": query, "related": related, "score": round(best.signals.get("vector", 0.0), 4),
                "best_is_target": related and best.id == order[target],
            })  # fmt: skip
    interleaved = [
        r for pair in zip(rows[:24], rows[24:], strict=True) for r in pair
    ]  # folds hold both kinds
    scored = [(r["score"], r["related"]) for r in interleaved]
    threshold, accuracy = best_threshold(scored)
    cv = cross_validate(scored)
    kept_related = [r for r in rows if r["related"] and r["score"] >= threshold]
    kept_unrelated = [r for r in rows if not r["related"] and r["score"] >= threshold]
    result = {
        "embedder": embedder_id,
        "threshold": threshold,
        "accuracy": round(accuracy, 3),
        "cross_validation": cv,
        "related_with_context": len(kept_related),
        "unrelated_with_context": len(kept_unrelated),
        "related_best_hit_is_the_exchange": sum(r["best_is_target"] for r in rows if r["related"]),
        "rows": rows,
    }

    def spread(related: bool) -> str:
        xs = sorted(r["score"] for r in rows if r["related"] == related)
        return f"{xs[0]:.2f} / {xs[len(xs) // 2]:.2f} / {xs[-1]:.2f}"

    md = "\n".join([
        f"Embedder `{embedder_id}`; best vector similarity among 5 hits per prompt (min / median / max): related "
        f"{spread(True)}, unrelated {spread(False)}.",
        "",
        "| threshold | accuracy (48 prompts) | 5-fold CV accuracy | related prompts given context | unrelated "
        "prompts given context | related: best hit is the asked exchange |",
        "|---|---|---|---|---|---|",
        f"| {threshold:.3f} | {accuracy:.3f} | {cv['accuracy']:.3f} (fold thresholds {', '.join(f'{t:.3f}' for t in cv['thresholds'])}) | "
        f"{len(kept_related)}/24 | {len(kept_unrelated)}/24 | {result['related_best_hit_is_the_exchange']}/24 |",
    ])  # fmt: skip
    save_report(args.out, "relevance", result, md, run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
