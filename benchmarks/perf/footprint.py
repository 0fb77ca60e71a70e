"""Disk footprint of a scope through the public API: a one-message user, bytes per round by store size, and many
single-turn writes against the same data written in one batch.

Everything a scope leaves on disk counts: its organisation's bucket (``.buckets``: Kuzu's file, shared with the
organisation's other users, here none), the derived indexes (``<user>.kuzu.idx/``) and the write log
(``<user>.log.sqlite*``); ``benchmarks/perf/buckets.py`` measures what a user costs in a bucket shared with others.
Each store is closed before it is measured (Kuzu checkpointed, the log flushed into Kuzu except for a scope small
enough to live in its log: ``Settings.resident_rounds``), which is what a scope at rest costs. The one-message user is also measured with ``resident_rounds=0`` (every scope in Kuzu, as
before small scopes stayed in their log), in the same run. Vectors come from a 384-dimensional hashing embedder:
what is stored per round does not depend on which model made the vectors, only on their dimension (MiniLM's).

    python -m benchmarks.perf.footprint --sizes 1,100,10000 --turns 1000 --out benchmarks/results/footprint
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder

SCOPE = Scope(org_id="bench", user_id="u")
KB = 1024


def scope_files(root: Path, scope: Scope) -> dict[str, int]:
    """Bytes per component of one scope's files (directories counted recursively), and its organisation's buckets
    (``.buckets``: shared with the organisation's other users; these benchmarks store one user per root, so the
    buckets are that user's, floor included)."""
    out: dict[str, int] = {}
    buckets = root / scope.org_id / ".buckets"
    if buckets.is_dir():
        out[".buckets"] = sum(f.stat().st_size for f in buckets.rglob("*") if f.is_file())
    for p in (root / scope.org_id).glob(f"{scope.user_id}.*"):
        name = p.name[len(scope.user_id) :]
        key = ".kuzu.idx" if name.endswith(".idx") else ".log" if ".log" in name else name
        size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
        out[key] = out.get(key, 0) + size
    return out


def _open(root: Path, resident_rounds: int | None = None) -> Memory:
    settings = (
        Settings(root=root)
        if resident_rounds is None
        else Settings(root=root, resident_rounds=resident_rounds)
    )
    return Memory.open(root, embedder=HashingEmbedder(384), settings=settings)


def _turn(i: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": f"Turn {i}: today I walked the dog past bakery number {i} and bought rye.",
        },
        {"role": "assistant", "content": f"Nice! Was bakery {i} the one with the sourdough you liked?"},
    ]


def _sessions(n: int, rounds_per_session: int = 1) -> list[dict[str, Any]]:
    t0 = datetime(2024, 1, 1)
    return [
        {
            "session_id": f"s{i}",
            "date": (t0 + timedelta(minutes=i)).isoformat(),
            "messages": [m for j in range(rounds_per_session) for m in _turn(i * rounds_per_session + j)],
        }
        for i in range(n)
    ]


def measure(root: Path, write: Any, resident_rounds: int | None = None) -> dict[str, Any]:
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    with _open(root, resident_rounds) as mem:
        write(mem)
    files = scope_files(root, SCOPE)
    return {"bytes": sum(files.values()), "files": files, "seconds": time.perf_counter() - t0}


def run(work: Path, sizes: list[int], turns: int) -> dict[str, Any]:
    res: dict[str, Any] = {"resident_rounds": Settings().resident_rounds}

    def hello(m: Memory) -> None:
        m.add_session(SCOPE, [{"role": "user", "content": "hello"}], session_id="s0", date="2024-01-01")

    res["one_message_user"] = measure(work / "one", hello)
    res["one_message_user_in_kuzu"] = measure(work / "one_kuzu", hello, resident_rounds=0)
    res["sizes"] = {}
    for n in sizes:
        per = 10 if n >= 100 else 1
        sessions = _sessions(max(1, n // per), per)
        r = measure(work / f"size{n}", lambda m, s=sessions: m.add_sessions(SCOPE, s, batch_sessions=500))
        r["bytes_per_round"] = r["bytes"] / n
        res["sizes"][str(n)] = r
        print(f"  {n} rounds: {r['bytes'] / KB:.0f} KB ({r['bytes_per_round']:.0f} B/round)", flush=True)
    single = _sessions(turns)

    def one_at_a_time(m: Memory) -> None:
        for s in single:
            m.add_session(SCOPE, s["messages"], session_id=s["session_id"], date=s["date"])

    res["single_turn_writes"] = measure(work / "single", one_at_a_time)
    res["one_batch"] = measure(work / "batch", lambda m: m.add_sessions(SCOPE, single, batch_sessions=turns))
    res["turns"] = turns
    res["single_vs_batch"] = res["single_turn_writes"]["bytes"] / res["one_batch"]["bytes"]
    return res


def report(res: dict[str, Any]) -> str:
    one = res["one_message_user"]
    lines = [
        "| what | bytes | per round | components |",
        "|---|---|---|---|",
        f"| one-message user | {one['bytes'] / KB:.0f} KB | | {_parts(one['files'])} |",
    ]
    kuzu = res.get("one_message_user_in_kuzu")
    if kuzu is not None:
        lines.append(
            f"| one-message user, resident_rounds=0 | {kuzu['bytes'] / KB:,.0f} KB | | {_parts(kuzu['files'])} |"
        )
    for n, r in res["sizes"].items():
        lines.append(
            f"| {int(n):,} rounds | {r['bytes'] / KB:,.0f} KB | {r['bytes_per_round']:,.0f} B | {_parts(r['files'])} |"
        )
    t = res["turns"]
    for key, label in (
        ("single_turn_writes", f"{t:,} single-turn writes"),
        ("one_batch", "same data, one batch"),
    ):
        r = res[key]
        lines.append(
            f"| {label} | {r['bytes'] / KB:,.0f} KB | {r['bytes'] / t:,.0f} B | {_parts(r['files'])} |"
        )
    lines.append("")
    lines.append(f"single-turn writes / one batch: **{res['single_vs_batch']:.2f}x**")
    return "\n".join(lines)


def _parts(files: dict[str, int]) -> str:
    return ", ".join(f"{k} {v / KB:,.0f} KB" for k, v in sorted(files.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,100,10000", help="store sizes in rounds (default: %(default)s)")
    ap.add_argument(
        "--turns", type=int, default=1000, help="single-turn writes vs one batch (default: %(default)s)"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/footprint"), help="report directory")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    a = ap.parse_args()
    this_run = Run.begin()
    sizes = [int(x) for x in a.sizes.split(",") if x]
    with tempfile.TemporaryDirectory() as tmp:
        res = run(a.work or Path(tmp), sizes, a.turns)
    save_report(a.out, "footprint", res, report(res), this_run)


if __name__ == "__main__":
    main()
