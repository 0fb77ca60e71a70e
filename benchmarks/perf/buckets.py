"""Issue 28's targets for many users in shared buckets: bytes per user, per round, and a fleet of users on one node.

Everything a store leaves on disk counts (the bucket files, each user's derived indexes and write log); each store is
closed before it is measured. Vectors come from a 384-dimensional hashing embedder (what is stored does not depend on
the model, only on the dimension), extraction from a scripted model (one fact, one event and the entity "Rex" per
session; ``graphrecall.llm.ScriptedLLM``), so no model runs.

- ``user``: a user with 10 rounds and 10 ``add_fact`` facts, the same 10 rounds whose 10 facts come from one
  extraction run, and a user with 100 rounds extracted (``USER_KINDS``; ``--kinds`` picks some): alone in its
  organisation (it pays the bucket's floor), and what one more such user costs in a bucket of ``--neighbours``
  (the slope of the store's bytes over the second half of them: Kuzu grows its file by whole extents);
- ``rounds``: one user of ``--sizes`` rounds (bulk ingest), total bytes per round, and the growth per round between
  sizes (the bucket's floor paid once);
- ``fleet``: ``--users`` users of ``--rounds`` rounds each, extracted, in one organisation (``buckets_per_org``
  buckets): total disk at each tenth of the way, the resident memory of the process once it has searched every
  user, and the latency of a search for a user not touched recently (its view closed, its bucket open) and of the
  first search after a restart (bucket closed).

    python -m benchmarks.perf.buckets --users 10000 --rounds 20 --sizes 1000,10000 --out benchmarks/results/buckets
    # a fleet built over several sittings (10,000 users take hours here): the same command again goes on with it
    python -m benchmarks.perf.buckets --parts fleet --users 10000 --work /work/fleet --resume
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.percentile import percentile
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM, Step
from graphrecall.llm.base import ChatMessage

KB = 1024
MB = 1024 * 1024
ORG = "bench"
EXTRACT = "Extract four lists"
VERSION = "New facts, each followed"


def _prompt(messages: list[ChatMessage]) -> str:
    return "\n".join(m.content for m in messages)


def _extract(messages: list[ChatMessage]) -> dict[str, Any]:
    text = _prompt(messages)
    ids = sorted(set(re.findall(r"\bm\d+\b", text)))[:2] or ["m1"]
    n = re.search(r"bakery (\d+)", text)
    k = n.group(1) if n else "0"
    return {
        "facts": [{"text": f"The user buys rye at bakery {k}.", "kind": "preference", "message_ids": ids,
                   "about": ["Rex"]}],
        "events": [{"subject": "user", "verb": "walk", "object": "Rex", "text": f"The user walked Rex to bakery {k}.",
                    "message_ids": ids[:1]}],
        "entities": [{"name": "Rex", "type": "animal", "aliases": ["the dog"]}],
        "relations": [],
    }  # fmt: skip


def _versions(messages: list[ChatMessage]) -> dict[str, Any]:
    labels = sorted(set(re.findall(r"\bn\d+\b", _prompt(messages))))
    return {"decisions": [{"fact": n, "decision": "NEW", "target": None, "reason": "bench"} for n in labels]}


def _open(root: Path, **settings: Any) -> Memory:
    return Memory.open(
        root,
        embedder=HashingEmbedder(384),
        llm=ScriptedLLM([Step(EXTRACT, _extract), Step(VERSION, _versions)], ordered=False),
        extraction=ExtractionConfig(background=False),
        settings=Settings(root=root, **settings),
    )


def _turn(i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"Turn {i}: today I walked the dog past bakery {i} and bought rye."},
        {"role": "assistant", "content": f"Nice! Was bakery {i} the one with the sourdough you liked?"},
    ]


def _sessions(rounds: int, per_session: int) -> list[dict[str, Any]]:
    t0 = datetime(2024, 1, 1)
    return [
        {
            "session_id": f"s{i}",
            "date": (t0 + timedelta(hours=i)).isoformat(),
            "messages": [m for j in range(per_session) for m in _turn(i * per_session + j)],
        }
        for i in range(max(1, rounds // per_session))
    ]


def disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def parts(root: Path) -> dict[str, int]:
    """Bytes by kind: the buckets, the users' derived indexes, their write logs, everything else."""
    out = {"buckets": 0, "indexes": 0, "logs": 0, "other": 0}
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        s = str(p)
        key = (
            "buckets"
            if "/.buckets/" in s
            else "indexes"
            if ".kuzu.idx/" in s
            else "logs"
            if ".log." in s
            else "other"
        )
        out[key] += p.stat().st_size
    return out


