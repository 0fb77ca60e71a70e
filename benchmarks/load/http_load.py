"""HTTP load test: mixed writes, searches and context reads across M users against a graphrecall server.

Two modes; the report says which one ran.

**Closed loop** (default): ``--clients N`` threads, each sending its next request as soon as the previous answer
arrived, with no think time. It finds the saturation throughput; its latency is mostly each request queueing
behind the other clients' requests, so it says little about what one user waits at a given load.

    python -m benchmarks.load.http_load --duration 60 --clients 50 --users 20

**Open loop** (``--rate R``): R requests per second on a schedule drawn before the run (``--arrivals poisson``,
the default, or ``fixed``), each sent at its time however long earlier requests take, up to ``--max-inflight``
at once (``benchmarks/load/openloop.py``). Latency is measured from the *scheduled* send time, so a request that
waited in the client counts that wait (no coordinated omission), and the report says how often and by how much
the client fell behind schedule. Issue 10's latency targets apply at half the closed loop's throughput.

    python -m benchmarks.load.http_load --duration 30 --rate 10 --users 5

Starts a server on loopback (``python -m graphrecall.server``, a fresh store, the default embedder unless
``--embedder``) or uses ``--url`` (with ``--key``/``$GRAPHRECALL_API_KEY``). Every user is seeded with one session
before the clock starts: one user message by default (a new user, who lives in its write log until it has 64 rounds),
or ``--seed-rounds N`` rounds (with N > 64, a user with a past whose writes go through Kuzu from the start). A request picks a random
user and does a write (``POST .../sessions``, a new session id), a search or a context read. Reports throughput,
errors and p50/p95/p99 latency per operation and the number of 5xx answers (must be 0), then checks that every
acknowledged write is stored: all ids and the count per user by listing each user's sessions, and a sample by
reading each session back and comparing its text. ``--kill-after S`` kills the server it started with SIGKILL
after S seconds of load, restarts it on the same root and runs that check against the restarted server. Writes
JSON and Markdown to ``--out`` (default benchmarks/results/load/). Exits 1 when a 5xx occurred or an acknowledged
write is missing.
"""

from __future__ import annotations

import argparse
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

from graphrecall.server.testing import ServerProcess

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO))  # run as a script, the repository root (home of `benchmarks`) is not on the path
from benchmarks import percentile  # noqa: E402
from benchmarks.jsonfile import write_json, write_markdown  # noqa: E402
from benchmarks.load.openloop import OpenLoopRun, arrival_times, run_open_loop  # noqa: E402
from benchmarks.provenance import Run  # noqa: E402

WORDS = (
    "hiking cooking jazz marathon garden python violin sushi paris tokyo budget sister dentist bicycle camera "
    "novel coffee yoga chess kayak museum recipe puppy guitar winter beach laptop insurance wedding"
).split()
OPS = ("write", "search", "context")
# Issue 10's latency targets (p50, p99 in ms), for an open-loop run at half the measured saturation rate.
TARGETS_MS = {"write": (30.0, 200.0), "search": (50.0, 300.0)}


@dataclass(frozen=True)
class Planned:
    """One request, drawn before it is sent (the open loop draws the whole run up front, so it is reproducible
    whatever the timing)."""

    op: str  # write | search | context
    user: str
    sid: str = ""  # write: the new session's id
    texts: tuple[str, ...] = ()  # write: the messages' contents, compared when the session is read back
    query: str = ""  # search, context


@dataclass(frozen=True)
class Acked:
    user: str
    sid: str
    texts: tuple[str, ...]


@dataclass
class Sample:
    op: str
    status: int  # 0 = transport error
    seconds: float  # closed loop: from the send; open loop: from the scheduled send time
    service: float | None = None  # open loop: from the actual send
    lag: float | None = None  # open loop: how late the client sent it


@dataclass
class Shared:
    samples: list[Sample] = field(default_factory=list)
    acked: list[Acked] = field(default_factory=list)
    attempted: set[tuple[str, str]] = field(default_factory=set)  # (user, sid) of every write sent
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, p: Planned, sample: Sample) -> None:
        with self.lock:
            self.samples.append(sample)
            if p.op == "write":
                self.attempted.add((p.user, p.sid))
                if 200 <= sample.status < 300:
                    self.acked.append(Acked(p.user, p.sid, p.texts))


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))


