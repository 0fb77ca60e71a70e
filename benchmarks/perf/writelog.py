"""Append latency of the per-scope write log (``graphrecall.store.wal``): what acknowledging one turn costs.

Each append is one 2-message turn (a new session: one session, two messages, one round) with two 384-d float32
vectors, as ingest would log it. Measured side by side in one run, on the same payloads and directory:
- ``full``: the product setting (WAL, ``synchronous=FULL``: fsync at every commit, durable on power loss);
- ``normal``: ``synchronous=NORMAL`` (no fsync per commit: survives a killed process, not a power loss), the
  floor that shows what the fsync costs on this disk;
- ``full+flusher``: ``full`` while a flusher drains the log in the background with a no-op apply (the cost of
  ``mark_flushed`` competing with appends);
- ``scopelog``: ``ScopeLog.append`` (log append + tail index update + flusher wake-up), flusher running.

    PYTHONPATH=src python -m benchmarks.perf.writelog --n 200 [--dir /path/on/the/disk/to/test]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import percentile
from benchmarks.provenance import Run
from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message, Role
from graphrecall.store.rows import SessionRow
from graphrecall.store.wal import Flusher, ScopeLog, WriteEntry, WriteLog


def turn(i: int, rng: np.random.Generator) -> WriteEntry:
    sid = f"bench-{i}"
    date = datetime(2024, 1, 1, 12, 0)
    msgs = [
        Message(
            role=Role.user, content=f"Turn {i}: I finally booked the flights to Lisbon for our anniversary."
        ),
        Message(role=Role.assistant, content="Lovely! Lisbon in spring is beautiful; want restaurant ideas?"),
    ]
    rows = message_rows(sid, msgs, start_idx=0, date=date)
    rounds = build_rounds(sid, rows)
    return WriteEntry.from_rows(
        sessions=[SessionRow(sid, date)],
        messages=rows,
        rounds=rounds,
        user_vectors=rng.standard_normal((1, 384)).astype(np.float32),
        reply_vectors=rng.standard_normal((1, 384)).astype(np.float32),
        dim=384,
    )


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    p50, p99 = percentile.percentiles(ms, [50, 99])
    return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "max_ms": round(max(ms), 3)}


def run(mode: str, entries: Sequence[WriteEntry], directory: Path) -> dict[str, Any]:
    path = directory / f"{mode}.log.sqlite"
    if mode == "scopelog":
        sl = ScopeLog(path, dim=384, apply=lambda es: None, batch_entries=32, max_age_s=0.05)
        times = []
        for e in entries:
            t0 = time.perf_counter()
            sl.append(e)
            times.append((time.perf_counter() - t0) * 1000)
        sl.close()
        return {"mode": mode, "appends": len(entries), **percentiles(times)}
    log = WriteLog(path)
    if mode == "normal":
        log._db.execute("PRAGMA synchronous=NORMAL")
    flusher = (
        Flusher(log, lambda es: None, batch_entries=32, max_age_s=0.05) if mode == "full+flusher" else None
    )
    times = []
    for e in entries:
        t0 = time.perf_counter()
        log.append(e)
        times.append((time.perf_counter() - t0) * 1000)
        if flusher is not None:
            flusher.notify()
    size = log.size_bytes()
    if flusher is not None:
        flusher.close()
    log.close()
    return {"mode": mode, "appends": len(entries), **percentiles(times), "log_bytes_before_close": size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--dir", type=Path, default=None, help="where the logs go (default: a temp dir)")
    args = ap.parse_args(argv)
    this_run = Run.begin()
    rng = np.random.default_rng(0)
    entries = [turn(i, rng) for i in range(args.n)]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        results = [run(mode, entries, Path(tmp)) for mode in ("full", "normal", "full+flusher", "scopelog")]
    full, normal = results[0], results[1]
    report = {
        "results": results,
        "fsync_cost_ratio_p50": round(full["p50_ms"] / max(normal["p50_ms"], 1e-6), 1),
        "payload_bytes": len(entries[0].payload_json()) + len(entries[0].vector_blob()),
        "run": this_run.finish(),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
