"""The write logs of a store root: one ``store.wal.ScopeLog`` per scope that has been written to, opened on demand.

Why a registry: a small write (a chat turn) is acknowledged once it is in the scope's durable log and searchable
from the log's in-memory tail; the scope's flusher moves it into Kuzu in batches (``docs/architecture.md``, "Writes
in a live service"). Something must own those logs for the life of a ``Memory``: open a scope's log when the scope
is first written or read (opening replays what a crash left), flush before reads that only Kuzu can answer
(listing sessions, export, extraction), delete a log with its scope, and flush every log on close.

Open logs are bounded (each has a flusher thread): past ``capacity`` the least recently used one is flushed and
closed; its file stays, and the next access opens it again, unless the close left it empty and the scope has a
Kuzu database: then it is deleted, and the scope's next write makes a new one (``_close``).

Small scopes live in their log. Kuzu 0.11.3 spends ~1 MB on the first row of every node table (its primary-key
index), so a user who said one word cost 4.3 MB in Kuzu against 24 KB in the log (docs/architecture.md, "Small
scopes live in their write log"). A scope without a Kuzu database whose log holds fewer than ``resident_rounds`` rounds is *resident*:
its flusher holds the entries (no batch by age, none at close or eviction), reads go through ``reading`` (an empty
database from ``DatabasePool.empty`` plus the tail, which holds everything) and the raw-history reads through
``resident_sessions``. It moves into Kuzu, for good, when its log reaches ``resident_rounds`` rounds, when a bulk
write arrives, or when anything that writes the graph (extraction, facts, import, erase) flushes it. The log holds
nothing but acknowledged writes that have not reached Kuzu yet, as before; they only wait longer.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from graphrecall.config import FLUSH_MAX_AGE_S, RESIDENT_ROUNDS, default_flush_concurrency
from graphrecall.embed.spec import spec_of
from graphrecall.errors import EmbedderMismatch, StorageFull
from graphrecall.models import Scope, Session
from graphrecall.store import proclock
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.pool import DatabasePool
from graphrecall.store.wal import ScopeLog, TailIndex, TailSnapshot, WriteEntry, WriteLog, log_path
from graphrecall.store.wal.apply import apply_entries
from graphrecall.store.wal.flusher import BATCH_ENTRIES
from graphrecall.store.wal.log import LOG_SUFFIX

T = TypeVar("T")
_log = logging.getLogger(__name__)


class ScopeLogs:
    def __init__(
        self,
        pool: DatabasePool,
        dim: int,
        *,
        capacity: int | None = None,
        batch_entries: int = BATCH_ENTRIES,
        max_age_s: float = FLUSH_MAX_AGE_S,
        resident_rounds: int = RESIDENT_ROUNDS,
        flush_slots: int | None = None,
    ) -> None:
        """``capacity``: open logs at most (default: twice the pool's databases, since a scope that lives in its log
        has a log and no database). ``resident_rounds``: a scope with no Kuzu database stays in its log below this
        many rounds (0: every scope is flushed into Kuzu as its writes come). ``flush_slots``: how many scopes'
        flushers write to Kuzu in the background at once (``Flusher``'s ``slots``; default: half the cores). The
        defaults are ``Settings``' (``graphrecall.config``)."""
        self._pool = pool
        self.resident_rounds = max(0, resident_rounds)
        self._dim = dim
        self._capacity = max(1, capacity if capacity is not None else 2 * pool.capacity)
        self._batch_entries = batch_entries
        self._max_age_s = max_age_s
        self._flush_slots = threading.BoundedSemaphore(
            max(1, flush_slots if flush_slots is not None else default_flush_concurrency())
        )
        self._open: OrderedDict[Scope, ScopeLog] = OrderedDict()
        self._lock = threading.Lock()
        self._changed = threading.Condition(
            self._lock
        )  # notified when a scope's use ends or its log is closed
        self._scope_locks: dict[Scope, threading.Lock] = {}  # writes of a scope, one at a time
        self._opening: dict[Scope, threading.Lock] = {}  # one open of a scope's log at a time
        # Eviction closes only logs nobody uses: a write (from planning to append) and a flush pin their scope's log
        # (``_pinned``). An evicted log is in ``_closing`` until its close (a flush) is done; opening that scope
        # again waits for it, so a scope never has two open logs (two tails, two flushers).
        self._users: dict[Scope, int] = {}
        self._closing: dict[Scope, ScopeLog] = {}
        self._closed = False

    def path(self, scope: Scope) -> Path:
        return log_path(self._pool.root, scope)

    def scope_lock(self, scope: Scope) -> threading.Lock:
        """Serializes the writes of one scope: ids are fixed against Kuzu plus the tail before an append."""
        with self._lock:
            return self._scope_locks.setdefault(scope, threading.Lock())

    def get(self, scope: Scope, *, create: bool) -> ScopeLog | None:
        """The scope's open log; opened (and replayed) if its file exists or ``create``; else ``None``. A caller
        that uses the log itself (appends, flushes) rather than a snapshot of its tail holds ``_pinned`` around
        the use, so that eviction does not close it under the caller."""
        with self._lock:
            self._changed.wait_for(lambda: scope not in self._closing)
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
                self._changed.wait_for(lambda: scope not in self._closing)
                found = self._open.get(scope)
                if found is not None:
                    return found
            to_scope = ApplyToScope(self._pool, scope)
            path = self.path(scope)
            self._lock_log(scope)
            try:
                opened = ScopeLog(
                    path,
                    dim=self._dim,
                    apply=to_scope,
                    checkpoint=to_scope.checkpoint,
                    name=str(scope),
                    hold=lambda tail: self._holds(scope, tail),
                    check=self._check_embedder,
                    batch_entries=self._batch_entries,
                    max_age_s=self._max_age_s,
                    slots=self._flush_slots,
                )
            except BaseException:
                proclock.release(path)
                raise
            with self._lock:
                self._open[scope] = opened
                evicted = self._evict(keep=scope)  # not the log this caller is about to use
        self._close_evicted(evicted)
        return opened

    @contextlib.contextmanager
    def _pinned(self, scope: Scope) -> Iterator[None]:
        """Keep the scope's log (open now or opened inside) from being evicted for the body of a ``with``."""
        with self._lock:
            self._users[scope] = self._users.get(scope, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._users[scope] - 1
                if left:
                    self._users[scope] = left
                else:
                    del self._users[scope]
                self._changed.notify_all()
                evicted = self._evict()  # a log kept past capacity while it was in use
            self._close_evicted(evicted)

    def _lock_log(self, scope: Scope) -> None:
        """This process's hold on the scope's log (``store.proclock``); ``StoreBusy`` when another process has it."""
        path = self.path(scope)
        proclock.acquire(path, f"scope {scope}'s write log {path}")

    def _check_embedder(self, wlog: WriteLog) -> None:
        """Refuse a log whose vectors another embedder made (``EmbedderMismatch``, as Kuzu's ``Meta`` check does
        for a database); a log that names none is claimed for this one."""
        mine = json.dumps({"embedder_id": self._pool.embedder_id, "dim": self._dim}, sort_keys=True)
        stored = wlog.claim("embedder", mine)
        if stored is None:
            return
        theirs = json.loads(stored)
        stored_id, stored_dim = theirs.get("embedder_id"), theirs.get("dim")
        raise EmbedderMismatch.of_store(
            "write log",
            Path(wlog.path),
            stored=(stored_id, stored_dim),
            wanted=(self._pool.embedder_id, self._dim),
            specs=(spec_of(stored_id) if stored_id else None, spec_of(self._pool.embedder_id)),
        )

    def _holds(self, scope: Scope, tail: TailIndex) -> bool:
        """The flusher's ``hold``: the scope has no Kuzu database and its log is still small."""
        return len(tail) < self.resident_rounds and not self._pool.exists(scope)

    # -- scopes that live in their log -------------------------------------------------------------------------
    def has_database(self, scope: Scope) -> bool:
        return self._pool.exists(scope)

    @contextlib.contextmanager
    def database(self, scope: Scope) -> Iterator[ScopeDatabase]:
        """The scope's own database, created if need be (a bulk write into a scope that lived in its log)."""
        with self._pool.acquire(scope) as db:
            yield db

    def stored(self, scope: Scope) -> bool:
        """Whether the scope has anything: a Kuzu database or a write log."""
        return self._pool.exists(scope) or self.path(scope).exists()

    def resident(self, scope: Scope) -> bool:
        """Whether the scope lives in its write log alone (no Kuzu database yet)."""
        return not self._pool.exists(scope) and self.path(scope).exists()

    def scopes(self) -> list[Scope]:
        """Every scope under the root: those with a Kuzu database and those that live in their log."""
        found = set(self._pool.scopes())
        root = self._pool.root
        if root.exists():
            for org in (p for p in root.iterdir() if p.is_dir()):
                for f in org.glob(f"*{LOG_SUFFIX}"):
                    with contextlib.suppress(ValueError):
                        found.add(Scope(org_id=org.name, user_id=f.name[: -len(LOG_SUFFIX)]))
        return sorted(found, key=lambda x: (x.org_id, x.user_id))

    @contextlib.contextmanager
    def reading(self, scope: Scope) -> Iterator[ScopeDatabase]:
        """The database a read of ``scope`` goes through: its own, or for a scope that lives in its log the
        pool's empty one (the caller merges the log's tail, taken *before* this, as for any scope); ``NotFound``
        for a scope with neither. A scope that moves into Kuzu meanwhile is still read whole: its rows leave the
        tail only after its database exists."""
        if self._pool.exists(scope) or not self.path(scope).exists():
            with self._pool.acquire(scope, create=False) as db:
                yield db
            return
        with self._pool.empty() as db:
            yield db

    @contextlib.contextmanager
    def writing(self, scope: Scope) -> Iterator[ScopeDatabase]:
        """The database a write of ``scope`` is planned against (the caller holds ``scope_lock``): its own, created
        if need be, or the pool's empty one for a scope that lives or may start in its log. A write planned
        against the empty one must check ``resident`` again after reading the tail (``Writer``). The scope's log
        stays open for the body: the write reads its tail, then appends to it."""
        with self._pinned(scope):
            if self.resident_rounds and not self._pool.exists(scope):
                with self._pool.empty() as db:
                    yield db
                return
            with self._pool.acquire(scope) as db:
                yield db

    def resident_sessions(self, scope: Scope) -> list[Session] | None:
        """Every session of a scope that lives in its log, with its messages, oldest first (from the tail);
        ``None`` when the scope has a Kuzu database (read it there, after a flush)."""
        return self._read_resident(scope, _sessions_of)

    def resident_counts(self, scope: Scope) -> dict[str, int] | None:
        """Sessions, messages and rounds of a scope that lives in its log; ``None`` when it has a database."""
        return self._read_resident(
            scope,
            lambda tail: {
                "Session": len(tail.sessions()),
                "Message": len(tail.message_ids()),
                "Round": len(tail),
            },
        )

    def _read_resident(self, scope: Scope, read: Callable[[TailIndex], T]) -> T | None:
        """``read`` the tail of a scope that lives in its log; ``None`` when it has a database, or got one while
        this read (its tail may have been trimmed under the read)."""
        if not self.resident(scope):
            return None
        tail = self._tail(scope)
        if tail is None:
            return None
        out = read(tail)
        return out if self.resident(scope) else None

    def _evict(self, keep: Scope | None = None) -> list[tuple[Scope, ScopeLog]]:
        """Least recently used logs beyond capacity that nobody uses (nor ``keep``), moved to ``_closing`` (caller
        holds ``_lock``; the caller closes them with ``_close_evicted``)."""
        out = []
        for scope in list(self._open):
            if len(self._open) <= self._capacity:
                break
            if self._users.get(scope) or scope == keep:
                continue
            old = self._open.pop(scope)
            self._closing[scope] = old
            out.append((scope, old))
        return out

    def _close_evicted(self, evicted: Sequence[tuple[Scope, ScopeLog]]) -> None:
        """Close evicted logs (flushing them), then let waiting openers of those scopes in. A close that fails
        leaves its entries in the log file, for the next open to replay."""
        for scope, old in evicted:
            try:
                _close(old, in_kuzu=functools.partial(self._pool.exists, scope))
            except Exception:
                _log.exception(
                    "closing the evicted write log of %s failed; its entries stay in the file", scope
                )
            finally:
                with self._lock:
                    del self._closing[scope]
                    self._changed.notify_all()

    def append(self, scope: Scope, entry: WriteEntry) -> WriteEntry:
        with self._pinned(scope):
            found = self.get(scope, create=True)
            assert found is not None
            return found.append(entry)

    def snapshot(self, scope: Scope) -> TailSnapshot | None:
        """The scope's unflushed rounds, or ``None`` when it has no log."""
        tail = self._tail(scope)
        return tail.snapshot() if tail is not None else None

    def _tail(self, scope: Scope) -> TailIndex | None:
        """The scope's tail: its open log's, or after ``close`` (which leaves a resident scope in its log) one
        read from the log file for this call; ``None`` when it has no log."""
        found = self.get(scope, create=False)
        if found is not None:
            return found.tail
        path = self.path(scope)
        if not self._closed or not path.exists():
            return None
        self._lock_log(scope)
        try:
            with WriteLog(path) as wlog:
                self._check_embedder(wlog)
                return TailIndex(self._dim, wlog.pending())
        finally:
            proclock.release(path)

    def flush(self, scope: Scope) -> None:
        """Move the scope's pending writes into Kuzu now (the caller must not hold the database's write lock)."""
        with self._pinned(scope):
            found = self.get(scope, create=False)
            if found is not None:
                found.flush()

    def flush_all(self) -> None:
        """Flush every open log (a log that is not open has nothing a flusher could have missed: opening it
        replays it)."""
        with self._lock:
            scopes = list(self._open)
        for scope in scopes:
            self.flush(scope)

    def drop(self, scope: Scope) -> bool:
        """Close the scope's log without flushing and delete its files (the scope is being erased): once a flush
        of it in progress is done (writes are held off by ``scope_lock``). Returns whether it existed."""
        with self.scope_lock(scope), self._lock:
            self._changed.wait_for(lambda: not self._users.get(scope) and scope not in self._closing)
            found = self._open.pop(scope, None)
        if found is not None:
            _close(found, flush=False)
        path = self.path(scope)
        held = path.exists()
        _unlink_log(path)
        with contextlib.suppress(FileNotFoundError):
            proclock.lock_path(path).unlink()
        return held

    def close(self) -> None:
        """Flush and close every open log (pending writes reach Kuzu, but for scopes that live in their log)."""
        with self._lock:
            logs = list(self._open.items())
            self._open.clear()
            self._closed = True
        errors: list[BaseException] = []
        for scope, log in logs:
            try:
                _close(log, in_kuzu=functools.partial(self._pool.exists, scope))
            except Exception as e:  # close the others; the log keeps what did not flush, for the next open
                errors.append(e)
        if errors:
            raise errors[0]


def _sessions_of(tail: TailIndex) -> list[Session]:
    """The tail's sessions with their messages, oldest first."""
    out = [s.to_session(tail.messages(s.id)) for s in tail.sessions()]
    return sorted(out, key=lambda x: (x.started_at, x.id))


def _close(log: ScopeLog, *, flush: bool = True, in_kuzu: Callable[[], bool] | None = None) -> None:
    """Close a scope's log, then let go of its process lock (``store.proclock``).

    ``in_kuzu``: asked once the log is closed (its flush may just have made the scope's database); when it says the
    scope has a database and the close left the log without an entry (every one flushed into Kuzu and
    checkpointed), the log's files are deleted while the lock is still held, and the scope's next write makes a
    new log. Why: an empty log is still six SQLite pages (24 KB), 20% of what a small user costs after maintenance
    (docs/benchmarks.md, "What one more user costs"). A sequence number of a deleted log can come again in the new
    file, which is safe because nothing outlives the log that could remember one: a flusher counts only the
    entries of the file it was opened with, and it is closed here."""
    try:
        log.close(flush=flush)
        if flush and in_kuzu is not None and log.log.pending_count == 0 and in_kuzu():
            _unlink_log(log.log.path)
    finally:
        proclock.release(log.log.path)


def _unlink_log(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


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