def plan(rng: random.Random, users: list[str], args: argparse.Namespace, sid: str) -> Planned:
    user = rng.choice(users)
    roll = rng.random()
    if roll < args.write_ratio:
        return Planned("write", user, sid=sid, texts=(sentence(rng), sentence(rng)))
    if roll < args.write_ratio + args.context_ratio:
        return Planned("context", user, query=sentence(rng))
    return Planned("search", user, query=sentence(rng))


def send(c: httpx.Client, org: str, p: Planned) -> int:
    """The HTTP status, or 0 when the request failed in transport (refused, reset, timed out)."""
    path = f"/v1/scopes/{org}/{p.user}"
    try:
        if p.op == "write":
            roles = ("user", "assistant")
            messages = [{"role": role, "content": text} for role, text in zip(roles, p.texts, strict=True)]
            r = c.post(f"{path}/sessions", json={"session_id": p.sid, "messages": messages})
        elif p.op == "context":
            r = c.get(f"{path}/context", params={"query": p.query, "token_budget": 1000})
        else:
            r = c.get(f"{path}/search", params={"query": p.query, "k": 10})
    except httpx.HTTPError:
        return 0
    return r.status_code


def client_loop(
    n: int,
    base: str,
    headers: dict[str, str],
    users: list[str],
    args: argparse.Namespace,
    stop: threading.Event,
    shared: Shared,
) -> None:
    """One closed-loop client: the next request goes out when the previous answer is in."""
    rng = random.Random(args.seed * 1000 + n)
    with httpx.Client(base_url=base, headers=headers, timeout=args.timeout) as c:
        i = 0
        while not stop.is_set():
            p = plan(rng, users, args, f"c{n}-{i}")
            started = time.perf_counter()
            status = send(c, args.org, p)
            shared.record(p, Sample(p.op, status, time.perf_counter() - started))
            i += 1


def closed_loop(
    base: str, headers: dict[str, str], users: list[str], args: argparse.Namespace, stop: threading.Event
) -> Shared:
    shared = Shared()
    threads = [
        threading.Thread(target=client_loop, args=(n, base, headers, users, args, stop, shared))
        for n in range(args.clients)
    ]
    for t in threads:
        t.start()
    stop.wait(args.duration)
    stop.set()
    for t in threads:
        t.join()
    return shared


def open_loop(
    base: str, headers: dict[str, str], users: list[str], args: argparse.Namespace, stop: threading.Event
) -> tuple[Shared, OpenLoopRun[int]]:
    """``--rate`` requests per second on a schedule drawn up front; latency from each scheduled send time."""
    rng = random.Random(args.seed)
    times = arrival_times(args.rate, args.duration, arrivals=args.arrivals, rng=random.Random(args.seed + 1))
    plans = [plan(rng, users, args, f"o{i}") for i in range(len(times))]
    # One connection per worker: a request never waits for a connection inside httpx.
    limits = httpx.Limits(max_connections=args.max_inflight, max_keepalive_connections=args.max_inflight)
    with httpx.Client(base_url=base, headers=headers, timeout=args.timeout, limits=limits) as c:
        run = run_open_loop(
            times, lambda i: send(c, args.org, plans[i]), workers=args.max_inflight, stop=stop
        )
    shared = Shared()
    for timing, status in run.results:
        p = plans[timing.index]
        shared.record(p, Sample(p.op, status, timing.latency, service=timing.service, lag=timing.lag))
    return shared, run