def small_user(m: Memory, scope: Scope) -> None:
    """10 rounds and 10 facts added by the application."""
    m.add_sessions(scope, _sessions(10, 5))
    for k in range(10):
        m.add_fact(scope, f"The user's favourite bakery number {k} sells rye.", entities=["Rex"])


def extracted_facts_user(m: Memory, scope: Scope) -> None:
    """10 rounds in sessions of one, their 10 facts (and 10 events) found by one extraction run: the same user as
    ``small_user`` when its facts come from its chat rather than from the application."""
    m.add_sessions(scope, _sessions(10, 1))
    m.extract(scope)


def extracted_user(m: Memory, scope: Scope, rounds: int = 100) -> None:
    """``rounds`` rounds in sessions of 5, every session extracted."""
    m.add_sessions(scope, _sessions(rounds, 5))
    m.extract(scope)


USER_KINDS: dict[str, Callable[[Memory, Scope], None]] = {
    "10 rounds + 10 facts": small_user,
    "10 rounds + 10 facts extracted": extracted_facts_user,
    "100 rounds extracted": extracted_user,
}
"""The users whose cost ``users`` measures (``--kinds``: their names, comma-separated)."""


def users(work: Path, neighbours: int, buckets_per_org: int, kinds: Sequence[str] = ()) -> dict[str, Any]:
    """What one more user costs: the slope of the store's bytes over the second half of ``neighbours`` users written
    into one bucket (from ``neighbours // 2`` to ``neighbours``). A slope over many users, not the growth after a
    few: Kuzu grows its file by whole extents (8 MB here), so the mean of 10 added users moved by ~800 KB with one
    extent more or less."""
    out: dict[str, Any] = {}
    half = neighbours // 2
    for name, write in USER_KINDS.items():
        if kinds and name not in kinds:
            continue
        alone = work / "alone"
        shutil.rmtree(alone, ignore_errors=True)
        with _open(alone, buckets_per_org=buckets_per_org) as m:
            write(m, Scope(org_id=ORG, user_id="u"))
        row: dict[str, Any] = {"alone_bytes": disk(alone), "alone_parts": parts(alone)}
        shared = work / "shared"
        shutil.rmtree(shared, ignore_errors=True)
        marks: list[tuple[int, dict[str, int], dict[str, int]]] = []
        for lo, hi in ((0, half), (half, neighbours)):
            with _open(shared, buckets_per_org=1) as m:  # every user in one bucket
                for i in range(lo, hi):
                    write(m, Scope(org_id=ORG, user_id=f"n{i}"))
            marks.append((hi, parts(shared), _maintained_parts(shared, Scope(org_id=ORG, user_id="n0"))))
        (n0, p0, k0), (n1, p1, k1) = marks
        row |= {
            "neighbours": neighbours,
            "slope_users": n1 - n0,
            "marginal_bytes": sum(p1[k] - p0[k] for k in p1) / (n1 - n0),
            "marginal_parts": {k: (p1[k] - p0[k]) / (n1 - n0) for k in p1},
            "mean_bytes_per_user_in_bucket": sum(p1.values()) / n1,
            "maintained_marginal_bytes": sum(k1[k] - k0[k] for k in k1) / (n1 - n0),
            "maintained_marginal_parts": {k: (k1[k] - k0[k]) / (n1 - n0) for k in k1},
        }
        out[name] = row
        print(f"  {name}: alone {row['alone_bytes'] / KB:,.0f} KB, one more user {row['marginal_bytes'] / KB:,.0f} KB "
              f"{row['marginal_parts']}; after a maintenance pass {row['maintained_marginal_bytes'] / KB:,.0f} KB "
              f"{row['maintained_marginal_parts']}", flush=True)  # fmt: skip
    return out


