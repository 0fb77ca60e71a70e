"""Issue 28's target for repeated operations: "Repeating import, erase, consolidate and add_fact 100 times on a
scope grows its files by no more than the data written", without compaction and with it.

One scope, in its organisation's one bucket, holds a session and a fact; then each cycle
- imports ``--sessions`` sessions of two turns in the export format (``import_sessions``: a bulk write into Kuzu),
- erases them (``erase``: the sessions, their messages and rounds),
- consolidates (``consolidate``: the scripted model merges every group of similar facts it is shown),
- adds a fact (``add_fact``: versioned by the scripted model as new).
Vectors come from a 384-dimensional hashing embedder (what is stored does not depend on the model, only on the
dimension), the model is scripted (``graphrecall.llm.ScriptedLLM``), so no model runs.

- ``without``: nothing else;
- ``with``: a maintenance pass after every cycle, as ``graphrecall serve --maintain`` runs one every 5 minutes
  (``Memory.maintain`` with the default idle time, so the scope, in use, is not consolidated again; its bucket is
  compacted once its free share passes ``Settings.compact_free_fraction``, ``--bound``). The maintenance clock moves
  5 minutes per cycle, so each pass measures the bucket anew.

And ``ingest``: one user bulk-ingests ``--ingest`` rounds (sessions of 10 turns, 500 sessions per call, as
``benchmarks/perf/buckets.py`` does), then its bucket is measured and compacted: what a write-once bucket holds
beyond its rows, and how much of it the estimate finds.

Data written: the bytes of every table of rows and edges the operations inserted (the arrow tables that
``WriteTxn.copy`` receives: texts, vectors, keys). Files: the scope's bucket, its derived indexes and its write log;
the store is closed before the first and the last measurement (in between: the files as they stand).

    python -m benchmarks.perf.repeat_ops --cycles 100 --ingest 2000 --out benchmarks/results/repeat_ops
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM, Step
from graphrecall.llm.base import ChatMessage
from graphrecall.store import database

KB = 1024
MB = 1024 * 1024
SCOPE = Scope(org_id="bench", user_id="u")
OPS = ("import", "erase", "consolidate", "add_fact", "maintain")
PASS_S = 300.0  # the maintenance clock between cycles: serve --maintain's pass


def _prompt(messages: list[ChatMessage]) -> str:
    return "\n".join(m.content for m in messages)


def _versions(messages: list[ChatMessage]) -> dict[str, Any]:
    labels = sorted(set(re.findall(r"\bn\d+\b", _prompt(messages))))
    return {"decisions": [{"fact": n, "decision": "NEW", "target": None, "reason": "bench"} for n in labels]}


def _merge(messages: list[ChatMessage]) -> dict[str, Any]:
    labels = sorted(set(re.findall(r"\bf\d+\b", _prompt(messages).split("Facts (kind")[-1])))
    return {"decision": "MERGE", "keep": labels[0] if labels else None, "text": None, "reason": "bench"}


def _open(root: Path, bound: float) -> Memory:
    return Memory.open(
        root,
        embedder=HashingEmbedder(384),
        llm=ScriptedLLM([Step("New facts, each followed", _versions), Step("You tidy an assistant's", _merge)],
                        ordered=False),
        extraction=ExtractionConfig(background=False),
        settings=Settings(root=root, buckets_per_org=1, compact_free_fraction=bound),
    )  # fmt: skip


def sessions(cycle: int, n: int) -> list[dict[str, Any]]:
    """``n`` sessions of one short exchange in the export format, dated ``cycle`` days after 2024-01-01."""
    t0 = datetime(2024, 1, 1) + timedelta(days=cycle)
    return [
        {
            "id": f"c{cycle}s{j}",
            "started_at": (t0 + timedelta(hours=j)).isoformat(),
            "messages": [
                {"role": "user", "content": f"Cycle {cycle}, session {j}: I walked the dog past bakery "
                                            f"{cycle * 10 + j} and bought rye bread."},
                {"role": "assistant", "content": f"Nice! Was bakery {cycle * 10 + j} the one with the sourdough?"},
            ],
        }
        for j in range(n)
    ]  # fmt: skip


def files(root: Path) -> dict[str, int]:
    """The scope's bytes on disk: its bucket (with Kuzu's WAL), its derived indexes, its write log."""
    out = {"bucket": 0, "indexes": 0, "log": 0}
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        s = str(p)
        if "/.buckets/" in s and ".kuzu" in p.name:
            out["bucket"] += p.stat().st_size
        elif ".kuzu.idx/" in s:
            out["indexes"] += p.stat().st_size
        elif ".log.sqlite" in p.name:
            out["log"] += p.stat().st_size
    return out


@contextmanager
def counting() -> Iterator[list[int]]:
    """The bytes of every arrow table inserted through ``WriteTxn.copy`` inside the block (one running total)."""
    written = [0]
    original = database.WriteTxn.copy

    def copy(self: database.WriteTxn, table: str, data: Any) -> None:
        written[0] += int(data.nbytes)
        original(self, table, data)

    database.WriteTxn.copy = copy  # type: ignore[method-assign]
    try:
        yield written
    finally:
        database.WriteTxn.copy = original  # type: ignore[method-assign]


def _cycle(m: Memory, i: int, n: int) -> dict[str, float]:
    """One cycle's four operations (module docstring); the seconds each took."""
    took: dict[str, float] = {}
    t = time.perf_counter()
    m.import_sessions(SCOPE, sessions(i, n))
    took["import"], t = time.perf_counter() - t, time.perf_counter()
    m.erase(SCOPE, session_ids=[f"c{i}s{j}" for j in range(n)])
    took["erase"], t = time.perf_counter() - t, time.perf_counter()
    m.consolidate(SCOPE)
    took["consolidate"], t = time.perf_counter() - t, time.perf_counter()
    m.add_fact(SCOPE, f"The user bought rye bread at bakery number {i}.")
    took["add_fact"] = time.perf_counter() - t
    return took


