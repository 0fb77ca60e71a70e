"""An LRU pool of open scope databases.

Each open ``kuzu.Database`` reserves address space (``max_db_size``) and a buffer pool, so a process cannot keep
every tenant open: the pool keeps at most ``capacity`` idle databases open and closes the least recently used.
A database in use by a request is never closed under it: the pool may briefly exceed its capacity instead, and
erasing a scope waits until its last user has let go.

A database on which an operation failed with a Kuzu I/O error (a full disk, a file-size limit) is closed as soon as
its last user lets go and there is room again, and opened afresh by the next user: Kuzu leaves such a database
unusable in memory (retries then fail on duplicated keys, and the process crashes), while reopening recovers it
from its files. Closing it writes what the failed commit left in its write-ahead log, and Kuzu aborts the process
when that write fails, so until there is room every use of that scope's database raises ``StorageFull`` (searches
of other scopes go on), and one still without room when the pool closes is left open until the process exits
(``_abandon``). A failure for lack of room is raised as ``StorageFull`` naming what is full (``store/space.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import shutil
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from graphrecall.errors import NotFound, StorageFull, StoreBusy
from graphrecall.models import Scope
from graphrecall.store.database import DEFAULT_BUFFER_POOL, DEFAULT_MAX_DB_SIZE, ScopeDatabase
from graphrecall.store.recovery import wal_path
from graphrecall.store.space import is_io_failure, no_room, short_of_room

log = logging.getLogger(__name__)

# How long erasing a scope waits for the requests that hold its database before it gives up.
DROP_WAIT_SECONDS = 30.0
# Room a database whose commit failed needs before it may be closed: closing writes what the failed commit left in
# its write-ahead log (541 and 786 bytes measured for batches of 12 and 17 turns), with a wide margin.
CLOSE_ROOM_BYTES = 64 << 10
# Databases that could not be closed for lack of room (``DatabasePool._abandon``): never freed.
_ABANDONED: list[ScopeDatabase] = []


class DatabasePool:
    def __init__(
        self,
        root: Path,
        *,
        embedder_id: str,
        dim: int,
        capacity: int = 16,
        buffer_pool_size: int = DEFAULT_BUFFER_POOL,
        max_db_size: int = DEFAULT_MAX_DB_SIZE,
    ) -> None:
        if capacity < 1:
            raise ValueError("pool capacity must be at least 1")
        self.root = root
        self.embedder_id = embedder_id
        self.dim = dim
        self.capacity = capacity
        self._bp = buffer_pool_size
        self._max = max_db_size
        self._open: OrderedDict[Scope, ScopeDatabase] = OrderedDict()
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)  # notified whenever a database is let go
        self._scope_locks: dict[Scope, threading.Lock] = {}
        self._broken: weakref.WeakSet[ScopeDatabase] = weakref.WeakSet()  # to close once idle, then reopen
        self.opens = 0

    def path_for(self, scope: Scope) -> Path:
        return self.root / scope.org_id / f"{scope.user_id}.kuzu"

    def exists(self, scope: Scope) -> bool:
        return self.path_for(scope).exists()

    def scopes(self) -> list[Scope]:
        """Every scope with a database under the root."""
        out = []
        if self.root.exists():
            for org in sorted(p for p in self.root.iterdir() if p.is_dir()):
                for f in sorted(org.glob("*.kuzu")):
                    with contextlib.suppress(ValueError):
                        out.append(Scope(org_id=org.name, user_id=f.name[: -len(".kuzu")]))
        return out

    @contextlib.contextmanager
    def acquire(self, scope: Scope, *, create: bool = True) -> Iterator[ScopeDatabase]:
        """The scope's open database for the body of a ``with``. A Kuzu I/O error raised in the body marks the
        database for reopening (module docstring) and, when it was for lack of room, becomes ``StorageFull``."""
        db = self._get(scope, create)
        failed: BaseException | None = None
        try:
            yield db
        except BaseException as e:
            if is_io_failure(e):
                failed = e
            raise
        finally:
            with self._lock:
                db.in_use -= 1
                if failed is not None and db not in self._broken:
                    self._broken.add(db)
                    log.warning(
                        "database %s: an operation failed (%s); it is reopened before its next use",
                        db.path,
                        failed,
                    )
                self._close_broken(scope, db)
                self._released.notify_all()
                self._evict()
            if failed is not None:
                reason = no_room(failed, self._files(scope))
                if reason is not None:
                    raise StorageFull(
                        f"scope {scope}: the store has no room for the write: {reason}"
                    ) from failed

    def _files(self, scope: Scope) -> list[Path]:
        path = self.path_for(scope)
        return [path, wal_path(path)]

    def _short_of_room(self, scope: Scope) -> str | None:
        """Why a broken database of ``scope`` may not be closed yet (``CLOSE_ROOM_BYTES``), or None."""
        return short_of_room(wal_path(self.path_for(scope)), CLOSE_ROOM_BYTES)

    def _close_broken(self, scope: Scope, db: ScopeDatabase) -> None:
        """Close a database marked broken once nobody uses it and there is room (caller holds ``_lock``)."""
        if (
            db in self._broken
            and db.in_use == 0
            and self._open.get(scope) is db
            and self._short_of_room(scope) is None
        ):
            del self._open[scope]
            db.close()

    def _await_broken(self, scope: Scope) -> None:
        """Before handing out ``scope``'s database: a broken one is closed first, by its last user or here, so
        that a fresh one is opened; while there is no room to close it, ``StorageFull`` (caller holds ``_lock``)."""
        db = self._open.get(scope)
        if db is None or db not in self._broken:
            return
        short = self._short_of_room(scope)
        if short is not None:
            raise StorageFull(
                f"scope {scope}: a write into its store failed for lack of room, and the store can be used again "
                f"only once there is room: {short}"
            )
        self._close_broken(scope, db)
        if not self._released.wait_for(lambda: self._open.get(scope) is not db, DROP_WAIT_SECONDS):
            raise StoreBusy(
                f"scope {scope}: its database is reopened after a failed write, and is still in use after "
                f"{DROP_WAIT_SECONDS:g} s"
            )

    def _dispose(self, scope: Scope, db: ScopeDatabase) -> None:
        """Close a database that leaves the pool, unless it is broken and there is no room to close it."""
        if db in self._broken and self._short_of_room(scope) is not None:
            self._abandon(db)
        else:
            db.close()

    @staticmethod
    def _abandon(db: ScopeDatabase) -> None:
        """Keep ``db`` open, and alive, until the process exits. Kuzu aborts the process when it closes a database
        whose failed commit it cannot write out (measured on a full tmpfs), and the garbage collector would close
        it at the latest at exit; the extra reference below means it never collects it. The operating system
        drops its file lock at exit, and its writes are in the write log, which replays them at the next open."""
        log.error(
            "database %s: not closed, there is no room for what its failed commit left in its write-ahead log; "
            "it stays open until the process exits (its writes are in the write log)",
            db.path,
        )
        _ABANDONED.append(db)
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(db))

    def _get(self, scope: Scope, create: bool) -> ScopeDatabase:
        with self._lock:
            self._await_broken(scope)
            db = self._open.get(scope)
            if db is not None:
                self._open.move_to_end(scope)
                db.in_use += 1
                return db
            scope_lock = self._scope_locks.setdefault(scope, threading.Lock())
        with scope_lock:
            with self._lock:
                self._await_broken(scope)
                db = self._open.get(scope)
                if db is not None:
                    db.in_use += 1
                    return db
            path = self.path_for(scope)
            if not create and not path.exists():
                raise NotFound(f"no memory stored for scope {scope}")
            try:
                db = ScopeDatabase(
                    path,
                    embedder_id=self.embedder_id,
                    dim=self.dim,
                    buffer_pool_size=self._bp,
                    max_db_size=self._max,
                )
            except RuntimeError as e:  # replaying its WAL (or creating it) needs room too
                reason = no_room(e, self._files(scope)) if is_io_failure(e) else None
                if reason is None:
                    raise
                raise StorageFull(f"scope {scope}: cannot open its store: {reason}") from e
            self.opens += 1
            with self._lock:
                db.in_use += 1
                self._open[scope] = db
                self._evict()
            return db

    def _evict(self) -> None:
        """Close least-recently-used idle databases beyond capacity (caller holds ``_lock``)."""
        if len(self._open) <= self.capacity:
            return
        for scope in list(self._open):
            if len(self._open) <= self.capacity:
                break
            db = self._open[scope]
            if db.in_use == 0 and not (db in self._broken and self._short_of_room(scope) is not None):
                del self._open[scope]
                db.close()

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def drop(self, scope: Scope, *, wait_seconds: float = DROP_WAIT_SECONDS) -> bool:
        """Close and delete a scope's database files. Returns whether anything existed.

        Requests already holding the database finish first (new ones wait for the drop, then see an empty
        scope); if they do not let go within ``wait_seconds`` the scope is left as it was and ``StoreBusy`` is
        raised. Never closes a database under a request."""
        with self._lock:
            scope_lock = self._scope_locks.setdefault(scope, threading.Lock())
        with scope_lock:
            with self._lock:
                db = self._open.pop(scope, None)  # new requests now queue on scope_lock
                if db is not None and not self._released.wait_for(lambda: db.in_use == 0, wait_seconds):
                    self._open[scope] = db
                    raise StoreBusy(
                        f"scope {scope} is still in use after {wait_seconds:g} s; nothing was erased"
                    )
            if db is not None:
                self._dispose(scope, db)
            path = self.path_for(scope)
            existed = False
            for p in (
                path,
                Path(str(path) + ".wal"),
                Path(str(path) + ".lock"),
                Path(str(path) + ".shadow"),
                Path(str(path) + ".fts-rebuild"),
            ):
                if p.is_dir():
                    shutil.rmtree(p)
                    existed = True
                elif p.exists():
                    p.unlink()
                    existed = True
            return existed

    def close(self) -> None:
        with self._lock:
            for scope, db in self._open.items():
                self._dispose(scope, db)
            self._open.clear()
