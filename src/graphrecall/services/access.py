"""Scopes as the services see them: a scope's Kuzu database, its write log, and the locks that order their work.

Every service reaches a scope through ``ScopeAccess``, so the two rules that used to be written out at each call
site live here once:

*Resident, or flush first.* A small scope lives in its write log alone (``store.logs``: no Kuzu database until it
grows). A read of raw history answers such a scope from the log's tail; a read that only Kuzu can answer flushes
the log first (``flushed``), which gives a resident scope its database.

*Lock order.* Three locks guard a scope, always taken in this order and never the reverse:

1. ``knowledge(scope)``: what reads the extracted memory and then writes against it (extraction, ``add_fact``, the
   graph part of an import, ``consolidate``, ``supersede``) and ``erase``, which removes what they read. No two of
   these interleave on one scope: an erase cannot delete a message while an extraction is turning it into facts,
   and a supersede cannot change a fact that a consolidation has planned to merge.
2. ``writes(scope)`` (``ScopeLogs.scope_lock``): a write of chat history is planned against Kuzu plus the log's
   unflushed tail and appended under it; bulk writes, erase and each page of a backfill hold it too.
3. ``ScopeDatabase.write_lock`` (its bucket's): Kuzu's one writer per database, for one transaction. A flush takes it on the
   flusher's thread, so nobody flushes while holding it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from glob import escape as glob_escape
from pathlib import Path
from typing import TypeVar

from graphrecall.models import Scope
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.pool import DatabasePool

T = TypeVar("T")


class ScopeAccess:
    """The pool of scope databases and their write logs, with the lock policy of the module docstring."""

    def __init__(self, pool: DatabasePool, logs: ScopeLogs) -> None:
        self.pool = pool
        self.logs = logs
        self._guard = threading.Lock()
        self._knowledge: dict[Scope, threading.Lock] = {}

    def knowledge(self, scope: Scope) -> threading.Lock:
        """Lock 1: serializes what reads extracted memory and writes against it, and erase."""
        with self._guard:
            return self._knowledge.setdefault(scope, threading.Lock())

    def writes(self, scope: Scope) -> threading.Lock:
        """Lock 2: serializes the chat-history writes of one scope."""
        return self.logs.scope_lock(scope)

    def stored(self, scope: Scope) -> bool:
        """Whether the scope holds anything: a Kuzu database or a write log."""
        return self.logs.stored(scope)

    def resident(self, scope: Scope) -> bool:
        """Whether the scope lives in its write log alone (no Kuzu database yet)."""
        return self.logs.resident(scope)

    def has_database(self, scope: Scope) -> bool:
        return self.pool.exists(scope)

    def scopes(self) -> list[Scope]:
        return self.logs.scopes()

    @contextlib.contextmanager
    def database(self, scope: Scope, *, create: bool = False) -> Iterator[ScopeDatabase]:
        """The scope's database as it is (its log not flushed): for reads of extracted memory, which never waits
        in a log. ``NotFound`` when it has none and ``create`` is false."""
        with self.pool.acquire(scope, create=create) as db:
            yield db

    @contextlib.contextmanager
    def flushed(self, scope: Scope, *, create: bool = False) -> Iterator[ScopeDatabase]:
        """The scope's database with its write log flushed into it, for reads that only Kuzu answers. The database
        is taken first, so a store held by another process is reported busy before its log is touched; a scope
        that lives in its log is flushed before, which creates its database."""
        if self.logs.resident(scope):
            self.logs.flush(scope)
        with self.pool.acquire(scope, create=create) as db:
            self.logs.flush(scope)
            yield db

    def raw(self, scope: Scope, *, resident: Callable[[], T | None], kuzu: Callable[[ScopeDatabase], T]) -> T:
        """A read of raw history: from the log's tail while the scope lives there (``resident`` returns ``None``
        once it has a database), else from Kuzu after a flush."""
        found = resident()
        if found is not None:
            return found
        with self.flushed(scope) as db:
            return kuzu(db)

    def disk_bytes(self, scope: Scope) -> int:
        """Bytes on disk of the scope's own files: its derived indexes (``x.kuzu.idx/``) and write log
        (``x.log.sqlite``, ``-wal``...), and a database of its own not yet moved into its bucket. Its rows share a
        bucket with other scopes (``store.buckets``), whose file is not split between them."""
        return sum(
            _bytes(p) for base in (self.pool.path_for(scope), self.logs.path(scope)) for p in _beside(base)
        )

    def last_write(self, scope: Scope) -> float | None:
        """The latest modification time (epoch seconds) of the scope's files, or None when it has none: when a
        write last reached its database or its write log."""
        stats = (
            _stat(p) for base in (self.pool.path_for(scope), self.logs.path(scope)) for p in _beside(base)
        )
        return max((st.st_mtime for st in stats if st is not None), default=None)

    def close(self) -> None:
        """Pending writes reach Kuzu (a scope that lives in its log stays there), then every database closes."""
        try:
            self.logs.close()
        finally:
            self.pool.close()


def _beside(path: Path) -> list[Path]:
    return [
        path,
        *path.parent.glob(glob_escape(path.name) + ".*"),
        *path.parent.glob(glob_escape(path.name) + "-*"),
    ]


def _stat(path: Path) -> os.stat_result | None:
    """The file's stat, or None when it is gone: a scope's files come and go while it is read (a vector index's
    graph save deletes the files of the save before it, a checkpoint its WAL), so a listing may name a file that a
    ``stat`` a moment later no longer finds."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a directory, counting a file or folder deleted meanwhile as 0
    (``os.walk`` skips a folder it can no longer list, where ``Path.rglob`` raises)."""
    found: Iterable[os.stat_result | None] = (
        (_stat(Path(top) / name) for top, _, names in os.walk(path) for name in names)
        if path.is_dir()
        else (_stat(path),)
    )
    return sum(st.st_size for st in found if st is not None and stat.S_ISREG(st.st_mode))
