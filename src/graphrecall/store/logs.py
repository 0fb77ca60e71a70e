"""The write logs of a store root: one ``store.wal.ScopeLog`` per scope that has been written to, opened on demand.

Why a registry: a small write (a chat turn) is acknowledged once it is in the scope's durable log and searchable
from the log's in-memory tail; the scope's flusher moves it into Kuzu in batches (``docs/architecture.md``, "Writes
in a live service"). Something must own those logs for the life of a ``Memory``: open a scope's log when the scope
is first written or read (opening replays what a crash left), flush before reads that only Kuzu can answer
(listing sessions, export, extraction), delete a log with its scope, and flush every log on close.

Open logs are bounded (each has a flusher thread): past ``capacity`` the least recently used one is flushed and
closed; its file stays, and the next access opens it again.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from graphrecall.errors import StorageFull
from graphrecall.models import Scope
from graphrecall.store.pool import DatabasePool
from graphrecall.store.wal import ScopeLog, TailSnapshot, WriteEntry, log_path
from graphrecall.store.wal.apply import apply_entries


class ScopeLogs:
    def __init__(
        self,
        pool: DatabasePool,
        dim: int,
        *,
        capacity: int = 64,
        batch_entries: int = 64,
        max_age_s: float = 5.0,
    ) -> None:
        self._pool = pool
        self._dim = dim
        self._capacity = max(1, capacity)
        self._batch_entries = batch_entries
        self._max_age_s = max_age_s
        self._open: OrderedDict[Scope, ScopeLog] = OrderedDict()
        self._lock = threading.Lock()
        self._scope_locks: dict[Scope, threading.Lock] = {}  # writes of a scope, one at a time
        self._opening: dict[Scope, threading.Lock] = {}  # one open of a scope's log at a time
        self._closed = False

    def path(self, scope: Scope) -> Path:
        return log_path(self._pool.root, scope)

    def scope_lock(self, scope: Scope) -> threading.Lock:
        """Serializes the writes of one scope: ids are fixed against Kuzu plus the tail before an append."""
        with self._lock:
            return self._scope_locks.setdefault(scope, threading.Lock())

    def get(self, scope: Scope, *, create: bool) -> ScopeLog | None:
        """The scope's open log; opened (and replayed) if its file exists or ``create``; else ``None``."""
        with self._lock:
            found = self._open.get(scope)
            if found is not None:
                self._open.move_to_end(scope)
                return found
            if (
                self._closed
            ):  # close flushed everything: reads find it in Kuzu; writes must not start a flusher
                if create:
                    raise RuntimeError("this Memory is closed: open it again to write")
                return None
        if not create and not self.path(scope).exists():
            return None
        with self._lock:
            opening = self._opening.setdefault(scope, threading.Lock())
        with opening:
            with self._lock:
                found = self._open.get(scope)
                if found is not None:
                    return found
            to_scope = ApplyToScope(self._pool, scope)
            opened = ScopeLog(
                self.path(scope),
                dim=self._dim,
                apply=to_scope,
                checkpoint=to_scope.checkpoint,
                checkpoint_age_s=max(1.0, 2 * self._max_age_s),  # about one checkpoint per two batches
                name=str(scope),
                batch_entries=self._batch_entries,
                max_age_s=self._max_age_s,
            )
            with self._lock:
                self._open[scope] = opened
                evicted = self._evict()
        for old in evicted:
            old.close()
        return opened

    def _evict(self) -> list[ScopeLog]:
        """Least recently used logs beyond capacity (caller holds ``_lock``; the caller closes them)."""
        out = []
        while len(self._open) > self._capacity:
            _, old = self._open.popitem(last=False)
            out.append(old)
        return out

    def append(self, scope: Scope, entry: WriteEntry) -> WriteEntry:
        log = self.get(scope, create=True)
        assert log is not None
        return log.append(entry)

    def snapshot(self, scope: Scope) -> TailSnapshot | None:
        """The scope's unflushed rounds, or ``None`` when it has no log."""
        log = self.get(scope, create=False)
        return log.tail.snapshot() if log is not None else None

    def flush(self, scope: Scope) -> None:
        """Move the scope's pending writes into Kuzu now (the caller must not hold the database's write lock)."""
        log = self.get(scope, create=False)
        if log is not None:
            log.flush()

    def flush_all(self) -> None:
        """Flush every open log (a log that is not open has nothing a flusher could have missed: opening it
        replays it)."""
        with self._lock:
            logs = list(self._open.values())
        for log in logs:
            log.flush()

    def drop(self, scope: Scope) -> None:
        """Close the scope's log without flushing and delete its files (the scope is being erased)."""
        with self.scope_lock(scope), self._lock:
            log = self._open.pop(scope, None)
        if log is not None:
            log.close(flush=False)
        path = self.path(scope)
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def close(self) -> None:
        """Flush and close every open log (pending writes reach Kuzu)."""
        with self._lock:
            logs = list(self._open.values())
            self._open.clear()
            self._closed = True
        errors: list[BaseException] = []
        for log in logs:
            try:
                log.close()
            except Exception as e:  # close the others; the log keeps what did not flush, for the next open
                errors.append(e)
        if errors:
            raise errors[0]


class ApplyToScope:
    """A flusher's ``apply``: one batch of entries into the scope's Kuzu database, in one transaction."""

    def __init__(self, pool: DatabasePool, scope: Scope) -> None:
        self._pool = pool
        self._scope = scope

    def __call__(self, entries: Sequence[WriteEntry]) -> None:
        short = self._pool.no_room_for(self._scope)
        if short is not None:  # the last try failed for lack of room and there is none yet: do not touch Kuzu
            raise StorageFull(
                f"scope {self._scope}: the store has no room for the write log's writes yet: {short}; they stay in "
                "the log"
            )
        with self._pool.acquire(self._scope) as db:
            apply_entries(
                db, entries, durable=False
            )  # the flusher keeps them in the log until ``checkpoint``

    def checkpoint(self) -> None:
        """Make what the batches applied durable in Kuzu (then the flusher deletes them from the log)."""
        with self._pool.acquire(self._scope) as db:
            db.checkpoint()