def _maintained_parts(root: Path, scope: Scope) -> dict[str, int]:
    """``parts`` of a copy of the (closed) store at ``root`` after one maintenance pass of ``scope``
    (``Memory.maintain(force=True)``, what ``serve --maintain`` runs once a user is idle: it compacts the scope's
    bucket when its free share passes the bound), its backup left out."""
    copy = root.with_name(root.name + "-maintained")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    with Memory.open(
        copy, embedder=HashingEmbedder(384), settings=Settings(root=copy, buckets_per_org=1)
    ) as m:
        m.maintain(scope, force=True)
    shutil.rmtree(copy / "backups", ignore_errors=True)
    out = parts(copy)
    shutil.rmtree(copy, ignore_errors=True)
    return out


def rounds(work: Path, sizes: list[int], maintain: bool = False) -> dict[str, Any]:
    """``maintain``: after each size is measured, one maintenance pass (``Memory.maintain(force=True)``, what
    ``serve --maintain`` runs once a user is idle), which compacts the bucket when its free share passes the bound,
    and the store measured again (its backup under ``backups/`` left out)."""
    out: dict[str, Any] = {}
    prev: tuple[int, int] | None = None
    for n in sizes:
        root = work / f"rounds{n}"
        shutil.rmtree(root, ignore_errors=True)
        t0 = time.perf_counter()
        with _open(root) as m:
            scope = Scope(org_id=ORG, user_id="u")
            sessions = _sessions(n, 10)
            for start in range(0, len(sessions), 500):
                m.add_sessions(scope, sessions[start : start + 500], batch_sessions=500)
        total = disk(root)
        row = {
            "bytes": total,
            "bytes_per_round": total / n,
            "parts": parts(root),
            "seconds": time.perf_counter() - t0,
        }
        if prev is not None:
            row["growth_per_round_since_previous"] = (total - prev[1]) / (n - prev[0])
        prev = (n, total)
        out[str(n)] = row
        print(f"  {n:,} rounds: {total / MB:,.1f} MB, {row['bytes_per_round']:,.0f} B/round", flush=True)
        if maintain:
            # No model: the pass consolidates without summaries (these rounds have no facts), then compacts.
            with Memory.open(root, embedder=HashingEmbedder(384), settings=Settings(root=root)) as m:
                done = m.maintain(Scope(org_id=ORG, user_id="u"), force=True)
            shutil.rmtree(root / "backups", ignore_errors=True)
            kept = disk(root)
            row["after_maintenance"] = {
                "bytes": kept,
                "bytes_per_round": kept / n,
                "parts": parts(root),
                "compaction": done.compaction.model_dump(mode="json") if done.compaction else None,
            }
            print(f"    after maintenance: {kept / MB:,.1f} MB, {kept / n:,.0f} B/round", flush=True)
    return out


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def threads() -> int:
    """The process's threads, native ones included (tantivy's and Kuzu's as well as Python's)."""
    return len(list(Path("/proc/self/task").iterdir()))


