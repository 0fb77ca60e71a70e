"""Can an acknowledged Kuzu commit rest on Kuzu's own WAL? Kuzu alone (kuzu==0.11.3), killed with SIGKILL.

Why this is measured: ``ScopeDatabase.write()`` checkpoints after every acknowledged ``CREATE`` commit (an
``add_fact``, an erase, a supersession), and each checkpoint rewrites the bucket's changed column chunks into pages
Kuzu does not reuse: a user who adds 10 facts one by one costs ~55-290 KB more on disk than one whose 10 commits
share a checkpoint (docs/benchmarks.md, "A checkpoint per acknowledged write"). Kuzu ``fdatasync``s its WAL at
every commit (strace: one ``pwrite`` at the end of the WAL and one ``fdatasync`` per ``COMMIT``), so the commit
alone would be durable if the WAL could always be replayed after a crash. This benchmark asks whether it can.

A child process writes transactions into one database (1-20 ``CREATE``s of a node with its edge, or a ``COPY`` of
300-3,000 rows one time in ten) and records each commit, once ``COMMIT`` returned, in an fsync'd file with the WAL's
size at that point (the commit boundary); after one commit in seven it runs ``CHECKPOINT``. The parent kills it
after 0.5-3 s, then opens the database in a child process (the replay ``store.recovery`` probes). When the replay
fails, it tries the WAL cut back to the last recorded commit boundary (a torn last record would be what that
mends), and then sets the WAL aside as ``store.recovery`` does and counts the recorded commits that are gone.

    python -m benchmarks.perf.kuzu_wal_kills --kills 60 --out benchmarks/results/kuzu-wal-kills
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run

WRITER = r"""
import importlib.util, os, random, sys
import kuzu, pyarrow as pa
path = sys.argv[1]
db = kuzu.Database(path, buffer_pool_size=64 << 20, max_db_size=1 << 36)
c = kuzu.Connection(db)
if not os.path.exists(path + ".acked"):
    c.execute("CREATE NODE TABLE IF NOT EXISTS T(k STRING PRIMARY KEY, v STRING, e FLOAT[16])")
    c.execute("CREATE REL TABLE IF NOT EXISTS R(FROM T TO T)")
    c.execute("CHECKPOINT")
