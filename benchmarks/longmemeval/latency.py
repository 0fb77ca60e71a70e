"""What a retrieval setting costs per search, on LongMemEval haystacks (~500 rounds per question).

Each question's haystack is ingested once through ``Memory.add_sessions`` and flushed into Kuzu; then every system
(the defaults, ``ours``, and each ``--variant``) searches it ``--repeats`` times, the systems taking turns within
each repeat so that machine noise falls on all of them alike. The query vector is in the embedding cache after
the first search, so the figures are the search without the query's embedding: what a setting adds on top of it.
Reported per system: p50 and p95 over every search, and the ratio of its p50 to ours (one run, one machine).

    python -m benchmarks.longmemeval.latency --data ../shared/data/longmemeval/longmemeval_s_dev.json.gz \\
        --types temporal-reasoning --limit 10 --variant 'ir={"in_range_weight": 0.5}'
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument, build_embedder
from benchmarks.jsonfile import data_file, write_json, write_markdown
from benchmarks.longmemeval import data, harness
from benchmarks.percentile import percentile
from benchmarks.provenance import Run
from benchmarks.variants import add_variant_argument
from graphrecall import Settings, testing
from graphrecall.models import Scope
from graphrecall.retrieve.timeparse import parse_time_range


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.longmemeval.latency",
        description="Search latency of retrieval settings side by side, on LongMemEval haystacks.",
    )
    p.add_argument("--data", type=data_file, required=True, help="longmemeval_s*.json[.gz]")
    p.add_argument("--types", default="", help="comma-separated question types to keep (default: all)")
    p.add_argument("--limit", type=int, default=10, help="questions to use (default 10)")
    p.add_argument(
        "--time-range-only",
        action="store_true",
        help="keep only questions with a time expression the retriever parses (what time settings cost)",
    )
    p.add_argument("--repeats", type=int, default=5, help="searches per question and system (default 5)")
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    add_embedder_argument(p)
    add_variant_argument(
        p, reserved=("ours",), help="a system: RetrievalConfig overrides on the defaults (repeatable)"
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/longmemeval"))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    this_run = Run.begin()
    if args.limit < 1 or args.repeats < 1:
        raise SystemExit("--limit and --repeats must be at least 1")
    types = {t.strip() for t in args.types.split(",") if t.strip()}
    questions = data.load(args.data, types=types or None)
    if args.time_range_only:
        questions = [
            q for q in questions if parse_time_range(q.question, data.parse_date(q.question_date)) is not None
        ]
    questions = questions[: args.limit]
    if not questions:
        raise SystemExit(
            f"no questions left in {args.data} (types {sorted(types) or 'all'}, --time-range-only {args.time_range_only})"
        )
    embedder = build_embedder(args.embedder, args.embed_cache)
    settings = Settings.from_env()
    systems = {"ours": {}, **dict(args.variant)}
    times: dict[str, list[float]] = {name: [] for name in systems}
    for i, q in enumerate(questions, start=1):
        with harness.temporary_store("lme-latency-", embedder, settings) as mem:
            scope = Scope(org_id="lme", user_id=q.question_id)
            mem.add_sessions(scope, data.session_inputs(q))
            mem.flush()
            cutoff = mem.recall(scope, data.parse_date(q.question_date)).cutoff
            retrievers = {
                name: harness.variant_retriever(mem, settings.retrieval, overrides)
                for name, overrides in systems.items()
            }
            with testing.database(mem, scope) as db:
                for r in retrievers.values():  # warm: the query vector into the cache, the indexes loaded
                    r.search(db, q.question, 10, cutoff=cutoff)
                for _ in range(args.repeats):
                    for name, r in retrievers.items():
                        t0 = time.perf_counter()
                        r.search(db, q.question, 10, cutoff=cutoff)
                        times[name].append((time.perf_counter() - t0) * 1000)
        print(f"[{i}/{len(questions)}] {q.question_id} {q.question_type}", flush=True)
    base = percentile(times["ours"], 50)
    rows: list[dict[str, Any]] = [
        {
            "system": name,
            "overrides": systems[name],
            "p50_ms": percentile(ts, 50),
            "p95_ms": percentile(ts, 95),
            "ratio_p50": percentile(ts, 50) / base,
            "searches": len(ts),
        }
        for name, ts in times.items()
    ]
    lines = [
        f"Command: `python -m benchmarks.longmemeval.latency {' '.join(sys.argv[1:] if argv is None else argv)}`",
        "",
        f"{len(questions)} questions x {args.repeats} searches per system (query vector cached); embedder "
        f"`{args.embedder}` ({embedder.id}).",
        "",
        "| system | overrides | p50 ms | p95 ms | p50 / ours |",
        "|---|---|---:|---:|---:|",
        *(
            f"| {r['system']} | `{json.dumps(r['overrides'])}` | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
            f"{r['ratio_p50']:.2f} |"
            for r in rows
        ),
    ]
    report = "\n".join(lines)
    print("\n" + report)
    write_markdown(args.out / "latency.md", report, this_run)
    write_json(
        args.out / "latency.json",
        {
            "questions": len(questions),
            "repeats": args.repeats,
            "embedder": args.embedder,
            "embedder_id": embedder.id,
            "systems": rows,
        },
        this_run,
    )
    print(f"\nwrote {args.out / 'latency.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
