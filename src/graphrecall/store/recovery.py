"""Crash recovery for a scope's database, done before the serving process touches it.

Kuzu removes a database's ``.wal`` on a clean close, so a WAL found at open time means the last owner died (kill -9,
power loss). Kuzu replays it on open, which normally works. But Kuzu 0.11.3 crashes the whole process (SIGSEGV)
when the WAL ends in a torn record, as a write cut off mid-flush leaves it (measured: about one kill -9 in three
during a write load). A server must not die on open, so the replay is first tried in a throwaway child process:

- the child replays and closes cleanly: the database is consistent, the parent opens it normally;
- the child is killed by a signal: the WAL cannot be replayed; it is moved aside (never deleted) as
  ``<name>.wal.corrupt-<utc time>`` together with any ``.shadow`` file, and a warning names it. What is lost is the
  torn tail, i.e. the transaction that was being written when the process died, which was never acknowledged;
- the child fails because the replay finds a duplicated primary key: the WAL is moved aside the same way. Why: a
  process killed while a checkpoint was folding the WAL into the file (a ``COPY`` commit checkpoints at once) leaves
  a WAL whose transactions are partly in the file already (Kuzu completes what the ``.shadow`` pages hold at open),
  and Kuzu 0.11.3 replays it again and fails on the keys it wrote (measured: a ``graphrecall reembed`` killed during
  its import). Only partly: killed during a checkpoint, Kuzu alone lost 1-15 of the commits that WAL held in each of
  9 kills out of 57 once it was set aside (``benchmarks/perf/kuzu_wal_kills.py``). Nothing acknowledged is among
  them, because nothing is acknowledged on Kuzu's WAL alone: a write is acknowledged after its checkpoint
  (``ScopeDatabase.write``), or stays in the write log until one (the flusher), and the log replays it;
- the child fails with any other ordinary error (for instance another process holds the database): nothing is
  touched and the normal open reports the error.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

PROBE = (
    "import importlib.util, sys, kuzu\n"
    "db = kuzu.Database(sys.argv[1], buffer_pool_size=16 << 20, max_db_size=1 << 36)\n"
    "kuzu.Connection(db).execute('RETURN 1')\n"
    "db.close()\n"
)


def wal_path(path: Path) -> Path:
    return Path(str(path) + ".wal")


def recover(path: Path, *, probe: str = PROBE, timeout: float = 300.0) -> Path | None:
    """Make ``path`` safe to open. Returns where a quarantined WAL was moved, or None when nothing was moved."""
    wal = wal_path(path)
    if not path.exists() or not wal.exists():
        return None
    try:
        proc = subprocess.run(
            [sys.executable, "-c", probe, str(path)], capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        log.warning("recovery probe for %s timed out; opening it directly", path)
        return None
    replayed_twice = proc.returncode > 0 and b"duplicated primary key" in proc.stderr
    if proc.returncode >= 0 and not replayed_twice:
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    moved = Path(f"{wal}.corrupt-{stamp}")
    wal.rename(moved)
    shadow = Path(str(path) + ".shadow")
    if shadow.exists():
        shadow.rename(Path(f"{shadow}.corrupt-{stamp}"))
    why = (
        "a checkpoint was cut off: part of its transactions is in the file already"
        if replayed_twice
        else f"the replay died with signal {-proc.returncode}"
    )
    log.warning(
        "database %s: its write-ahead log could not be replayed (%s); moved it to %s. "
        "What it held beyond the file is not applied: writes still in a write log are applied again from there.",
        path,
        why,
        moved,
    )
    return moved