acked = os.open(path + ".acked", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
wal = path + ".wal"
rng = random.Random(os.getpid())
i = 0
while True:
    i += 1
    key = f"{os.getpid()}-{i}"
    c.execute("BEGIN TRANSACTION")
    if rng.random() < 0.1:
        n = rng.randint(300, 3000)
        c.execute("COPY T FROM $t", {"t": pa.table({
            "k": [f"{key}-{j}" for j in range(n)], "v": ["x" * rng.randint(1, 400)] * n,
            "e": pa.array([[0.5] * 16] * n, pa.list_(pa.float32(), 16))})})
    else:
        for j in range(rng.randint(1, 20)):
            c.execute("CREATE (:T {k: $k, v: $v, e: $e})", {"k": f"{key}-{j}", "v": "y" * rng.randint(1, 2000),
                      "e": [0.25] * 16})
            if j:
                c.execute("MATCH (a:T {k: $a}), (b:T {k: $b}) CREATE (a)-[:R]->(b)",
                          {"a": f"{key}-{j}", "b": f"{key}-{j - 1}"})
    c.execute("COMMIT")
    size = os.path.getsize(wal) if os.path.exists(wal) else 0
    os.write(acked, f"{key} {size}\n".encode())
    os.fdatasync(acked)
    if rng.random() < 1 / 7:
        c.execute("CHECKPOINT")
"""

READER = r"""
import importlib.util, sys
import kuzu
db = kuzu.Database(sys.argv[1], buffer_pool_size=64 << 20, max_db_size=1 << 36)
r = kuzu.Connection(db).execute("MATCH (t:T) RETURN t.k")
keys = set()
while r.has_next():
    keys.add(r.get_next()[0])
open(sys.argv[2], "w").write("\n".join(keys))
db.close()
"""

SUFFIXES = ("", ".wal", ".shadow")


def _replay(path: Path, timeout: float) -> tuple[str, set[str]]:
    """Open the database in a child: ``ok`` with its keys, else how it failed (``signal N`` or the last line)."""
    keys = path.with_name(path.name + ".keys")
    keys.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", READER, str(path), str(keys)], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode == 0:
        return "ok", set(keys.read_text().split("\n"))
    if done.returncode < 0:
        return f"signal {-done.returncode}", set()
    last = [line for line in done.stderr.strip().splitlines() if line.strip()][-1:] or ["?"]
    return last[0][:160], set()


def _files(path: Path) -> dict[str, bytes]:
    return {s: Path(f"{path}{s}").read_bytes() for s in SUFFIXES if Path(f"{path}{s}").exists()}


def _restore(path: Path, saved: dict[str, bytes]) -> None:
    for s in SUFFIXES:
        p = Path(f"{path}{s}")
        if s in saved:
            p.write_bytes(saved[s])
        else:
            p.unlink(missing_ok=True)


def one_kill(path: Path, rng: random.Random, timeout: float) -> dict[str, Any]:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stderr=subprocess.PIPE)
    time.sleep(rng.uniform(0.5, 3.0))
    writer.send_signal(signal.SIGKILL)
    _, err = writer.communicate()
    if writer.returncode != -signal.SIGKILL:
        # Seen: a database whose WAL was set aside segfaults the next process that opens it (a checkpoint cut off
        # leaves a primary-key index out of step with the rows: why store.pool rewrites such a bucket).
        for p in path.parent.glob(f"{path.name}*"):
            p.unlink()
        return {
            "writer_died": writer.returncode,
            "said": err.decode(errors="replace")[-300:],
            "acked": 0,
            "acked_lost": 0,
            "replay": "not reached",
        }
    wal = Path(f"{path}.wal")
    lines = [x.split() for x in Path(f"{path}.acked").read_text().splitlines() if x.strip()]
    acked, boundary = {k for k, _ in lines}, int(lines[-1][1]) if lines else 0
    row: dict[str, Any] = {
        "wal_bytes": wal.stat().st_size if wal.exists() else None,
        "boundary": boundary,
        "in_checkpoint": Path(f"{path}.shadow").exists(),
    }
    saved = _files(path)
    row["replay"], keys = _replay(path, timeout)
    if row["replay"] != "ok" and row["wal_bytes"] is not None and row["wal_bytes"] > boundary:
        with open(wal, "r+b") as f:
            f.truncate(boundary)
        row["cut_back"], keys = _replay(path, timeout)
    if row["replay"] != "ok" and row.get("cut_back") != "ok":
        _restore(path, saved)
        wal.rename(f"{wal}.aside")  # what store.recovery does
        Path(f"{path}.shadow").unlink(missing_ok=True)
        row["set_aside"], keys = _replay(path, timeout)
    row["acked"] = len(acked)
    row["acked_lost"] = len({k for k in acked if f"{k}-0" not in keys})
    Path(f"{wal}.aside").unlink(missing_ok=True)
    return row


def run(kills: int, databases: int, seed: int, work: Path, timeout: float) -> dict[str, Any]:
    rng = random.Random(seed)
    rows = []
    for i in range(kills):
        path = work / f"db{i % databases}"
        before = 0
        for r in rows:  # the lost count of this database since it was last made afresh
            if r["db"] == path.name:
                before = r["acked_lost"]
        row = {"db": path.name, **one_kill(path, rng, timeout)}
        row["newly_lost"] = max(0, row["acked_lost"] - before)
        rows.append(row)
        print(f"{i:3d} {row}", flush=True)
    killed = [r for r in rows if "writer_died" not in r]
    failed = [r for r in killed if r["replay"] != "ok"]
    return {
        "kills": len(killed),
        "rows": rows,
        "reopen_died": sum("writer_died" in r for r in rows),
        "replay_failed": len(failed),
        "replay_failed_in_checkpoint": sum(r["in_checkpoint"] for r in failed),
        "failures": dict(Counter(r["replay"].split(":")[0] for r in failed)),
        "cut_back_tried": sum("cut_back" in r for r in rows),
        "cut_back_helped": sum(r.get("cut_back") == "ok" for r in rows),
        "kills_losing_acked": sum(r["newly_lost"] > 0 for r in rows),
        "acked_lost": sum(r["newly_lost"] for r in rows),
    }


def report(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            "# Kuzu 0.11.3 killed while it writes: can its WAL alone keep an acknowledged commit?",
            "",
            "| kills | WAL replay failed | of which during a checkpoint | cut back to the last commit: tried / "
            "helped | kills that lost acknowledged commits | acknowledged commits lost |",
            "|---|---|---|---|---|---|",
            f"| {r['kills']} | {r['replay_failed']} | {r['replay_failed_in_checkpoint']} | "
            f"{r['cut_back_tried']} / {r['cut_back_helped']} | {r['kills_losing_acked']} | {r['acked_lost']} |",
            "",
            f"How the replays failed: {r['failures']}. A database whose WAL had been set aside made the next "
            f"process that opened it die {r['reopen_died']} times (that database was then made afresh).",
            "",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=60)
    ap.add_argument(
        "--databases", type=int, default=3, help="databases killed in turn (each grows over its kills)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a replay may take")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/kuzu-wal-kills"))
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temporary one)")
    a = ap.parse_args()
    if a.kills < 1 or a.databases < 1:
        ap.error("--kills and --databases must be at least 1")
    run_info = Run.begin()
    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or Path(tmp)
        if a.work is not None:
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
        res = run(a.kills, a.databases, a.seed, work, a.timeout)
    save_report(a.out, "kuzu_wal_kills", res, report(res), run_info)


if __name__ == "__main__":
    main()
