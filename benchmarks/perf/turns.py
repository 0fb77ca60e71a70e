"""One chat turn at a time: write latency, read-your-writes and disk growth, through the write log vs straight
into Kuzu, in one run.

What a chat assistant does: after every exchange it stores the user's turn and the reply, and the next question may
be about it. Each side gets its own warm scope of ``--base-sessions`` sessions (bulk-ingested first); then
``--turns`` 2-message sessions are written one call each, alternating between the two sides so that load from
other processes hits both alike. After every write, a search for the turn's own words must return it among the
first three hits (the next search sees the write). ``direct`` is the path every write took before the log: one
Kuzu transaction (and checkpoint) per call.

    python -m benchmarks.perf.turns --turns 50 --out benchmarks/results/turns
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import provenance
from benchmarks.arguments import DEFAULT_EMBEDDER, add_embedder_argument
from benchmarks.jsonfile import write_json, write_markdown
from benchmarks.percentile import percentile
from benchmarks.perf.footprint import scope_files
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, writer
from graphrecall.config import Settings
from graphrecall.embed import default_embedder

TOPICS = (
    "my sister moved to Porto for a nursing job",
    "we adopted a beagle puppy called Biscuit",
    "I started learning the cello on Tuesdays",
    "our team switched the backend to Rust",
    "I am training for a half marathon in April",
    "the landlord finally fixed the boiler",
    "my favourite dish lately is mapo tofu",
    "we are planning a trip to Hokkaido in winter",
)


def _session(i: int, rng: random.Random) -> list[dict[str, str]]:
    topic = rng.choice(TOPICS)
    return [
        {
            "role": "user",
            "content": f"Turn {i}: {topic}, and today I noticed detail number w{i}x{rng.randint(0, 9999)}.",
        },
        {"role": "assistant", "content": f"Thanks for telling me about that ({topic}). Anything else?"},
    ]


def _du(root: Path, scope: Scope) -> int:
    return sum(scope_files(root, scope).values())


def run(
    turns: int, base_sessions: int, seed: int, flush_age: float = 0.5, embedder_spec: str = DEFAULT_EMBEDDER
) -> dict[str, Any]:
    rng = random.Random(seed)
    embedder = default_embedder(embedder_spec)  # behind an in-memory cache, as Memory.open builds it
    work = Path(tempfile.mkdtemp(prefix="graphrecall-turns-"))
    sides = {"log": Scope(org_id="perf", user_id="log"), "direct": Scope(org_id="perf", user_id="direct")}
    out: dict[str, Any] = {
        "turns": turns,
        "base_sessions": base_sessions,
        "flush_max_age_s": flush_age,
        "embedder": embedder_spec,
        "embedder_id": embedder.id,
        "load": os.getloadavg()[0],
    }
    settings = Settings(root=work, reranker=None, flush_max_age_s=flush_age)
    with Memory.open(work, embedder=embedder, settings=settings) as mem:
        base = [
            {
                "session_id": f"base{j}",
                "date": f"2024-01-{1 + j % 28:02d}",
                "messages": _session(10_000 + j, rng),
            }
            for j in range(base_sessions)
        ]
        for scope in sides.values():
            mem.add_sessions(scope, base)  # up to 64 rounds go through the log: flushed by stats() below
            mem.search(scope, "warm up", 3)
            mem.stats(scope)  # the base is in Kuzu (and checkpointed) before "before" is measured
            for j in range(
                2
            ):  # Kuzu rewrites a table's pages at its second checkpoint (a one-off doubling of a
                # small store, measured): warm that up too, so the growth below is what turns add
                mem.add_session(scope, _session(20_000 + j, rng), session_id=f"warm{j}", date="2024-02-01")
                mem.stats(scope)
        before = {name: _du(work, scope) for name, scope in sides.items()}
        latency: dict[str, list[float]] = {name: [] for name in sides}
        found: dict[str, int] = dict.fromkeys(sides, 0)
        for i in range(turns):
            for name in ("log", "direct") if i % 2 == 0 else ("direct", "log"):
                scope, msgs = sides[name], _session(i, rng)
                limit = writer.LOG_MAX_ROUNDS
                writer.LOG_MAX_ROUNDS = limit if name == "log" else 0
                try:
                    t0 = time.perf_counter()
                    mem.add_session(scope, msgs, session_id=f"turn{i}", date="2024-03-01T12:00:00")
                    latency[name].append((time.perf_counter() - t0) * 1000)
                finally:
                    writer.LOG_MAX_ROUNDS = limit
                hits = mem.search(scope, msgs[0]["content"], 3)
                found[name] += any(h.session_id == f"turn{i}" for h in hits)
        for scope in sides.values():
            mem.stats(scope)  # flushes the log
    after = {name: _du(work, scope) for name, scope in sides.items()}
    for name in sides:
        lat = latency[name]
        out[name] = {
            "p50_ms": percentile(lat, 50),
            "p99_ms": percentile(lat, 99),
            "max_ms": max(lat),
            "next_search_found": f"{found[name]}/{turns}",
            "disk_growth_kb_per_turn": (after[name] - before[name]) / turns / 1024,
        }
    out["p50_ratio_log_over_direct"] = out["log"]["p50_ms"] / out["direct"]["p50_ms"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=50, help="single-turn writes per side")
    ap.add_argument("--base-sessions", type=int, default=30, help="sessions in each warm scope before timing")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--flush-age",
        type=float,
        default=0.5,
        help="Settings.flush_max_age_s: how long a write may wait in the log",
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/turns"))
    add_embedder_argument(ap)
    args = ap.parse_args()
    this_run = Run.begin()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    res = run(args.turns, args.base_sessions, args.seed, args.flush_age, args.embedder)
    write_json(args.out / "turns.json", res, this_run)
    lines = [
        f"# One turn at a time ({res['turns']} turns per side, {res['base_sessions']}-session warm scope, "
        f"flush age {res['flush_max_age_s']:g} s, load {res['load']:.1f}, embedder `{res['embedder']}`)",
        "",
        "| path | p50 ms | p99 ms | max ms | next search finds it | disk KB per turn |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("log", "direct"):
        r = res[name]
        lines.append(
            f"| {name} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} | {r['next_search_found']} | "
            f"{r['disk_growth_kb_per_turn']:.1f} |"
        )
    lines.append(f"\np50 log / direct: {res['p50_ratio_log_over_direct']:.3f}")
    text = "\n".join(lines)
    write_markdown(args.out / "turns.md", text, this_run)
    print(text)
    print(provenance.markdown(this_run.finish()))


if __name__ == "__main__":
    main()
