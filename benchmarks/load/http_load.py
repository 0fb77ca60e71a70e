"""HTTP load test: N concurrent clients across M users doing mixed writes and searches against a graphrecall server.

    .venv/bin/python benchmarks/load/http_load.py --duration 60 --clients 50 --users 20

Starts a server on loopback (``python -m graphrecall.server``, a fresh store, the default embedder unless
``--embedder``) or uses ``--url`` (with ``--key``/``$GRAPHRECALL_API_KEY``). Every user is seeded with one session
before the clock starts (creating a user's database is a one-off cost, not steady state). Then, for ``--duration``
seconds, each client picks a random user and does a write (``POST .../sessions``, a new session id), a search or a
context read. Reports throughput and p50/p95/p99 latency per operation and the number of 5xx answers (must be 0),
then checks that every acknowledged write is stored: all ids by listing each user's sessions, and a sample by
reading each session back. Writes JSON and Markdown to ``--out`` (default benchmarks/results/load/). Exits 1 when a
5xx occurred or an acknowledged write is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from graphrecall.server.testing import ServerProcess

REPO = Path(__file__).resolve().parents[2]
WORDS = (
    "hiking cooking jazz marathon garden python violin sushi paris tokyo budget sister dentist bicycle camera "
    "novel coffee yoga chess kayak museum recipe puppy guitar winter beach laptop insurance wedding"
).split()


@dataclass
class Sample:
    op: str
    status: int  # 0 = transport error
    seconds: float


@dataclass
class Shared:
    samples: list[Sample] = field(default_factory=list)
    acked: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))


def client_loop(
    n: int,
    base: str,
    headers: dict[str, str],
    users: list[str],
    args: argparse.Namespace,
    stop: threading.Event,
    shared: Shared,
) -> None:
    rng = random.Random(args.seed * 1000 + n)
    local: list[Sample] = []
    acked: list[tuple[str, str]] = []
    with httpx.Client(base_url=base, headers=headers, timeout=args.timeout) as c:
        i = 0
        while not stop.is_set():
            user = rng.choice(users)
            path = f"/v1/scopes/{args.org}/{user}"
            roll = rng.random()
            started = time.perf_counter()
            try:
                if roll < args.write_ratio:
                    op, sid = "write", f"c{n}-{i}"
                    body = {
                        "session_id": sid,
                        "messages": [
                            {"role": "user", "content": sentence(rng)},
                            {"role": "assistant", "content": sentence(rng)},
                        ],
                    }
                    r = c.post(f"{path}/sessions", json=body)
                    if r.status_code == 200:
                        acked.append((user, sid))
                elif roll < args.write_ratio + args.context_ratio:
                    op = "context"
                    r = c.get(f"{path}/context", params={"query": sentence(rng), "token_budget": 1000})
                else:
                    op = "search"
                    r = c.get(f"{path}/search", params={"query": sentence(rng), "k": 10})
                status = r.status_code
            except httpx.HTTPError:
                status = 0
            local.append(Sample(op, status, time.perf_counter() - started))
            i += 1
    with shared.lock:
        shared.samples.extend(local)
        shared.acked.extend(acked)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ms = np.asarray(values) * 1000
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return {
        "p50_ms": round(float(p50), 1),
        "p95_ms": round(float(p95), 1),
        "p99_ms": round(float(p99), 1),
        "max_ms": round(float(ms.max()), 1),
    }


def verify(
    c: httpx.Client,
    org: str,
    users: list[str],
    acked: list[tuple[str, str]],
    seeded: dict[str, str],
    fresh: bool,
    rng: random.Random,
    sample: int,
) -> dict[str, Any]:
    """Every acknowledged write is stored: by listing (all of them) and by reading a sample back by id."""
    by_user: dict[str, set[str]] = defaultdict(set)
    for user, sid in acked:
        by_user[user].add(sid)
    missing: list[str] = []
    count_mismatch: list[str] = []
    stored_total = 0
    for user in users:
        r = c.get(f"/v1/scopes/{org}/{user}/sessions", params={"limit": 10_000})
        r.raise_for_status()
        stored = {s["id"] for s in r.json()["sessions"]}
        stored_total += len(stored)
        missing += [f"{user}/{sid}" for sid in sorted(by_user[user] - stored)]
        expected = len(by_user[user]) + (1 if user in seeded else 0)
        if fresh and len(stored) != expected:
            count_mismatch.append(f"{user}: stored {len(stored)}, acknowledged {expected}")
    spot = rng.sample(acked, min(sample, len(acked)))
    spot_failures = []
    for user, sid in spot:
        r = c.get(f"/v1/scopes/{org}/{user}/sessions/{sid}")
        if r.status_code != 200 or len(r.json()["messages"]) != 2:
            spot_failures.append(f"{user}/{sid}: {r.status_code}")
    return {
        "acknowledged_writes": len(acked),
        "stored_sessions": stored_total,
        "missing": missing[:50],
        "missing_count": len(missing),
        "count_mismatch": count_mismatch,
        "spot_checked": len(spot),
        "spot_failures": spot_failures,
        "ok": not missing and not count_mismatch and not spot_failures,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    users = [f"load-user-{i:03d}" for i in range(args.users)]
    key = args.key or os.environ.get("GRAPHRECALL_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    server: ServerProcess | None = None
    workdir = Path(tempfile.mkdtemp(prefix="graphrecall-load-"))
    if args.url:
        base = args.url.rstrip("/")
    else:
        server = ServerProcess(
            workdir / "store",
            embedder=args.embedder,
            extra_args=["--insecure-local"],
            env={"GRAPHRECALL_POOL_SIZE": str(max(16, args.users + 4))},
        )
        server.start(timeout=180)
        base = server.url
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=args.timeout) as c:
            t0 = time.perf_counter()
            seeded: dict[str, str] = {}
            for user in users:  # one-off database creation, outside the measured window
                r = c.post(
                    f"/v1/scopes/{args.org}/{user}/sessions",
                    json={"session_id": "seed", "messages": [{"role": "user", "content": sentence(rng)}]},
                )
                r.raise_for_status()
                seeded[user] = "seed"
            setup_s = time.perf_counter() - t0

            shared = Shared()
            stop = threading.Event()
            threads = [
                threading.Thread(target=client_loop, args=(n, base, headers, users, args, stop, shared))
                for n in range(args.clients)
            ]
            started = time.perf_counter()
            for t in threads:
                t.start()
            time.sleep(args.duration)
            stop.set()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - started
            verification = verify(
                c,
                args.org,
                users,
                shared.acked,
                seeded,
                fresh=server is not None,
                rng=rng,
                sample=args.spot_check,
            )
    finally:
        if server is not None:
            server.stop()

    ops: dict[str, Any] = {}
    for op in ("write", "search", "context"):
        rows = [s for s in shared.samples if s.op == op]
        statuses: dict[str, int] = defaultdict(int)
        for s in rows:
            statuses[str(s.status)] += 1
        ops[op] = {
            "count": len(rows),
            "ok": sum(1 for s in rows if 200 <= s.status < 300),
            "throughput_per_s": round(len(rows) / elapsed, 2),
            **percentiles([s.seconds for s in rows]),
            "statuses": dict(sorted(statuses.items())),
        }
    server_errors = sum(1 for s in shared.samples if s.status >= 500)
    transport_errors = sum(1 for s in shared.samples if s.status == 0)
    return {
        "command": "python benchmarks/load/http_load.py " + shlex.join(sys.argv[1:]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "config": {
            "duration_s": args.duration,
            "clients": args.clients,
            "users": args.users,
            "write_ratio": args.write_ratio,
            "context_ratio": args.context_ratio,
            "embedder": args.embedder if not args.url else "(external server)",
            "url": args.url or "(own)",
        },
        "setup_s": round(setup_s, 1),
        "elapsed_s": round(elapsed, 1),
        "total_requests": len(shared.samples),
        "throughput_per_s": round(len(shared.samples) / elapsed, 2),
        "server_errors": server_errors,
        "transport_errors": transport_errors,
        "operations": ops,
        "verification": verification,
        "workdir": str(workdir),
    }


def markdown(report: dict[str, Any]) -> str:
    cfg, v = report["config"], report["verification"]
    lines = [
        "# HTTP load test",
        "",
        f"`{report['command']}` — {report['when']}, {report['machine']['cpus']} CPUs, embedder {cfg['embedder']}",
        "",
        f"{cfg['clients']} clients, {cfg['users']} users, {report['elapsed_s']} s measured "
        f"(users seeded in {report['setup_s']} s beforehand). {report['total_requests']} requests, "
        f"{report['throughput_per_s']}/s. **5xx: {report['server_errors']}**, transport errors: "
        f"{report['transport_errors']}.",
        "",
        "| operation | requests | 2xx | per s | p50 ms | p95 ms | p99 ms | max ms | statuses |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for op, o in report["operations"].items():
        lines.append(
            f"| {op} | {o['count']} | {o['ok']} | {o['throughput_per_s']} | {o['p50_ms']} | {o['p95_ms']} "
            f"| {o['p99_ms']} | {o['max_ms']} | {o['statuses']} |"
        )
    lines += [
        "",
        f"Verification: {v['acknowledged_writes']} acknowledged writes; {v['missing_count']} missing from the "
        f"session lists; {len(v['count_mismatch'])} count mismatches; {v['spot_checked']} read back by id, "
        f"{len(v['spot_failures'])} failed. **{'OK' if v['ok'] else 'FAILED'}**",
        "",
    ]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--url", help="an already running server (default: start one on loopback)")
    p.add_argument("--key", help="API key for --url (default: $GRAPHRECALL_API_KEY)")
    p.add_argument("--org", default="loadtest")
    p.add_argument(
        "--embedder", default="default", help="for the server this script starts: default | hashing:<dim>"
    )
    p.add_argument("--write-ratio", type=float, default=0.3)
    p.add_argument("--context-ratio", type=float, default=0.1)
    p.add_argument("--timeout", type=float, default=120.0, help="per-request timeout, seconds")
    p.add_argument("--spot-check", type=int, default=50, help="acknowledged writes read back by id")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--keep", action="store_true", help="keep the temporary store and server log")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "load")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    report = run(args)
    passed = report["server_errors"] == 0 and report["verification"]["ok"]
    workdir = Path(report.pop("workdir"))
    if passed and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"store and server log kept in {workdir}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "http_load.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "http_load.md").write_text(markdown(report))
    print(markdown(report))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