def percentiles(values: list[float], prefix: str = "") -> dict[str, float]:
    if not values:
        return {f"{prefix}{k}": 0.0 for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms")}
    ms = [v * 1000 for v in values]
    p50, p95, p99 = percentile.percentiles(ms, [50, 95, 99])
    return {
        f"{prefix}p50_ms": round(p50, 1),
        f"{prefix}p95_ms": round(p95, 1),
        f"{prefix}p99_ms": round(p99, 1),
        f"{prefix}max_ms": round(max(ms), 1),
    }


def verify(
    c: httpx.Client,
    org: str,
    users: list[str],
    shared: Shared,
    seeded: dict[str, str],
    *,
    own_store: bool,
    crashed: bool,
    rng: random.Random,
    sample: int,
) -> dict[str, Any]:
    """Every acknowledged write is stored: by listing each user's sessions (every id, and the count) and by
    reading a sample back by id and comparing the text.

    On a store this script created, a user's sessions must be exactly the seed plus the acknowledged writes; after
    a kill -9 a write that was in flight may have been stored without its acknowledgement, so the list must lie
    between the acknowledged and the attempted writes. An external server may hold others' sessions: only the ids
    are checked there.
    """
    acked: dict[str, set[str]] = defaultdict(set)
    attempted: dict[str, set[str]] = defaultdict(set)
    for a in shared.acked:
        acked[a.user].add(a.sid)
    for user, sid in shared.attempted:
        attempted[user].add(sid)
    missing: list[str] = []
    count_mismatch: list[str] = []
    stored_total = 0
    for user in users:
        r = c.get(f"/v1/scopes/{org}/{user}/sessions", params={"limit": 10_000})
        r.raise_for_status()
        stored = {s["id"] for s in r.json()["sessions"]}
        stored_total += len(stored)
        missing += [f"{user}/{sid}" for sid in sorted(acked[user] - stored)]
        seed = {seeded[user]} if user in seeded else set()
        if not own_store:
            continue
        if not crashed and stored != acked[user] | seed:
            count_mismatch.append(f"{user}: stored {len(stored)}, acknowledged {len(acked[user] | seed)}")
        elif crashed and not stored <= attempted[user] | seed:
            never_sent = sorted(stored - attempted[user] - seed)[:5]
            count_mismatch.append(f"{user}: stored {len(stored)}, including never-sent {never_sent}")
    spot = rng.sample(shared.acked, min(sample, len(shared.acked)))
    spot_failures = []
    for a in spot:
        r = c.get(f"/v1/scopes/{org}/{a.user}/sessions/{a.sid}")
        if r.status_code != 200:
            spot_failures.append(f"{a.user}/{a.sid}: {r.status_code}")
        elif tuple(m["content"] for m in r.json()["messages"]) != a.texts:
            spot_failures.append(f"{a.user}/{a.sid}: other text stored")
    return {
        "acknowledged_writes": len(shared.acked),
        "attempted_writes": len(shared.attempted),
        "stored_sessions": stored_total,
        "missing": missing[:50],
        "missing_count": len(missing),
        "count_mismatch": count_mismatch,
        "spot_checked": len(spot),
        "spot_failures": spot_failures,
        "ok": not missing and not count_mismatch and not spot_failures,
    }


def embed_batching(c: httpx.Client) -> dict[str, Any] | None:
    """The server's embedding micro-batcher counters from ``/metrics`` (model calls, texts, texts per call), or
    ``None`` when it has none (``--no-embed-batching``) or does not say."""
    try:
        r = c.get("/metrics")
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    values: dict[str, float] = {}
    for line in r.text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("graphrecall_embed_batches_total", "graphrecall_embed_batched_texts_total"):
            values[name] = float(value)
    if len(values) < 2:
        return None
    calls = int(values["graphrecall_embed_batches_total"])
    texts = int(values["graphrecall_embed_batched_texts_total"])
    return {"calls": calls, "texts": texts, "texts_per_call": round(texts / calls, 2) if calls else 0.0}


def operations(samples: list[Sample], elapsed: float, open_loop: bool) -> dict[str, Any]:
    """Per operation: counts, errors and latency percentiles over every request sent (failed ones included)."""
    ops: dict[str, Any] = {}
    for op in OPS:
        rows = [s for s in samples if s.op == op]
        statuses: dict[str, int] = defaultdict(int)
        for s in rows:
            statuses[str(s.status)] += 1
        ok = sum(1 for s in rows if 200 <= s.status < 300)
        ops[op] = {
            "count": len(rows),
            "ok": ok,
            "errors": len(rows) - ok,
            "throughput_per_s": round(len(rows) / elapsed, 2) if elapsed else 0.0,
            **percentiles([s.seconds for s in rows]),
            "statuses": dict(sorted(statuses.items())),
        }
        if open_loop:
            ops[op].update(percentiles([s.service for s in rows if s.service is not None], "service_"))
    return ops


def schedule_report(run: OpenLoopRun[int], args: argparse.Namespace, window: float) -> dict[str, Any]:
    """How well the client kept to its schedule: a late or saturated client shows up here, not as a fast
    server."""
    lags = [t.lag for t, _ in run.results]
    late = run.late(args.late_ms / 1000)
    completed = sum(1 for _, status in run.results if 200 <= status < 300)
    return {
        "offered_rate_per_s": args.rate,
        "arrivals": args.arrivals,
        "scheduled": run.scheduled,
        "sent": run.sent,
        "sent_per_s": round(run.sent / window, 2) if window else 0.0,
        "completed_2xx_per_s": round(completed / run.elapsed, 2) if run.elapsed else 0.0,
        "late_tolerance_ms": args.late_ms,
        "late_sends": late,
        **{k.replace("_ms", "_lag_ms"): v for k, v in percentiles(lags).items() if k != "p95_ms"},
        "max_inflight": run.workers,
        "peak_in_flight": run.peak_in_flight,
        "saturated": run.saturated,
        "behind_schedule": late > 0 or run.saturated,
    }


def targets(ops: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op, (p50, p99) in TARGETS_MS.items():
        o = ops[op]
        out[op] = {
            "p50_ms": o["p50_ms"],
            "p50_target_ms": p50,
            "p99_ms": o["p99_ms"],
            "p99_target_ms": p99,
            "met": o["count"] > 0 and o["p50_ms"] <= p50 and o["p99_ms"] <= p99,
        }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    users = [f"load-user-{i:03d}" for i in range(args.users)]
    key = args.key or os.environ.get("GRAPHRECALL_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    workdir = Path(tempfile.mkdtemp(prefix="graphrecall-load-"))

    def new_server() -> ServerProcess:
        return ServerProcess(
            workdir / "store",
            embedder=args.embedder,
            extra_args=["--insecure-local", *shlex.split(args.server_args)],
            env={"GRAPHRECALL_POOL_SIZE": str(max(16, args.users + 4))},
        ).start(timeout=180)

    server = None if args.url else new_server()
    base = server.url if server is not None else args.url.rstrip("/")
    mode = "open-loop" if args.rate else "closed-loop"
    kill: dict[str, Any] | None = None
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=args.timeout) as c:
            t0 = time.perf_counter()
            seeded: dict[str, str] = {}
            for user in users:  # one-off database creation, outside the measured window
                if args.seed_rounds <= 1:
                    history = [{"role": "user", "content": sentence(rng)}]
                else:  # a user with a past: in Kuzu from the start (more than Settings.resident_rounds rounds)
                    history = [
                        {"role": role, "content": sentence(rng)}
                        for _ in range(args.seed_rounds)
                        for role in ("user", "assistant")
                    ]
                r = c.post(
                    f"/v1/scopes/{args.org}/{user}/sessions", json={"session_id": "seed", "messages": history}
                )
                r.raise_for_status()
                seeded[user] = "seed"
            setup_s = time.perf_counter() - t0

        stop = threading.Event()
        killed_at: list[float] = []
        timer: threading.Timer | None = None
        started = time.perf_counter()
        if args.kill_after is not None and server is not None:
            victim = server

            def kill_now() -> None:
                killed_at.append(time.perf_counter() - started)
                victim.kill()  # SIGKILL while requests are in flight
                stop.set()

            timer = threading.Timer(args.kill_after, kill_now)
            timer.daemon = True
            timer.start()
        schedule: OpenLoopRun[int] | None = None
        if args.rate:
            shared, schedule = open_loop(base, headers, users, args, stop)
        else:
            shared = closed_loop(base, headers, users, args, stop)
        elapsed = time.perf_counter() - started
        if timer is not None:
            timer.join()  # an open-loop schedule can end before --kill-after: kill before restarting and checking
        window = killed_at[0] if killed_at else args.duration
        if killed_at and server is not None:
            t1 = time.perf_counter()
            server = new_server()
            base = server.url
            kill = {"after_s": round(killed_at[0], 2), "restart_s": round(time.perf_counter() - t1, 1)}
        with httpx.Client(base_url=base, headers=headers, timeout=args.timeout) as c:
            batching = None if kill else embed_batching(c)  # a restarted server counts from 0
            verification = verify(
                c,
                args.org,
                users,
                shared,
                seeded,
                own_store=server is not None,
                crashed=kill is not None,
                rng=rng,
                sample=args.spot_check,
            )
    finally:
        if server is not None:
            server.stop()

    ops = operations(shared.samples, window if args.rate else elapsed, open_loop=bool(args.rate))
    config: dict[str, Any] = {
        "duration_s": args.duration,
        "users": args.users,
        "seed_rounds": args.seed_rounds,
    }
    if args.rate:
        config.update(rate_per_s=args.rate, arrivals=args.arrivals, max_inflight=args.max_inflight)
    else:
        config["clients"] = args.clients
    config.update(
        write_ratio=args.write_ratio,
        context_ratio=args.context_ratio,
        embedder=args.embedder if not args.url else "(external server)",
        server_args=args.server_args if not args.url else "(external server)",
        url=args.url or "(own)",
        kill_after_s=args.kill_after,
    )
    report: dict[str, Any] = {
        "command": "python -m benchmarks.load.http_load " + shlex.join(sys.argv[1:]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "mode": mode,
        "latency_from": "scheduled send time" if args.rate else "send time",
        "config": config,
        "setup_s": round(setup_s, 1),
        "elapsed_s": round(elapsed, 1),
        "total_requests": len(shared.samples),
        "throughput_per_s": round(len(shared.samples) / elapsed, 2),
        "server_errors": sum(1 for s in shared.samples if s.status >= 500),
        "transport_errors": sum(1 for s in shared.samples if s.status == 0),
        "kill": kill,
        "embed_batching": batching,
        "operations": ops,
        "verification": verification,
        "workdir": str(workdir),
    }
    if schedule is not None:
        report["schedule"] = schedule_report(schedule, args, window)
        report["targets"] = None if kill else targets(ops)  # a run cut short by a kill is no latency figure
    return report


def markdown(report: dict[str, Any]) -> str:
    cfg, v = report["config"], report["verification"]
    open_loop = report["mode"] == "open-loop"
    lines = [
        f"# HTTP load test: {report['mode']}",
        "",
        f"`{report['command']}` — {report['when']}, {report['machine']['cpus']} CPUs (load average "
        f"{report['machine']['loadavg_1m']} at the end), embedder {cfg['embedder']}",
        "",
    ]
    if open_loop:
        s = report["schedule"]
        lines += [
            f"Open loop: {s['offered_rate_per_s']} requests/s offered ({s['arrivals']} arrivals) over "
            f"{cfg['users']} users for {cfg['duration_s']} s (users seeded with {cfg.get('seed_rounds', 1)} round(s) in "
            f"{report['setup_s']} s beforehand); "
            f"{s['scheduled']} scheduled, {s['sent']} sent ({s['sent_per_s']}/s), {s['completed_2xx_per_s']}/s "
            f"answered 2xx. Latency is measured from each request's **scheduled** send time. "
            f"**5xx: {report['server_errors']}**, transport errors: {report['transport_errors']}.",
            "",
            f"Client: at most {s['peak_in_flight']} of {s['max_inflight']} requests in flight; "
            f"{s['late_sends']} sent more than {s['late_tolerance_ms']} ms late (lag p50 {s['p50_lag_ms']} ms, "
            f"p99 {s['p99_lag_ms']} ms, max {s['max_lag_ms']} ms).",
        ]
        if s["behind_schedule"]:
            lines.append(
                "**The client fell behind schedule**"
                + (" (every worker was busy: raise --max-inflight)" if s["saturated"] else "")
                + "; those delays are inside the latencies below."
            )
        lines += [
            "",
            "| operation | requests | 2xx | errors | per s | p50 ms | p95 ms | p99 ms | max ms "
            "| service p50 ms | service p99 ms | statuses |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for op, o in report["operations"].items():
            lines.append(
                f"| {op} | {o['count']} | {o['ok']} | {o['errors']} | {o['throughput_per_s']} | {o['p50_ms']} "
                f"| {o['p95_ms']} | {o['p99_ms']} | {o['max_ms']} | {o['service_p50_ms']} "
                f"| {o['service_p99_ms']} | {o['statuses']} |"
            )
        if report["targets"]:
            met = [
                f"{op} p50 {t['p50_ms']} ms (target ≤ {t['p50_target_ms']:g}), p99 {t['p99_ms']} ms "
                f"(≤ {t['p99_target_ms']:g}): {'met' if t['met'] else 'not met'}"
                for op, t in report["targets"].items()
            ]
            lines += [
                "",
                "Issue 10's latency targets (they apply at half the closed loop's saturation rate): "
                + "; ".join(met),
            ]
    else:
        lines += [
            f"Closed loop: {cfg['clients']} clients, {cfg['users']} users, {report['elapsed_s']} s measured "
            f"(users seeded with {cfg.get('seed_rounds', 1)} round(s) in {report['setup_s']} s beforehand). "
            f"{report['total_requests']} requests, "
            f"{report['throughput_per_s']}/s. **5xx: {report['server_errors']}**, transport errors: "
            f"{report['transport_errors']}.",
            "",
            "| operation | requests | 2xx | errors | per s | p50 ms | p95 ms | p99 ms | max ms | statuses |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for op, o in report["operations"].items():
            lines.append(
                f"| {op} | {o['count']} | {o['ok']} | {o['errors']} | {o['throughput_per_s']} | {o['p50_ms']} "
                f"| {o['p95_ms']} | {o['p99_ms']} | {o['max_ms']} | {o['statuses']} |"
            )
    if report["embed_batching"]:
        b = report["embed_batching"]
        lines += [
            "",
            f"Server embedding micro-batcher (whole run, seeding and checks included): {b['texts']} texts in "
            f"{b['calls']} model calls, {b['texts_per_call']} texts per call.",
        ]
    if report["kill"]:
        k = report["kill"]
        lines += [
            "",
            f"Killed the server with SIGKILL after {k['after_s']} s of load (the transport errors are the requests "
            f"in flight then), restarted it on the same root in {k['restart_s']} s; the check below ran against "
            "the restarted server.",
        ]
    lines += [
        "",
        f"Verification: {v['acknowledged_writes']} acknowledged writes (of {v['attempted_writes']} sent); "
        f"{v['missing_count']} missing from the session lists; {len(v['count_mismatch'])} count mismatches; "
        f"{v['spot_checked']} read back by id and compared, {len(v['spot_failures'])} failed. "
        f"**{'OK' if v['ok'] else 'FAILED'}**",
        "",
    ]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    p.add_argument("--clients", type=int, default=50, help="closed loop: concurrent clients")
    p.add_argument(
        "--rate", type=float, help="open loop: requests per second on a fixed schedule (replaces --clients)"
    )
    p.add_argument("--arrivals", choices=("poisson", "fixed"), default="poisson", help="open loop: gaps")
    p.add_argument(
        "--max-inflight",
        type=int,
        default=256,
        help="open loop: most requests the client has in flight at once",
    )
    p.add_argument(
        "--late-ms", type=float, default=10.0, help="open loop: a send this late counts as behind schedule"
    )
    p.add_argument("--users", type=int, default=20)
    p.add_argument(
        "--seed-rounds",
        type=int,
        default=1,
        help="rounds each user holds before the load (default 1: a new user, who lives in its write log until it "
        "has 64 rounds; 100: a user with a past, in Kuzu from the start)",
    )
    p.add_argument("--url", help="an already running server (default: start one on loopback)")
    p.add_argument("--key", help="API key for --url (default: $GRAPHRECALL_API_KEY)")
    p.add_argument("--org", default="loadtest")
    p.add_argument(
        "--embedder", default="default", help="for the server this script starts: default | hashing:<dim>"
    )
    p.add_argument(
        "--server-args",
        default="",
        help="more options for the server this script starts, one string (e.g. '--no-embed-batching' for an A/B)",
    )
    p.add_argument("--write-ratio", type=float, default=0.3)
    p.add_argument("--context-ratio", type=float, default=0.1)
    p.add_argument("--timeout", type=float, default=120.0, help="per-request timeout, seconds")
    p.add_argument(
        "--spot-check", type=int, default=50, help="acknowledged writes read back by id and compared"
    )
    p.add_argument(
        "--kill-after",
        type=float,
        help="kill -9 the server this script started after this many seconds of load, restart it on the same "
        "root, then verify the acknowledged writes (the load ends at the kill)",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--keep", action="store_true", help="keep the temporary store and server log")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "load")
    args = p.parse_args(argv)
    if args.rate is not None and args.rate <= 0:
        p.error("--rate must be positive")
    if args.kill_after is not None and (args.url or not 0 < args.kill_after < args.duration):
        p.error("--kill-after needs a server this script starts (no --url) and 0 < S < --duration")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    this_run = Run.begin()
    report = run(args)
    passed = report["server_errors"] == 0 and report["verification"]["ok"]
    workdir = Path(report.pop("workdir"))
    if passed and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"store and server log kept in {workdir}")
    write_json(args.out / "http_load.json", report, this_run)
    write_markdown(args.out / "http_load.md", markdown(report), this_run)
    print(markdown(report))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
