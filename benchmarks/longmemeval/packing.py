"""Context packing on LongMemEval: how much of the evidence the retriever found reaches the reader's context.

For each dev question the haystack is ingested once and the question searched once (``Memory.search``, the
context's own 30 hits, cached in ``hits.jsonl``, so reruns pack without ingesting). Then every candidate packing
(``build_context`` with ``packing="whole"``, and evidence packing with each ``--first-sessions`` limit; 0 = no
limit) packs the same hits at each budget, and each is scored per question: all gold sessions inside
(``sessions_all@B``), all evidence rounds inside (``rounds_all@B``), and the share of the evidence messages shown
whole, verbatim (``evidence_shown@B``: an excerpt that elides the answer counts against it).

The limit is chosen by k-fold cross-validation (``benchmarks/longmemeval/cv.py``, folds stratified by question
type) on ``evidence`` (the mean of rounds_all and evidence_shown over the budgets), ties broken by
``sessions`` (the mean of sessions_all): the report gives the held-out figures beside the in-sample ones.

    python -m benchmarks.longmemeval.packing --data ../shared/data/longmemeval/longmemeval_s_dev.json.gz \\
        --out benchmarks/results/lme_packing --embed-cache /path/embed_cache.sqlite
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument, build_embedder
from benchmarks.jsonfile import data_file, write_json, write_markdown
from benchmarks.longmemeval import cv, data, harness
from benchmarks.provenance import Run
from graphrecall import Memory
from graphrecall.config import Settings
from graphrecall.embed import Embedder
from graphrecall.models import Hit, Scope
from graphrecall.retrieve.context import FIRST_SESSIONS, build_context


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.longmemeval.packing", description=__doc__.split("\n")[0]
    )
    p.add_argument("--data", type=data_file, required=True, help="LongMemEval JSON (.json or .json.gz)")
    p.add_argument(
        "--out", type=Path, required=True, help="directory for hits.jsonl, packing.json and packing.md"
    )
    p.add_argument(
        "--embed-cache", type=Path, default=None, help="SQLite embedding cache shared with other runs"
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument(
        "--budgets", default="2000,4000", help="token budgets, comma-separated (default 2000,4000)"
    )
    p.add_argument(
        "--first-sessions",
        default="4,6,8,10,12,0",
        help="evidence-packing limits to compare, comma-separated; 0 = every session first (default 4,6,8,10,12,0)",
    )
    add_embedder_argument(p)
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.add_argument("--seed", type=int, default=0, help="fold shuffle seed (default 0)")
    return p


def collect(questions: Sequence[data.Question], path: Path, embedder: Embedder) -> list[dict[str, Any]]:
    """Each question's 30 hits and labels, from ``path`` when cached there, else ingested and searched now."""
    done: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            # another model's hits, or hits that name no model, are searched again
            if row.get("embedder") == embedder.id:
                done[row["question_id"]] = row
    todo = [q for q in questions if q.question_id not in done]
    if todo:
        root = Path(tempfile.mkdtemp(prefix="lme-packing-"))
        try:
            settings = Settings(root=root)
            with Memory.open(root, embedder=embedder, settings=settings) as mem, path.open("a") as out:
                for i, q in enumerate(todo, start=1):
                    scope = Scope(org_id="lme", user_id=q.question_id)
                    mem.add_sessions(scope, data.session_inputs(q))
                    qd = data.parse_date(q.question_date)
                    hits = mem.search(scope, q.question, k=harness.CONTEXT_K, question_date=qd)
                    cutoff = mem.recall(scope, qd).cutoff
                    mem.forget(scope)
                    gold = set(q.answer_session_ids)
                    row = {
                        "question_id": q.question_id,
                        "question_type": q.question_type,
                        "embedder": embedder.id,
                        "question": q.question,
                        "question_date": cutoff.question_date.isoformat() if cutoff.question_date else None,
                        "gold_sessions": sorted(gold),
                        "evidence_rounds": sorted(data.evidence_rounds(q)),
                        "evidence_texts": [
                            t.content
                            for s in q.sessions
                            if s.session_id in gold
                            for t in s.turns
                            if t.has_answer
                        ],
                        "hits": [h.model_dump(mode="json") for h in hits],
                    }
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    done[q.question_id] = row
                    print(f"[{i}/{len(todo)}] {q.question_id} {q.question_type}", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return [done[q.question_id] for q in questions]


def score(row: dict[str, Any], budgets: Sequence[int], packing: str, first_sessions: int) -> dict[str, float]:
    """The packing's metrics for one question at each budget, plus the two means cross-validation chooses on."""
    hits = [Hit.model_validate(h) for h in row["hits"]]
    qd = row["question_date"]
    out: dict[str, float] = {}
    for b in budgets:
        ctx = build_context(
            row["question"],
            hits,
            b,
            question_date=None if qd is None else data.parse_date(qd),
            packing="whole" if packing == "whole" else "evidence",
            first_sessions=first_sessions or len(hits) + 1,
        )
        sessions = {h.session_id for h in ctx.hits}
        rounds = {h.id for h in ctx.hits}
        out[f"sessions_all@{b}"] = float(set(row["gold_sessions"]) <= sessions)
        if row["evidence_rounds"]:
            out[f"rounds_all@{b}"] = float(set(row["evidence_rounds"]) <= rounds)
        if row["evidence_texts"]:
            texts = row["evidence_texts"]
            out[f"evidence_shown@{b}"] = sum(t.strip() in ctx.text for t in texts) / len(texts)
    evidence = [v for k, v in out.items() if k.startswith(("rounds_all@", "evidence_shown@"))]
    out["evidence"] = statistics.fmean(evidence) if evidence else 0.0
    out["sessions"] = statistics.fmean(v for k, v in out.items() if k.startswith("sessions_all@"))
    return out


def candidates(limits: Sequence[int]) -> dict[str, tuple[str, int]]:
    """Candidate name -> (packing, first_sessions); the library default first, so a tie keeps it."""
    names = {f"evidence_first{FIRST_SESSIONS}": ("evidence", FIRST_SESSIONS)}
    for n in limits:
        names.setdefault("evidence_first_all" if n == 0 else f"evidence_first{n}", ("evidence", n))
    names["whole"] = ("whole", 0)
    return names


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    this_run = Run.begin()
    budgets = [int(x) for x in args.budgets.split(",") if x.strip()]
    limits = [int(x) for x in args.first_sessions.split(",") if x.strip()]
    if not budgets or any(b < 1 for b in budgets) or any(n < 0 for n in limits):
        print("--budgets must be positive and --first-sessions at least 0", file=sys.stderr)
        return 2
    questions = data.load(args.data, limit=args.limit)
    if not questions:
        print("no questions selected", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    embedder: Embedder = build_embedder(args.embedder, args.embed_cache)
    rows = collect(questions, args.out / "hits.jsonl", embedder)
    systems = candidates(limits)
    items = [
        cv.Item(
            id=r["question_id"],
            group=r["question_type"],
            scores={name: score(r, budgets, p, n) for name, (p, n) in systems.items()},
        )
        for r in rows
    ]
    shown = [f"{m}@{b}" for b in budgets for m in ("sessions_all", "rounds_all", "evidence_shown")]
    means = {name: cv.mean_of(items, name) for name in systems}
    result = cv.cross_validate(
        items, [s for s in systems if s != "whole"], k=args.folds, seed=args.seed, primary="evidence",
        tiebreak="sessions",
    )  # fmt: skip
    report = {"questions": len(items), "budgets": budgets, "systems": means, "cv": result.as_dict()}
    write_json(args.out / "packing.json", report, this_run)
    lines = [
        "# Context packing (LongMemEval dev)",
        "",
        f"Questions: {len(items)}. Command: `python -m benchmarks.longmemeval.packing "
        + " ".join(sys.argv[1:] if argv is None else argv)
        + "`",
        "",
        "| packing | " + " | ".join(shown) + " |",
        "|---|" + "---:|" * len(shown),
    ]
    lines += [
        f"| {name} | " + " | ".join(f"{means[name].get(m, 0.0):.3f}" for m in shown) + " |"
        for name in systems
    ]
    lines += ["", cv.render_markdown(result.as_dict(), shown)]
    write_markdown(args.out / "packing.md", "\n".join(lines), this_run)
    print("\n".join(lines[4:]))
    print(f"\nwrote {args.out / 'packing.md'} and {args.out / 'packing.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