def run(root: Path, cycles: int, sessions: int, maintain: bool, bound: float) -> dict[str, Any]:
    shutil.rmtree(root, ignore_errors=True)
    with _open(root, bound) as m:
        m.add_sessions(SCOPE, [{"session_id": "base", "date": "2023-12-01",
                                "messages": [{"role": "user", "content": "I live in Lyon."}]}])  # fmt: skip
        m.add_fact(SCOPE, "The user lives in Lyon.")
    start = files(root)
    seconds: dict[str, list[float]] = {op: [] for op in OPS}
    curve: list[dict[str, Any]] = []
    compactions: list[dict[str, Any]] = []
    clock = [1_780_000_000.0]
    with counting() as written, _open(root, bound) as m:
        testing.set_clock(m, lambda: clock[0])
        for i in range(cycles):
            for op, took in _cycle(m, i, sessions).items():
                seconds[op].append(took)
            if maintain:
                clock[0] += PASS_S
                t = time.perf_counter()
                c = m.maintain(SCOPE).compaction
                seconds["maintain"].append(time.perf_counter() - t)
                if c is not None and c.compacted:
                    compactions.append({"cycle": i + 1, **c.model_dump()})
                    print(f"    cycle {i + 1}: compacted {c.bytes / MB:.1f} -> {(c.bytes_after or 0) / MB:.1f} MB "
                          f"({c.free_fraction:.0%} free by the estimate) in {c.seconds} s", flush=True)  # fmt: skip
            if (i + 1) % 10 == 0 or i + 1 == cycles:
                now = files(root)
                curve.append({"cycle": i + 1, "files": now, "written": written[0]})
                print(f"  {i + 1:4d}: bucket {now['bucket'] / MB:6.1f} MB, indexes {now['indexes'] / KB:6.0f} KB, "
                      f"log {now['log'] / KB:4.0f} KB; written {written[0] / KB:6.0f} KB", flush=True)  # fmt: skip
        total_written = written[0]
        facts = len(m.facts(SCOPE, include_superseded=True))
    end = files(root)
    growth = sum(end.values()) - sum(start.values())
    return {
        "maintain": maintain,
        "cycles": cycles,
        "sessions_per_import": sessions,
        "start": start,
        "end": end,
        "growth_bytes": growth,
        "growth_by_part": {k: end[k] - start[k] for k in end},
        "written_bytes": total_written,
        "growth_over_written": growth / total_written if total_written else None,
        "peak_bytes": max(sum(c["files"].values()) for c in curve),
        "fact_versions": facts,
        "curve": curve,
        "compactions": compactions,
        "ms": {op: 1000 * sum(xs) / len(xs) for op, xs in seconds.items() if xs},
    }


