"""Does feedback help ranking? A simulated user on LoCoMo, measured before ``feedback_weight`` gets a default.

Issue 29 asks that whether feedback moves ranking be decided by a measurement. The user: for each question of half
A of a conversation (a seeded split), it searches (``feedback_weight`` 0, as today), marks the best-ranked evidence
round in the top 10 useful and, when the first hit is not evidence, marks that one wrong (``Memory.feedback``).
Then every question of both halves is searched again with each weight: half A measures the same questions asked
again (what feedback is sure to help), half B questions the user never marked (what it does to everything else:
a round marked useful for one question rises in every search of the scope). Two folds (A and B swapped, each on a
fresh ingest) so each question is held out once. R@1: the first hit is an evidence round; recall@10: evidence
turns whose round is in the top 10.

    python -m benchmarks.feedback.simulate --data ../shared/data/locomo/locomo_dev.json.gz --weights 0,0.5,1,2
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.locomo import data
from benchmarks.locomo.retrieval import evidence_recall, evidence_turns, labelled_rounds
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings
from graphrecall.config import RetrievalConfig

K = 10


def _open(root: Path, weight: float, embedder: str | None) -> Memory:
    settings = Settings(root=root, embedder=embedder, retrieval=RetrievalConfig(feedback_weight=weight))
    return Memory.open(root, settings=settings)


def fold(
    conv: data.Conversation, marked: Sequence[data.QA], held: Sequence[data.QA], weights: Sequence[float],
    embedder: str | None,
) -> dict[float, dict[str, list[float]]]:  # fmt: skip
    """Per weight: R@1 and recall@10 of the marked questions asked again and of the held-out ones."""
    rounds = labelled_rounds(conv)
    round_of = {d: r.id for r in rounds for d in r.dia_ids}
    scope = Scope(org_id="feedback", user_id=conv.sample_id)
    qd = conv.last_date + timedelta(days=1)
    out: dict[float, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with _open(root, 0.0, embedder) as mem:
            mem.add_sessions(scope, list(conv.sessions))
            for qa in marked:
                evidence, _ = evidence_turns(qa, round_of)
                gold = {round_of[d] for d in evidence}
                ranked = [h.id for h in mem.search(scope, qa.question, k=K, question_date=qd)]
                hit = next((rid for rid in ranked if rid in gold), None)
                if hit is not None:
                    mem.feedback(scope, hit, useful=True)
                if ranked and ranked[0] not in gold:
                    mem.feedback(scope, ranked[0], useful=False)
        for w in weights:
            scores: dict[str, list[float]] = {
                "marked_r1": [],
                "marked_r10": [],
                "held_r1": [],
                "held_r10": [],
            }
            with _open(root, w, embedder) as mem:
                for name, qas in (("marked", marked), ("held", held)):
                    for qa in qas:
                        evidence, _ = evidence_turns(qa, round_of)
                        gold = {round_of[d] for d in evidence}
                        ranked = [h.id for h in mem.search(scope, qa.question, k=K, question_date=qd)]
                        scores[f"{name}_r1"].append(float(bool(ranked) and ranked[0] in gold))
                        scores[f"{name}_r10"].append(evidence_recall(ranked, evidence, round_of, K))
            out[w] = scores
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="a LoCoMo file (.json or .json.gz)")
    ap.add_argument("--weights", default="0,0.5,1,2", help="feedback_weight values (default: %(default)s)")
    ap.add_argument("--embedder", default=None, help="embedder spec (default: the library's)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/feedback"))
    a = ap.parse_args(argv)
    run = Run.begin()
    weights = [float(x) for x in a.weights.split(",")]
    totals: dict[float, dict[str, list[float]]] = {w: {} for w in weights}
    for conv in data.load(a.data):
        round_of = {d: r.id for r in labelled_rounds(conv) for d in r.dia_ids}
        qas = [qa for qa in conv.qa if evidence_turns(qa, round_of)[0]]
        random.Random(f"{a.seed}:{conv.sample_id}").shuffle(qas)
        half = len(qas) // 2
        for marked, held in ((qas[:half], qas[half:]), (qas[half:], qas[:half])):
            for w, scores in fold(conv, marked, held, weights, a.embedder).items():
                for key, xs in scores.items():
                    totals[w].setdefault(key, []).extend(xs)
            print(f"{conv.sample_id}: fold of {len(marked)} marked, {len(held)} held out", flush=True)
    summary = {
        str(w): {key: statistics.fmean(xs) for key, xs in scores.items()} | {"n": len(scores["held_r1"])}
        for w, scores in totals.items()
    }
    lines = [
        "| feedback_weight | marked questions again: R@1 | recall@10 | held-out questions: R@1 | recall@10 |",
        "|---|---|---|---|---|",
    ]
    for w, s in summary.items():
        lines.append(
            f"| {w} | {s['marked_r1']:.3f} | {s['marked_r10']:.3f} | {s['held_r1']:.3f} | {s['held_r10']:.3f} |"
        )
    report = "\n".join(lines)
    print(report)
    res: dict[str, Any] = {"args": {k: str(v) for k, v in vars(a).items()}, "summary": summary}
    save_report(a.out, "feedback", res, report, run)


if __name__ == "__main__":
    main()