def fleet(
    work: Path,
    n_users: int,
    n_rounds: int,
    buckets_per_org: int,
    samples: int,
    seed: int,
    resume: bool = False,
) -> dict[str, Any]:
    """Build the fleet (or, with ``resume``, go on with the one a killed run left in ``work``: its progress file
    says how many users were done, and a user it was building when killed is extracted, not ingested again), then
    serve it from a fresh process."""
    root, progress = work / "fleet", work / "fleet-progress.json"
    scopes = [Scope(org_id=ORG, user_id=f"user{i:06d}") for i in range(n_users)]
    state: dict[str, Any] = {"done": 0, "build_s": 0.0, "curve": []}
    if resume and progress.exists():
        state = json.loads(progress.read_text())
        print(f"  resuming after {state['done']:,} users ({state['build_s']:,.0f} s of building)", flush=True)
    else:
        shutil.rmtree(root, ignore_errors=True)
    curve: list[dict[str, Any]] = state["curve"]
    t0 = time.perf_counter() - state["build_s"]
    step = max(1, n_users // 10)
    interrupted = state["done"] if resume else None  # the user a killed run may have been building
    with _open(root, buckets_per_org=buckets_per_org) as m:
        for i in range(state["done"], n_users):
            scope = scopes[i]
            if not (i == interrupted and m.stored(scope)):  # its sessions are in already: extract them
                m.add_sessions(scope, _sessions(n_rounds, 5))
            m.extract(scope)
            if (i + 1) % step == 0 or i + 1 == n_users:
                m.flush()
                c = {"users": i + 1, "bytes": disk(root), "parts": parts(root), "seconds": time.perf_counter() - t0,
                     "builder_rss_bytes": rss_bytes(), "builder_threads": threads()}  # fmt: skip
                curve.append(c)
                print(f"  {i + 1:,} users: {c['bytes'] / MB:,.0f} MB, {c['seconds']:,.0f} s, "
                      f"builder RSS {c['builder_rss_bytes'] / MB:,.0f} MB, {c['builder_threads']:,} threads",
                      flush=True)  # fmt: skip
            state = {"done": i + 1, "build_s": time.perf_counter() - t0, "curve": curve}
            tmp = progress.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(progress)
    build_s = time.perf_counter() - t0
    closed = {"bytes": disk(root), "parts": parts(root)}
    out: dict[str, Any] = {"users": n_users, "rounds": n_rounds, "buckets_per_org": buckets_per_org,
                           "build_s": build_s, "curve": curve, "closed": closed}  # fmt: skip
    # A fresh process, as a server after a restart: its memory is the serving's alone, not the build's.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.perf.buckets", "--serve", str(root), "--users", str(n_users),
         "--buckets", str(buckets_per_org), "--samples", str(samples), "--seed", str(seed)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    out |= json.loads(done.stdout.strip().splitlines()[-1])
    return out


def serve(root: Path, n_users: int, buckets_per_org: int, samples: int, seed: int) -> dict[str, Any]:
    """What a server process does after a restart: first searches (buckets and views to open), a search of every
    user, then searches of users not touched recently (their views closed by the pool, their buckets open)."""
    scopes = [Scope(org_id=ORG, user_id=f"user{i:06d}") for i in range(n_users)]
    sample = random.Random(seed).sample(scopes, min(samples, n_users))
    out: dict[str, Any] = {"rss_before_open_bytes": rss_bytes()}
    with _open(root, buckets_per_org=buckets_per_org) as m:
        restart: list[float] = []
        for scope in sample:
            t = time.perf_counter()
            m.search(scope, "which bakery sells rye?", 10)
            restart.append((time.perf_counter() - t) * 1000)
        touched = time.perf_counter()
        for scope in scopes:  # a server that has touched every user
            m.search(scope, "which bakery sells rye?", 10)
        out["touch_all_s"] = time.perf_counter() - touched
        out["rss_after_touching_all_bytes"] = rss_bytes()
        cold: list[float] = []
        warm: list[float] = []
        recent = set(scopes[-Settings().pool_size :])  # the pool's views: still open
        for scope in [s for s in sample if s not in recent] or sample:
            t = time.perf_counter()
            m.search(scope, "which bakery sells rye?", 10)
            cold.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            m.search(scope, "which bakery sells rye?", 10)
            warm.append((time.perf_counter() - t) * 1000)
        out["rss_at_end_bytes"] = rss_bytes()
    for name, xs in (("restart", restart), ("cold", cold), ("warm", warm)):
        out[f"{name}_search_ms"] = {"p50": statistics.median(xs), "p99": percentile(xs, 99), "n": len(xs)}
    return out


def report(res: dict[str, Any]) -> str:
    lines = ["| user | alone in its organisation | one more user (slope over users N/2 to N of one bucket) | the same after a maintenance pass | N | mean per user in that bucket |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in res.get("user", {}).items():
        lines.append(
            f"| {name} | {r['alone_bytes'] / KB:,.0f} KB | {r['marginal_bytes'] / KB:,.0f} KB "
            f"({', '.join(f'{k} {v / KB:,.0f} KB' for k, v in r['marginal_parts'].items() if v)}) | "
            f"{r['maintained_marginal_bytes'] / KB:,.0f} KB | "
            f"{r['neighbours']} | {r['mean_bytes_per_user_in_bucket'] / KB:,.0f} KB |"
        )
    if res.get("rounds"):
        lines += [
            "",
            "| rounds | bytes | per round | growth per round since the previous size |",
            "|---|---|---|---|",
        ]
        for n, r in res["rounds"].items():
            g = r.get("growth_per_round_since_previous")
            lines.append(f"| {int(n):,} | {r['bytes'] / MB:,.1f} MB | {r['bytes_per_round']:,.0f} B | "
                         f"{'' if g is None else f'{g:,.0f} B'} |")  # fmt: skip
            kept = r.get("after_maintenance")
            if kept:
                lines.append(f"| {int(n):,} after a maintenance pass | {kept['bytes'] / MB:,.1f} MB | "
                             f"{kept['bytes_per_round']:,.0f} B | |")  # fmt: skip
    f = res.get("fleet")
    if f:
        lines += ["", f"Fleet: {f['users']:,} users x {f['rounds']} rounds, extracted, {f['buckets_per_org']} buckets "
                  f"(built in {f['build_s']:,.0f} s)", "", "| users | disk | per user | buckets | indexes | logs | builder RSS | threads |",
                  "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for c in f["curve"]:
            p = c["parts"]
            lines.append(f"| {c['users']:,} | {c['bytes'] / MB:,.0f} MB | {c['bytes'] / c['users'] / KB:,.1f} KB | "
                         f"{p['buckets'] / MB:,.0f} MB | {p['indexes'] / MB:,.0f} MB | {p['logs'] / MB:,.0f} MB | "
                         f"{c.get('builder_rss_bytes', 0) / MB:,.0f} MB | {c.get('builder_threads', '-')} |")  # fmt: skip
        lines += ["", f"A fresh process (a server after a restart): RSS {f['rss_before_open_bytes'] / MB:,.0f} MB before "
                  f"opening; {f['rss_after_touching_all_bytes'] / MB:,.0f} MB after searching every user "
                  f"({f['touch_all_s']:,.0f} s); {f['rss_at_end_bytes'] / MB:,.0f} MB at the end", "",
                  "| search | p50 | p99 | n |", "|---|---|---|---|"]  # fmt: skip
        for name, label in (("restart", "first after a restart"), ("cold", "user not touched recently"),
                            ("warm", "same user again")):  # fmt: skip
            s = f[f"{name}_search_ms"]
            lines.append(f"| {label} | {s['p50']:.1f} ms | {s['p99']:.1f} ms | {s['n']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="user,rounds,fleet", help="which parts to run (default: %(default)s)")
    ap.add_argument(
        "--neighbours",
        type=int,
        default=200,
        help="users in one bucket for 'user' (the slope over the second half)",
    )
    ap.add_argument(
        "--kinds",
        default="",
        help=f"users for 'user', comma-separated (default: all: {', '.join(USER_KINDS)})",
    )
    ap.add_argument("--sizes", default="1000,10000", help="rounds of one user for 'rounds'")
    ap.add_argument(
        "--maintain", action="store_true", help="'rounds': measure again after a maintenance pass"
    )
    ap.add_argument("--users", type=int, default=10_000, help="users for 'fleet'")
    ap.add_argument("--rounds", type=int, default=20, help="rounds per user for 'fleet'")
    ap.add_argument(
        "--buckets", type=int, default=Settings().buckets_per_org, help="buckets per organisation"
    )
    ap.add_argument("--samples", type=int, default=300, help="users searched cold for 'fleet'")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/buckets"))
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument(
        "--resume", action="store_true", help="'fleet': go on with the fleet a killed run left in --work"
    )
    ap.add_argument("--serve", type=Path, default=None, help=argparse.SUPPRESS)  # the fleet's serving process
    a = ap.parse_args()
    if a.serve is not None:
        print(json.dumps(serve(a.serve, a.users, a.buckets, a.samples, a.seed)))
        return
    if a.resume and a.work is None:
        ap.error("--resume goes on with the fleet in --work: name it")
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in USER_KINDS]
    if unknown:
        ap.error(
            f"--kinds: no user kind {', '.join(map(repr, unknown))}; the kinds are {', '.join(map(repr, USER_KINDS))}"
        )
    run = Run.begin()
    chosen = set(a.parts.split(","))
    res: dict[str, Any] = {"args": {k: str(v) for k, v in vars(a).items()}}
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or Path(tmp)
        if "user" in chosen:
            res["user"] = users(work, a.neighbours, a.buckets, kinds)
        if "rounds" in chosen:
            res["rounds"] = rounds(work, [int(x) for x in a.sizes.split(",") if x], a.maintain)
        if "fleet" in chosen:
            res["fleet"] = fleet(work, a.users, a.rounds, a.buckets, a.samples, a.seed, a.resume)
    save_report(a.out, "buckets", res, report(res), run)


if __name__ == "__main__":
    main()
