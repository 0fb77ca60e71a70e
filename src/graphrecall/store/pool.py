"""An LRU pool of open scope databases.

Each open ``kuzu.Database`` reserves address space (``max_db_size``) and a buffer pool, so a process cannot keep
every tenant open: the pool keeps at most ``capacity`` idle databases open and closes the least recently used.
A database in use by a request is never closed under it: the pool may briefly exceed its capacity instead, and
erasing a scope waits until its last user has let go.

A database on which an operation failed with a Kuzu I/O error (a full disk, a file-size limit) is never used again,
and never closed. Kuzu 0.11.3 leaves it broken in memory (a retried write failed on duplicated primary keys, then a
write-write conflict, then crashed the process), and closing it either aborts the process (when the failed
commit's write-ahead log still cannot be written) or writes the failed commit into the files (measured: the
Session primary-key index then held keys of rows that did not exist, so those sessions could never be stored).
So once its last user lets go it leaves the pool unclosed (``_abandon``), its write-ahead log, which holds only
the failed commit since every commit checkpoints, is moved aside (kept, like ``recovery.py`` does with a torn one;
replaying it in this process crashed it), and the next user opens a fresh database on the same files, at the last
good commit (Kuzu's file lock is per process, so a process may open a database twice): reads go on. After a failure
for lack of room, ``no_room_for`` tells the write log's flusher to leave Kuzu alone until there is room again, so
that a full disk does not leave one abandoned database per retry. What the failed commit held is still in the write
log, or was never acknowledged. A failure for lack of room is raised as ``StorageFull`` naming what is full
(``store/space.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from graphrecall.config import BUFFER_POOL_BYTES, POOL_SIZE
from graphrecall.errors import NotFound, StorageFull, StoreBusy
from graphrecall.index import index_dir
from graphrecall.models import Scope
from graphrecall.store.database import DEFAULT_MAX_DB_SIZE, ScopeDatabase
from graphrecall.store.recovery import wal_path
from graphrecall.store.space import is_io_failure, no_room, short_of_room
from graphrecall.store.swap import finish as finish_swap

log = logging.getLogger(__name__)

# How long erasing a scope waits for the requests that hold its database before it gives up.
DROP_WAIT_SECONDS = 30.0
# Room a scope's store needs before it is written again after a write failed for lack of room: without it the next
# write would fail the same way (and leave one more database behind).
WRITE_ROOM_BYTES = 1 << 20
# Databases left broken by a failed write (``DatabasePool._abandon``): never closed, never freed.
_ABANDONED: list[ScopeDatabase] = []


class DatabasePool:
    def __init__(
        self,
        root: Path,
        *,
        embedder_id: str,
        dim: int,
        capacity: int = POOL_SIZE,
        buffer_pool_size: int = BUFFER_POOL_BYTES,
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
        self._broken: weakref.WeakSet[ScopeDatabase] = weakref.WeakSet()  # to abandon once idle
        self._out_of_room: set[Scope] = set()  # scopes whose store failed to write for lack of room
        self._empty: ScopeDatabase | None = None
        self.opens = 0
        finish_swap(root)  # a scope's swap that a killed ``graphrecall reembed`` left half done (store.swap)

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
    def empty(self) -> Iterator[ScopeDatabase]:
        """A database with this pool's schema and embedder and no rows, that refuses writes: what a scope that
        lives in its write log (``store.logs``) is read through, so that every reader merges the log's tail with
        "Kuzu's" lists as usual, with nothing on the Kuzu side.

        Why a real database and not ``None``: every read path (the retriever's lists, the graph candidates, the
        timeline) takes a database; an empty one gives each of them the right answer, nothing, without a second
        code path. It lives in a temporary directory of this process (Kuzu allows one process per file), is
        created on first use (~0.1-0.3 s) and removed by ``close``."""
        with self._lock:
            if self._empty is None or self._empty.closed:
                where = Path(tempfile.mkdtemp(prefix="graphrecall-empty-"))
                self._empty = ScopeDatabase(
                    where / "empty.kuzu",
                    embedder_id=self.embedder_id,
                    dim=self.dim,
                    buffer_pool_size=16 << 20,
                    max_db_size=self._max,
                )
                self._empty.placeholder = True
                weakref.finalize(self._empty, shutil.rmtree, where, True)  # also at exit, if never closed
            db = self._empty
        yield db

    @contextlib.contextmanager
    def acquire(self, scope: Scope, *, create: bool = True) -> Iterator[ScopeDatabase]:
        """The scope's open database for the body of a ``with``. A Kuzu I/O error raised in the body retires the
        database (module docstring) and, when it was for lack of room, becomes ``StorageFull``."""
        db = self._get(scope, create)
        failed: BaseException | None = None
        try:
            yield db
        except BaseException as e:
            if is_io_failure(e):
                failed = e
            raise
        finally:
            reason = None if failed is None else no_room(failed, self._files(scope))
            with self._lock:
                db.in_use -= 1
                if failed is not None and db not in self._broken:
                    self._broken.add(db)
                    if reason is not None:
                        self._out_of_room.add(scope)
                    log.warning(
                        "database %s: an operation failed (%s); it is not used again", db.path, failed
                    )
                self._retire(scope, db)
                self._released.notify_all()
                self._evict()
            if failed is not None and reason is not None:
                raise StorageFull(f"scope {scope}: the store has no room for the write: {reason}") from failed

    def _files(self, scope: Scope) -> list[Path]:
        path = self.path_for(scope)
        return [path, wal_path(path)]

    def _retire(self, scope: Scope, db: ScopeDatabase) -> None:
        """Take a broken database out of the pool once nobody uses it (caller holds ``_lock``)."""
        if db in self._broken and db.in_use == 0 and self._open.get(scope) is db:
            del self._open[scope]
            self._abandon(db)

    def no_room_for(self, scope: Scope) -> str | None:
        """Why ``scope``'s store should not be written yet: a write into it failed for lack of room and there is
        still less than ``WRITE_ROOM_BYTES`` (the free space, the file-size limit); None when it may be written."""
        with self._lock:
            if scope not in self._out_of_room:
                return None
            short = short_of_room(self.path_for(scope), WRITE_ROOM_BYTES)
            if short is None:
                self._out_of_room.discard(scope)
            return short

    def _await_broken(self, scope: Scope) -> None:
        """Before handing out ``scope``'s database: wait until a broken one has left the pool, so that a fresh one
        is opened. Caller holds ``_lock``."""
        db = self._open.get(scope)

        def gone() -> bool:
            return self._open.get(scope) is not db

        if db is not None and db in self._broken and not self._released.wait_for(gone, DROP_WAIT_SECONDS):
            raise StoreBusy(
                f"scope {scope}: its database is reopened after a failed write, and is still in use after "
                f"{DROP_WAIT_SECONDS:g} s"
            )

    def _dispose(self, scope: Scope, db: ScopeDatabase) -> None:
        """Close a database that leaves the pool, unless it is broken (then it is abandoned)."""
        if db in self._broken:
            self._abandon(db)
        else:
            db.close()

    @staticmethod
    def _abandon(db: ScopeDatabase) -> None:
        """Keep a broken ``db`` alive, unclosed, until the process exits, and move its write-ahead log aside (module
        docstring: closing it aborts the process or writes the failed commit into the files). The garbage collector
        would close it, at the latest at exit, so it gets a reference that is never given back. Its memory stays
        taken: one database per failed write, and writes are retried with backoff and only once there is room."""
        _ABANDONED.append(db)
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(db))
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        for part in (wal_path(db.path), Path(str(db.path) + ".shadow")):
            if part.exists():
                aside = Path(f"{part}.failed-{stamp}")
                part.rename(aside)
                log.warning(
                    "database %s: set the failed commit's %s aside as %s", db.path, part.name, aside.name
                )

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
            if db.in_use == 0:
                del self._open[scope]
                self._dispose(scope, db)

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
                self._out_of_room.discard(scope)
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
                index_dir(path),
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
            empty, self._empty = self._empty, None
        if empty is not None:
            empty.close()
            shutil.rmtree(empty.path.parent, ignore_errors=True)
