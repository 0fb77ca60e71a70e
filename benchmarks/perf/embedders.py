"""What an embedder costs a store: ingest rounds/s, search p50 at a size, a single turn's write p50, bytes per round;
each embedder given by its spec, all in one run so their ratios hold on a noisy machine.

    python -m benchmarks.perf.embedders --embedders minilm,e5-small --rounds 1000 --out benchmarks/results/embedders

Each embedder gets a fresh store of its own, filled with the first ``--rounds`` rounds of LongMemEval_S dev sessions
(real chat text, long assistant replies included) through ``Memory.add_sessions``, uncached: the model's whole cost
is in the ingest figure. Then ``--queries`` of the dataset's questions are searched (p50 of the wall time; the query
embedding included), and ``--turns`` two-message sessions are written one call each, as a chat assistant does after
every exchange (p50). Bytes per round: the scope's files on disk after a flush, over its rounds.

100k rounds are not run per embedder: embedding them with e5-small takes hours on 2 cores; search at that size is
the store's cost, measured with MiniLM vectors in ``benchmarks.perf.run`` (docs/benchmarks.md "Speed and scale"),
and a model of another dimension changes only the vector scan's share of it (384 dimensions for both models here).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import arguments
from benchmarks.jsonfile import save_report
from benchmarks.percentile import percentile
from benchmarks.perf import corpus
from benchmarks.provenance import Run
from graphrecall import Memory
from graphrecall.embed.spec import embedder_from_spec
from graphrecall.models import Scope

SCOPE = Scope(org_id="bench", user_id="embedders")


def _disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def measure(spec: str, data: corpus.Corpus, rounds: int, queries: int, turns: int) -> dict[str, Any]:
    embedder = embedder_from_spec(spec)
    sessions = data.take_rounds(rounds)
    n_rounds = sum(len(s.rounds) for s in sessions)
    root = Path(tempfile.mkdtemp(prefix="perf-embedders-"))
    try:
        with Memory.open(root, embedder=embedder) as m:
            m.search(SCOPE, "warm up", 1)  # model loaded before the clock starts
            t0 = time.perf_counter()
            for start in range(0, len(sessions), 50):
                m.add_sessions(SCOPE, [s.as_input() for s in sessions[start : start + 50]])
            m.flush()
            ingest_s = time.perf_counter() - t0
            disk = _disk(root)
            qs = [q for q, _ in data.questions[:queries]]
            searches = []
            for q in qs:
                t = time.perf_counter()
                m.search(SCOPE, q, 10)
                searches.append((time.perf_counter() - t) * 1000)
            writes = []
            for i in range(turns):
                t = time.perf_counter()
                m.add_session(
                    SCOPE,
                    [
                        {
                            "role": "user",
                            "content": f"Turn {i}: I repotted the fern and it looks happier now.",
                        },
                        {"role": "assistant", "content": "Great, keep it out of direct sun."},
                    ],
                    session_id=f"turn-{i}",
                )
                writes.append((time.perf_counter() - t) * 1000)
            return {
                "embedder": embedder.id,
                "dim": embedder.dim,
                "rounds": n_rounds,
                "ingest_rounds_per_s": n_rounds / ingest_s,
                "search_p50_ms": percentile(searches, 50),
                "search_p95_ms": percentile(searches, 95),
                "turn_write_p50_ms": percentile(writes, 50),
                "bytes_per_round": disk / n_rounds,
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"# Embedders ({rows[0]['rounds']} rounds of LongMemEval_S dev)",
        "",
        "| embedder | dim | ingest rounds/s | search p50 / p95 ms | one turn's write p50 ms | bytes per round |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['embedder']} | {r['dim']} | {r['ingest_rounds_per_s']:.1f} | {r['search_p50_ms']:.1f} / "
            f"{r['search_p95_ms']:.1f} | {r['turn_write_p50_ms']:.1f} | {r['bytes_per_round']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.perf.embedders", description=__doc__.split("\n")[0]
    )
    p.add_argument("--embedders", default="minilm,e5-small", help="comma-separated specs (see --help of any "
                   "retrieval benchmark's --embedder)")  # fmt: skip
    p.add_argument("--data", type=Path, default=corpus.DATA, help="LongMemEval_S (.json or .json.gz)")
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--turns", type=int, default=30)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/embedders"))
    args = p.parse_args(argv)
    this_run = Run.begin()
    data = corpus.load(args.data)
    rows = []
    for spec in (s.strip() for s in args.embedders.split(",") if s.strip()):
        print(f"{arguments.embedder_spec(spec)}: {args.rounds} rounds ...", file=sys.stderr)
        rows.append(measure(spec, data, args.rounds, args.queries, args.turns))
    save_report(
        args.out,
        "embedders",
        {"rows": rows, "args": vars(args) | {"data": str(args.data)}},
        markdown(rows),
        this_run,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
