"""One process at a time per scope: a POSIX lock on ``<log>.lock``, shared by every user within this process.

Why: Kuzu refuses a second process on a database file (its own file lock), and that is what kept two processes from
writing one scope: each would keep its own tail of the scope's write log and plan ids that clash. A scope that lives
in its write log (``store.logs``) has no database yet, and SQLite lets several processes write one file, so the
log needs the same rule. Like Kuzu's, the lock belongs to the process: two ``Memory`` objects of one process share
it, and the kernel drops it when the process dies, so a lock file left behind is harmless.

POSIX (``fcntl``) locks are dropped when *any* descriptor of the file is closed by the process, so the lock lives
on a file of its own that only this module opens, once per process, reference counted.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from graphrecall.errors import StoreBusy

_held: dict[Path, tuple[int, int]] = {}  # lock file -> (descriptor, users in this process)
_guard = threading.Lock()


def lock_path(log: Path) -> Path:
    """The lock file that guards ``log``."""
    return Path(f"{log}.lock")


def acquire(log: Path, what: str) -> None:
    """Take the lock that guards ``log`` for this process (again, if it holds it already); ``StoreBusy`` naming
    ``what`` when another process holds it."""
    path = lock_path(log)
    with _guard:
        found = _held.get(path)
        if found is not None:
            _held[path] = (found[0], found[1] + 1)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise StoreBusy(f"{what} is held by another process ({e.strerror or e})") from None
        _held[path] = (fd, 1)


def release(log: Path) -> None:
    """Let go of one use of the lock that guards ``log``; the last one closes the file, which drops the lock."""
    path = lock_path(log)
    with _guard:
        found = _held.get(path)
        if found is None:
            return
        fd, users = found
        if users > 1:
            _held[path] = (fd, users - 1)
            return
        del _held[path]
        os.close(fd)
