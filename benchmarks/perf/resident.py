"""Search latency of a scope that lives in its write log against the same scope in Kuzu, by size.

Why: a scope below ``Settings.resident_rounds`` rounds has no Kuzu database; its rounds are searched exactly from
the log's in-memory tail (cosine on both sides, BM25 with the tail's own statistics), merged with the lists of an
empty database. That must not be slower than the indexed path at the sizes where it applies; this measures where
the two cross, to choose the default.

For each size N: one scope written as N single-turn sessions through ``add_session`` (the way a chat assistant
writes), once with ``resident_rounds`` above N (it stays in its log) and once with 0 (flushed into Kuzu and its
derived indexes), alternating, then ``--queries`` searches (k = 10, no reranker, hashing embedder: the store's part
of a search, without the model's query embedding). Prints p50/p95 per size and path, and their ratio.

    python -m benchmarks.perf.resident --sizes 60,250,1000 --queries 200 --out benchmarks/results/resident
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.percentile import percentiles
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings, testing
from graphrecall.cli_common import positive_int, positive_int_list
from graphrecall.embed import HashingEmbedder

SCOPE = Scope(org_id="bench", user_id="u")


def _turn(i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"turn {i}: I bought rye bread at bakery {i} on the way to work"},
        {"role": "assistant", "content": f"Was bakery {i} the one with the sourdough?"},
    ]


def measure(root: Path, rounds: int, resident: bool, queries: int) -> dict[str, float]:
    shutil.rmtree(root, ignore_errors=True)
    settings = Settings(root=root, resident_rounds=rounds + 1 if resident else 0)
    with Memory.open(root, embedder=HashingEmbedder(384), settings=settings) as m:
        for i in range(rounds):
            m.add_session(SCOPE, _turn(i), session_id=f"s{i}")
        if not resident:
            m.flush()
        assert testing.logs(m).resident(SCOPE) is resident  # the path measured is the one named
        for i in range(20):  # warm-up: the empty database, reader connections
            m.search(SCOPE, f"which bakery {i} sold rye", k=10)
        times = []
        for i in range(queries):
            t0 = time.perf_counter()
            m.search(SCOPE, f"which bakery {i} sold rye bread", k=10)
            times.append((time.perf_counter() - t0) * 1000)
    p50, p95 = percentiles(times, [50, 95])
    return {"p50_ms": p50, "p95_ms": p95}


def run(work: Path, sizes: list[int], queries: int, pairs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in sizes:
        runs: dict[str, list[dict[str, float]]] = {"resident": [], "kuzu": []}
        for _ in range(pairs):
            for name in ("resident", "kuzu"):
                runs[name].append(measure(work / f"{name}{n}", n, name == "resident", queries))
        row: dict[str, Any] = {
            name: {k: statistics.median(r[k] for r in rs) for k in ("p50_ms", "p95_ms")}
            for name, rs in runs.items()
        }
        row["p50_ratio"] = row["resident"]["p50_ms"] / row["kuzu"]["p50_ms"]
        out[str(n)] = row
        print(
            f"  {n} rounds: in the log p50 {row['resident']['p50_ms']:.2f} ms, in Kuzu "
            f"{row['kuzu']['p50_ms']:.2f} ms (ratio {row['p50_ratio']:.2f})",
            flush=True,
        )
    return out


def report(res: dict[str, Any]) -> str:
    lines = [
        "| rounds | in its log p50 / p95 ms | in Kuzu p50 / p95 ms | log / Kuzu (p50) |",
        "|---:|---|---|---:|",
    ]
    for n, r in res.items():
        a, b = r["resident"], r["kuzu"]
        lines.append(
            f"| {int(n):,} | {a['p50_ms']:.2f} / {a['p95_ms']:.2f} | {b['p50_ms']:.2f} / {b['p95_ms']:.2f} | "
            f"{r['p50_ratio']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sizes",
        type=positive_int_list,
        default=[60, 250, 1000],
        help="rounds per scope (default: 60,250,1000)",
    )
    ap.add_argument(
        "--queries", type=positive_int, default=200, help="searches per run (default: %(default)s)"
    )
    ap.add_argument(
        "--pairs", type=positive_int, default=2, help="alternating runs of both paths (default: %(default)s)"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/resident"), help="report directory")
    a = ap.parse_args()
    this_run = Run.begin()
    with tempfile.TemporaryDirectory() as tmp:
        res = run(Path(tmp), a.sizes, a.queries, a.pairs)
    save_report(a.out, "resident", res, report(res), this_run)


if __name__ == "__main__":
    main()
