"""What the database pool's size costs and saves: searches over more users than the pool keeps open, and memory per
open scope.

Why: ``DatabasePool`` keeps at most ``Settings.pool_size`` scope databases open (LRU). A request for a scope that
is not open opens its Kuzu database and derived indexes and closes another; with more active users than the pool
holds, a share of requests pays that. This runs ``--queries`` searches, each for a user drawn at random from
``--users`` warm scopes (``--rounds`` rounds each, in Kuzu), once per pool size, alternating, and reports mean and
p50 search time and how many databases were opened; then the resident memory of a process holding N open scopes.
Hashing embedder: the store's part of a search only.

    python -m benchmarks.perf.pool --users 20 --sizes 16,32 --queries 400 --out benchmarks/results/pool
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.percentile import percentile
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings, testing
from graphrecall.cli_common import positive_int, positive_int_list
from graphrecall.embed import HashingEmbedder


def _turn(i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"turn {i}: I walked past bakery {i} today and bought rye bread"},
        {"role": "assistant", "content": f"Nice, was bakery {i} the one with sourdough?"},
    ]


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _open(root: Path, pool_size: int) -> Memory:
    settings = Settings(root=root, pool_size=pool_size, resident_rounds=0)  # every scope in Kuzu
    return Memory.open(root, embedder=HashingEmbedder(384), settings=settings)


def run(root: Path, users: int, rounds: int, sizes: list[int], queries: int, pairs: int) -> dict[str, Any]:
    scopes = [Scope(org_id="bench", user_id=f"u{i}") for i in range(users)]
    sessions = [{"session_id": f"s{j}", "date": "2024-01-01", "messages": _turn(j)} for j in range(rounds)]
    with _open(root, max(sizes)) as m:
        for s in scopes:
            m.add_sessions(s, sessions)
    out: dict[str, Any] = {"users": users, "rounds": rounds, "queries": queries, "search": {}}
    for size in [x for _ in range(pairs) for x in sizes]:
        with _open(root, size) as m:
            rng = random.Random(1)
            for s in scopes:  # warm: every scope opened once, the pool full
                m.search(s, "bakery rye", k=10)
            opened = testing.pool(m).opens
            times = []
            for i in range(queries):
                t0 = time.perf_counter()
                m.search(rng.choice(scopes), f"bakery {i} rye", k=10)
                times.append((time.perf_counter() - t0) * 1000)
            row = out["search"].setdefault(str(size), {"mean_ms": [], "p50_ms": [], "opens": []})
            row["mean_ms"].append(statistics.mean(times))
            row["p50_ms"].append(percentile(times, 50))
            row["opens"].append(testing.pool(m).opens - opened)
    with _open(root, users) as m:
        base = _rss_mb()
        for s in scopes:
            m.search(s, "bakery", k=10)
        out["rss_mb_per_open_scope"] = (_rss_mb() - base) / users
    return out


def report(res: dict[str, Any]) -> str:
    lines = [
        f"{res['queries']} searches over {res['users']} users of {res['rounds']} rounds each, users drawn at random:",
        "",
        "| pool size | mean ms | p50 ms | databases opened |",
        "|---:|---:|---:|---:|",
    ]
    for size, r in res["search"].items():
        lines.append(
            f"| {size} | {statistics.median(r['mean_ms']):.1f} | {statistics.median(r['p50_ms']):.1f} | "
            f"{statistics.median(r['opens']):.0f} |"
        )
    lines.append("")
    lines.append(f"Resident memory per open scope: {res['rss_mb_per_open_scope']:.1f} MB")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=positive_int, default=20, help="warm scopes (default: %(default)s)")
    ap.add_argument(
        "--rounds", type=positive_int, default=100, help="rounds per scope (default: %(default)s)"
    )
    ap.add_argument("--sizes", type=positive_int_list, default=[16, 32], help="pool sizes (default: 16,32)")
    ap.add_argument(
        "--queries", type=positive_int, default=400, help="searches per run (default: %(default)s)"
    )
    ap.add_argument(
        "--pairs", type=positive_int, default=2, help="runs per size, alternating (default: %(default)s)"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/pool"), help="report directory")
    a = ap.parse_args()
    this_run = Run.begin()
    with tempfile.TemporaryDirectory() as tmp:
        res = run(Path(tmp), a.users, a.rounds, a.sizes, a.queries, a.pairs)
    save_report(a.out, "pool", res, report(res), this_run)


if __name__ == "__main__":
    main()