def ingest(root: Path, rounds: int) -> dict[str, Any]:
    shutil.rmtree(root, ignore_errors=True)
    t0 = datetime(2024, 1, 1)
    history = [
        {"session_id": f"s{i}", "date": (t0 + timedelta(hours=i)).isoformat(),
         "messages": [m for j in range(10) for m in (
             {"role": "user", "content": f"Turn {i * 10 + j}: I walked the dog past bakery {j} and bought rye."},
             {"role": "assistant", "content": f"Was bakery {j} the one with the sourdough you liked?"})]}
        for i in range(max(1, rounds // 10))
    ]  # fmt: skip
    with counting() as written, _open(root, 0.99) as m:
        t = time.perf_counter()
        for start in range(0, len(history), 500):
            m.add_sessions(SCOPE, history[start : start + 500], batch_sessions=500)
        seconds = time.perf_counter() - t
        pool = testing.pool(m)
        found = pool.free_space(SCOPE)
        assert found is not None
        path, free = found
        done = pool.compact(path)
    out = {
        "rounds": rounds,
        "ingest_s": seconds,
        "written_bytes": written[0],
        "bytes_before": done.bytes_before,
        "bytes_after": done.bytes_after,
        "estimated_free_bytes": free.free_bytes,
        "compaction_s": done.seconds,
    }
    print(f"  {rounds:,} rounds: bucket {done.bytes_before / MB:.1f} -> {done.bytes_after / MB:.1f} MB in "
          f"{done.seconds:.1f} s; the estimate found {free.free_bytes / MB:.1f} MB free", flush=True)  # fmt: skip
    return out


def report(res: dict[str, Any]) -> str:
    lines = [
        "| run | files before | files after | growth (bucket / indexes / log) | data written | growth / written | "
        "largest on the way | compactions |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("without", "with"):
        r = res.get(name)
        if r is None:
            continue
        g = r["growth_by_part"]
        lines.append(
            f"| {name} compaction | {sum(r['start'].values()) / MB:.1f} MB | {sum(r['end'].values()) / MB:.1f} MB | "
            f"{r['growth_bytes'] / MB:+.2f} MB ({g['bucket'] / MB:+.2f} / {g['indexes'] / MB:+.2f} / "
            f"{g['log'] / MB:+.2f}) | {r['written_bytes'] / MB:.2f} MB | {r['growth_over_written']:.2f} | "
            f"{r['peak_bytes'] / MB:.1f} MB | {len(r['compactions'])} |"
        )
    for name in ("without", "with"):
        r = res.get(name)
        if r is None:
            continue
        ms = ", ".join(f"{op} {v:.0f} ms" for op, v in r["ms"].items())
        lines += ["", f"{name} compaction, mean per cycle: {ms}"]
        for c in r["compactions"]:
            lines.append(f"- cycle {c['cycle']}: {c['bytes'] / MB:.1f} -> {(c['bytes_after'] or 0) / MB:.1f} MB in "
                         f"{c['seconds']} s ({c['free_fraction']:.0%} free by the estimate)")  # fmt: skip
    g = res.get("ingest")
    if g:
        freed = g["bytes_before"] - g["bytes_after"]
        lines += ["", f"Bulk ingest of {g['rounds']:,} rounds ({g['written_bytes'] / MB:.1f} MB written): bucket "
                  f"{g['bytes_before'] / MB:.1f} MB, compacted to {g['bytes_after'] / MB:.1f} MB in "
                  f"{g['compaction_s']:.1f} s; the estimate found {g['estimated_free_bytes'] / MB:.1f} MB of the "
                  f"{freed / MB:.1f} MB given back"]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=3, help="sessions per import")
    ap.add_argument("--bound", type=float, default=Settings().compact_free_fraction,
                    help="compact_free_fraction for the run with compaction (default: the setting's, %(default)s)")  # fmt: skip
    ap.add_argument("--runs", default="without,with,ingest", help="which runs (default: %(default)s)")
    ap.add_argument(
        "--ingest", type=int, default=2000, help="rounds of the bulk ingest (default: %(default)s)"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/repeat_ops"))
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    a = ap.parse_args()
    run_record = Run.begin()
    res: dict[str, Any] = {"args": {k: str(v) for k, v in vars(a).items()}}
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or Path(tmp)
        for name in a.runs.split(","):
            print(f"{name}{'' if name == 'ingest' else ' compaction'}:", flush=True)
            if name == "ingest":
                res[name] = ingest(work / name, a.ingest)
            else:
                res[name] = run(work / name, a.cycles, a.sessions, name == "with", a.bound)
    save_report(a.out, "repeat_ops", res, report(res), run_record)


if __name__ == "__main__":
    main()
