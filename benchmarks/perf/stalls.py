"""What a slow request overlapped: in-process open-loop writes and searches over users whose writes go through
Kuzu, with every storage step and every full garbage collection recorded.

Why: the HTTP benchmark shows a p99, not its cause. This runs the same mix in one process (``Memory`` directly, the
default embedder: the heap is a real one), wraps the steps a flush takes (Kuzu commit and checkpoint under the read
gate, the derived-index update) and the read gate's shared side (a read that waited more than 10 ms is recorded),
listens to the garbage collector, and for each request slower than ``--slow-ms`` counts which steps overlapped it.
``--no-freeze`` leaves the start-up heap to the collector (the server freezes it: ``server/warmup.py``).

    python -m benchmarks.perf.stalls --users 20 --rate 48 --duration 90 --out benchmarks/results/stalls
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.load.http_load import WORDS
from benchmarks.load.openloop import arrival_times
from benchmarks.percentile import percentile, percentiles
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings
from graphrecall.cli_common import positive_int
from graphrecall.store import database

Interval = tuple[str, float, float]


class Recorder:
    """Intervals (kind, start, end) on ``time.perf_counter``, from patched storage steps and the collector."""

    def __init__(self) -> None:
        self.intervals: list[Interval] = []
        self._lock = threading.Lock()
        self._gc_start: float | None = None
        self._undo: list[Callable[[], None]] = []

    def add(self, kind: str, start: float) -> None:
        with self._lock:
            self.intervals.append((kind, start, time.perf_counter()))

    def install(self) -> None:
        gate, db = database._ReadGate, database.ScopeDatabase
        exclusive, shared = gate.exclusive, gate.shared
        checkpoint, apply = db.checkpoint, db._apply_to_indexes
        rec = self

        @contextlib.contextmanager
        def timed_exclusive(self: Any) -> Iterator[None]:
            with exclusive(self):
                t = time.perf_counter()
                try:
                    yield
                finally:
                    rec.add("gate held (commit or checkpoint)", t)

        @contextlib.contextmanager
        def timed_shared(self: Any) -> Iterator[None]:
            t = time.perf_counter()
            with shared(self):
                if time.perf_counter() - t > 0.01:
                    rec.add("read waited at the gate", t)
                yield

        def timed(kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any) -> Any:
                t = time.perf_counter()
                try:
                    return fn(*args)
                finally:
                    rec.add(kind, t)

            return wrapper

        setattr(gate, "exclusive", timed_exclusive)  # noqa: B010 (the patch is the point)
        setattr(gate, "shared", timed_shared)  # noqa: B010
        setattr(db, "checkpoint", timed("checkpoint", checkpoint))  # noqa: B010
        setattr(db, "_apply_to_indexes", timed("derived-index update", apply))  # noqa: B010
        gc.callbacks.append(self._on_gc)
        self._undo = [
            lambda: setattr(gate, "exclusive", exclusive),
            lambda: setattr(gate, "shared", shared),
            lambda: setattr(db, "checkpoint", checkpoint),
            lambda: setattr(db, "_apply_to_indexes", apply),
            lambda: gc.callbacks.remove(self._on_gc),
        ]

    def uninstall(self) -> None:
        for undo in self._undo:
            undo()

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None:
            if info.get("generation") == 2:
                self.add("full garbage collection", self._gc_start)
            self._gc_start = None


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))

    def turn(text: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": text}, {"role": "assistant", "content": sentence()}]

    rec = Recorder()
    settings = Settings(root=root, resident_rounds=0)  # every write goes through Kuzu
    users = [Scope(org_id="bench", user_id=f"u{i}") for i in range(args.users)]
    samples: list[tuple[str, float, float, float]] = []  # op, scheduled, started, finished
    lock = threading.Lock()
    with Memory.open(root, settings=settings) as mem:
        t0 = time.perf_counter()
        for u in users:
            history = [m for _ in range(args.seed_rounds) for m in turn(sentence())]
            mem.add_session(u, history, session_id="seed")
        mem.flush()
        for u in users:
            mem.search(u, "warm up", k=10)
        setup_s = time.perf_counter() - t0
        if args.freeze:
            gc.collect()
            gc.freeze()
        rec.install()

        def do(op: str, user: Scope, sid: str, text: str, scheduled: float) -> None:
            started = time.perf_counter()
            if op == "write":
                mem.add_session(user, turn(text), session_id=sid)
            else:
                mem.search(user, text, k=10)
            with lock:
                samples.append((op, scheduled, started, time.perf_counter()))

        times = arrival_times(args.rate, args.duration, arrivals="poisson", rng=random.Random(args.seed + 1))
        start = time.perf_counter()
        try:
            with ThreadPoolExecutor(args.threads) as pool:
                for i, at in enumerate(times):
                    delay = start + at - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                    op = "write" if rng.random() < args.write_ratio else "search"
                    pool.submit(do, op, rng.choice(users), f"s{i}", sentence(), start + at)
        finally:
            rec.uninstall()
            if args.freeze:
                gc.unfreeze()
    return summarize(args, samples, rec.intervals, setup_s)


def summarize(
    args: argparse.Namespace,
    samples: list[tuple[str, float, float, float]],
    intervals: list[Interval],
    setup_s: float,
) -> dict[str, Any]:
    ops: dict[str, Any] = {}
    for op in ("write", "search"):
        lat = [(end - sched) * 1000 for o, sched, _, end in samples if o == op]
        p50, p90, p99 = percentiles(lat, [50, 90, 99]) if lat else (0.0, 0.0, 0.0)
        ops[op] = {
            "n": len(lat),
            "p50_ms": p50,
            "p90_ms": p90,
            "p99_ms": p99,
            "max_ms": max(lat, default=0.0),
        }
    steps: dict[str, Any] = {}
    by_kind: dict[str, list[float]] = collections.defaultdict(list)
    for kind, a, b in intervals:
        by_kind[kind].append((b - a) * 1000)
    for kind, ms in sorted(by_kind.items()):
        steps[kind] = {
            "n": len(ms),
            "p50_ms": percentile(ms, 50),
            "p99_ms": percentile(ms, 99),
            "max_ms": max(ms),
        }
    slow = []
    for o, sched, started, end in sorted(samples, key=lambda s: s[1] - s[3])[: args.show]:
        if (end - sched) * 1000 < args.slow_ms:
            break
        overlaps = collections.Counter(k for k, a, b in intervals if a < end and b > sched)
        slow.append(
            {
                "op": o,
                "ms": (end - sched) * 1000,
                "queued_ms": (started - sched) * 1000,
                "overlapped": dict(overlaps),
            }
        )
    return {
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "setup_s": setup_s,
        "operations": ops,
        "steps": steps,
        "slowest": slow,
    }


def report(res: dict[str, Any]) -> str:
    c = res["config"]
    lines = [
        f"{c['users']} users of {c['seed_rounds']} rounds (in Kuzu), {c['rate']} requests/s Poisson for "
        f"{c['duration']} s, {c['write_ratio']:.0%} writes, start-up heap "
        f"{'frozen' if c['freeze'] else 'left to the collector'}; latency from each request's scheduled time.",
        "",
        "| operation | n | p50 ms | p90 ms | p99 ms | max ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for op, r in res["operations"].items():
        lines.append(
            f"| {op} | {r['n']} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} |"
        )
    lines += ["", "| step | n | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|"]
    for kind, r in res["steps"].items():
        lines.append(f"| {kind} | {r['n']} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} |")
    if res["slowest"]:
        lines += ["", f"Slowest requests over {c['slow_ms']} ms and the steps they overlapped:", ""]
        for s in res["slowest"]:
            what = ", ".join(f"{k} x{n}" for k, n in s["overlapped"].items()) or "nothing recorded"
            lines.append(f"- {s['op']} {s['ms']:.0f} ms (queued {s['queued_ms']:.0f} ms): {what}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=positive_int, default=20, help="users (default: %(default)s)")
    ap.add_argument(
        "--seed-rounds", type=positive_int, default=100, help="rounds per user first (default: %(default)s)"
    )
    ap.add_argument("--rate", type=float, default=48.0, help="requests per second (default: %(default)s)")
    ap.add_argument("--duration", type=float, default=90.0, help="seconds of load (default: %(default)s)")
    ap.add_argument("--write-ratio", type=float, default=0.5, help="share of writes (default: %(default)s)")
    ap.add_argument("--threads", type=positive_int, default=32, help="request threads (default: %(default)s)")
    ap.add_argument("--slow-ms", type=float, default=150.0, help="a slow request (default: %(default)s)")
    ap.add_argument(
        "--show", type=positive_int, default=10, help="slow requests listed (default: %(default)s)"
    )
    ap.add_argument("--no-freeze", dest="freeze", action="store_false", help="leave the start-up heap to gc")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/stalls"), help="report directory")
    args = ap.parse_args(argv)
    this_run = Run.begin()
    if args.rate <= 0 or args.duration <= 0 or not 0 <= args.write_ratio <= 1:
        ap.error("--rate and --duration must be positive and --write-ratio within 0-1")
    with tempfile.TemporaryDirectory(prefix="stalls-") as tmp:
        res = run(args, Path(tmp))
    save_report(args.out, "stalls", res, report(res), this_run)


if __name__ == "__main__":
    main()
