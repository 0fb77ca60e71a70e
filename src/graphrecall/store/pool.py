"""The open buckets of a store root and the views of the scopes in use: an LRU of each.

A scope's rows live in a bucket (``store.buckets``, ``store.database``): one ``kuzu.Database`` shared by many users,
so a process keeps a bucket open for all of them (its memory no longer grows per user) and a view per scope in use
(``ScopeDatabase``: the scope's derived indexes and known ids). The pool keeps at most ``capacity`` idle views and
``bucket_capacity`` idle buckets open and closes the least recently used; a view or bucket in use by a request is
never closed under it: the pool may briefly exceed its capacity instead, and erasing a scope waits until its last
user has let go.

A bucket that committed ``RECYCLE_AFTER_COMMITS`` writes since it was opened is closed, with its views, once
nobody uses it, and the next request opens it afresh: Kuzu keeps memory for what a database wrote until it is
closed, so a process that writes for many users would otherwise grow with them.

A store written before buckets (``<root>/<org>/<user>.kuzu``) is moved into its bucket when the scope is first
opened (``store.move.move_legacy``: one transaction, one log line, the old file deleted after).

A bucket on which an operation failed with a Kuzu I/O error (a full disk, a file-size limit) is never used again,
and never closed. Kuzu 0.11.3 leaves it broken in memory (a retried write failed on duplicated primary keys, then a
write-write conflict, then crashed the process), and closing it either aborts the process (when the failed
commit's write-ahead log still cannot be written) or writes the failed commit into the files (measured: the
Session primary-key index then held keys of rows that did not exist, so those sessions could never be stored).
So once its last user lets go it leaves the pool unclosed (``_abandon``) with every view of it, its write-ahead log,
which holds only the failed commit since every commit checkpoints, is moved aside (kept, like ``recovery.py`` does
with a torn one; replaying it in this process crashed it), and the next user opens a fresh database on the same
files, at the last good commit (Kuzu's file lock is per process, so a process may open a database twice): reads go
on. After a failure for lack of room, ``no_room_for`` tells the write log's flusher to leave Kuzu alone until there is
room again, so that a full disk does not leave one abandoned database per retry. What the failed commit held is
still in the write log, or was never acknowledged. A failure for lack of room is raised as ``StorageFull`` naming
what is full (``store/space.py``).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from graphrecall.config import BUCKETS_PER_ORG, BUFFER_POOL_BYTES, POOL_SIZE
from graphrecall.embed.spec import spec_of
from graphrecall.errors import EmbedderMismatch, NotFound, StorageFull, StoreBusy
from graphrecall.index import index_dir
from graphrecall.models import Scope
from graphrecall.store import buckets, freespace
from graphrecall.store.compact import Compacted, OnStep, compact
from graphrecall.store.database import (
    DEFAULT_MAX_DB_SIZE,
    BucketDatabase,
    Member,
    ScopeDatabase,
    keep_unclosed,
)
from graphrecall.store.legacy import LEGACY_SUFFIXES, legacy_path
from graphrecall.store.move import move_legacy
from graphrecall.store.recovery import wal_path
from graphrecall.store.space import is_io_failure, no_room, short_of_room
from graphrecall.store.swap import finish as finish_swap

log = logging.getLogger(__name__)

# How long erasing a scope waits for the requests that hold its database before it gives up.
DROP_WAIT_SECONDS = 30.0
# How long a request for a scope waits while its bucket is compacted (``DatabasePool.compact``) before ``StoreBusy``:
# a compaction copies ~20k rows/s, so this covers a bucket of ~2M rows.
COMPACT_WAIT_SECONDS = 120.0
# Room a scope's store needs before it is written again after a write failed for lack of room: without it the next
# write would fail the same way (and leave one more database behind).
WRITE_ROOM_BYTES = 1 << 20
RECYCLE_AFTER_COMMITS = 500
"""Commits after which an idle bucket is closed and reopened. Why: a ``kuzu.Database`` holds memory for what it has
written since it was opened, and gives it back only when closed (Kuzu 0.11.3, measured with heaptrack: a builder of
extracted users grew ~1 MB per user in Kuzu's own allocations, ~6 commits each, none of it left at exit; closed and
reopened every 50 users it stayed flat). At this bound a bucket holds at most ~85 MB of it; a reopen costs a cold
open (tens of ms) once per 500 writes."""
# The placeholder bucket's buffer pool (``DatabasePool.empty``): virtual memory, paid for only as pages are read. With
# 16 MiB, 3 of 60 opens of a newly created empty bucket failed their first read with "the buffer pool is full" (Kuzu
# 0.11.3, a bucket created in one ``Database`` and opened in another, as ``create_bucket`` does); 32 and 64 MiB: 0.
EMPTY_BUFFER_POOL = 64 << 20
# Buckets left broken by a failed write (``DatabasePool._abandon``): never closed, never freed.
_ABANDONED: list[BucketDatabase] = []


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
        buckets_per_org: int = BUCKETS_PER_ORG,
        bucket_capacity: int | None = None,
        recycle_after_commits: int = RECYCLE_AFTER_COMMITS,
    ) -> None:
        """``capacity``: idle scope views kept open; ``bucket_capacity`` (default: ``capacity``): idle buckets.
        ``buckets_per_org``: how many buckets an organisation gets when its first scope is stored (recorded in its
        manifest then; ``store.buckets``). ``recycle_after_commits``: a bucket that committed this many writes
        since it was opened is closed once nobody uses it, and opened afresh by the next request (module
        docstring)."""
        if recycle_after_commits < 1:
            raise ValueError("recycle_after_commits must be at least 1")
        if capacity < 1:
            raise ValueError("pool capacity must be at least 1")
        self.root = root
        self.embedder_id = embedder_id
        self.dim = dim
        self.capacity = capacity
        self.bucket_capacity = max(1, bucket_capacity if bucket_capacity is not None else capacity)
        self.buckets_per_org = buckets_per_org
        self.recycle_after_commits = recycle_after_commits
        self._bp = buffer_pool_size
        self._max = max_db_size
        self._open: OrderedDict[Scope, ScopeDatabase] = OrderedDict()
        self._buckets: OrderedDict[Path, BucketDatabase] = OrderedDict()
        self._lock = threading.Lock()
        self._released = threading.Condition(self._lock)  # notified whenever a database is let go
        self._scope_locks: dict[Scope, threading.Lock] = {}
        self._bucket_locks: dict[Path, threading.Lock] = {}
        self._broken: weakref.WeakSet[BucketDatabase] = weakref.WeakSet()  # to abandon once idle
        self._compacting: set[Path] = set()  # buckets being compacted: requests for their scopes wait
        self._out_of_room: set[Scope] = set()  # scopes whose store failed to write for lack of room
        self._manifests: dict[str, buckets.Manifest] = {}  # org -> this embedder's manifest, once it exists
        self._empty: ScopeDatabase | None = None
        self.opens = 0
        finish_swap(root)  # a scope's swap that a killed ``graphrecall reembed`` left half done (store.swap)

    # -- where scopes are ----------------------------------------------------------------------------------------
    def path_for(self, scope: Scope) -> Path:
        """``<root>/<org>/<user>.kuzu``: the name the scope's derived indexes (``.idx``) are kept under, and where a
        store written before buckets kept the scope's database (``store.legacy``)."""
        return legacy_path(self.root, scope.org_id, scope.user_id)

    def _manifest(self, org_id: str, *, create: bool) -> buckets.Manifest | None:
        """This embedder's manifest of the organisation (created with ``buckets_per_org`` when asked to)."""
        with self._lock:
            found = self._manifests.get(org_id)
        if found is not None:
            return found
        found = (
            buckets.ensure_manifest(self.root, org_id, self.embedder_id, self.dim, self.buckets_per_org)
            if create
            else buckets.manifest(self.root, org_id, self.embedder_id, self.dim)
        )
        if found is not None:  # a manifest never changes once written: keep it
            with self._lock:
                self._manifests[org_id] = found
        return found

    def bucket_path(self, scope: Scope, *, create: bool = False) -> Path | None:
        """The file of the bucket that holds (or would hold) the scope's rows; None when its organisation has no
        buckets for this embedder and ``create`` is false."""
        found = self._manifest(scope.org_id, create=create)
        return None if found is None else found.path_for(scope.user_id)

    def exists(self, scope: Scope) -> bool:
        """Whether the scope has rows in Kuzu: a member of its bucket (of any embedder), or a database of its own
        written before buckets. Asked on every read and write of a scope that lives in its log: a scope whose view is
        open answers from memory."""
        with self._lock:
            if scope in self._open:
                return True
        if self.path_for(scope).exists():
            return True
        return self._holder(scope) is not None

    def _holder(self, scope: Scope) -> buckets.Manifest | None:
        """The manifest of the embedder whose bucket holds the scope, or None."""
        for m in [self._manifest(scope.org_id, create=False), *self._foreign(scope.org_id)]:
            if m is None or not m.path_for(scope.user_id).exists():
                continue
            with self._using(m.path_for(scope.user_id), m) as bucket:
                if bucket.member(scope.user_id) is not None:
                    return m
        return None

    def _foreign(self, org_id: str) -> list[buckets.Manifest]:
        """The organisation's manifests of other embedders (a store may hold scopes written with several)."""
        return [
            m
            for m in buckets.manifests(self.root, org_id)
            if (m.embedder_id, m.dim) != (self.embedder_id, self.dim)
        ]

    def scopes(self) -> list[Scope]:
        """Every scope with rows in Kuzu under the root (of any embedder), and every database per scope not yet
        moved into its bucket."""
        out: set[Scope] = set()
        if self.root.exists():
            for org in sorted(p for p in self.root.iterdir() if p.is_dir()):
                for f in sorted(org.glob("*.kuzu")):
                    with contextlib.suppress(ValueError):
                        out.add(Scope(org_id=org.name, user_id=f.name[: -len(".kuzu")]))
                for m in buckets.manifests(self.root, org.name):
                    for path in m.existing():
                        with self._using(path, m) as bucket:
                            for user in bucket.members():
                                with contextlib.suppress(ValueError):
                                    out.add(Scope(org_id=org.name, user_id=user))
        return sorted(out, key=lambda s: (s.org_id, s.user_id))

    # -- buckets -----------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _using(self, path: Path, m: buckets.Manifest) -> Iterator[BucketDatabase]:
        """A bucket held open for the block (not a scope's view: the pool's own questions)."""
        bucket = self._bucket(path, m)
        try:
            yield bucket
        finally:
            self._let_go(bucket)

    def _bucket(self, path: Path, m: buckets.Manifest) -> BucketDatabase:
        """The open bucket at ``path`` (opened or created if need be), with one more use."""
        with self._lock:
            self._await_compaction(path)
            self._await_broken(path)
            found = self._buckets.get(path)
            if found is not None:
                self._buckets.move_to_end(path)
                found.in_use += 1
                return found
            lock = self._bucket_locks.setdefault(path, threading.Lock())
        with lock:
            with self._lock:
                self._await_compaction(path)
                self._await_broken(path)
                found = self._buckets.get(path)
                if found is not None:
                    found.in_use += 1
                    return found
            try:
                bucket = self._open_bucket(path, m)
                if bucket.recovered_wal is not None:
                    bucket = self._rewrite_recovered(bucket, m)
            except RuntimeError as e:  # replaying its WAL (or creating it) needs room too
                reason = no_room(e, [path, wal_path(path)]) if is_io_failure(e) else None
                if reason is None:
                    raise
                raise StorageFull(f"bucket {path}: cannot open it: {reason}") from e
            with self._lock:
                bucket.in_use += 1
                self._buckets[path] = bucket
                self._evict()
            return bucket

    def _open_bucket(self, path: Path, m: buckets.Manifest) -> BucketDatabase:
        return BucketDatabase(
            path, embedder_id=m.embedder_id, dim=m.dim, buffer_pool_size=self._bp, max_db_size=self._max
        )

    def _rewrite_recovered(self, bucket: BucketDatabase, m: buckets.Manifest) -> BucketDatabase:
        """A bucket whose write-ahead log recovery set aside (``store.recovery``), rewritten from its rows before
        anyone uses it; the bucket reopened on the new file.

        Why: when the previous process died inside a checkpoint, the file can hold a primary-key index that already
        has keys of that checkpoint's rows while the rows are not there (measured on a fleet bucket killed during
        extraction: ``Message`` had the key of one message of the scope being written and none of its rows). Every
        later insert of that key fails ("duplicated primary key"), so the write log could never replay that
        scope's entry and the scope was stuck. A rewrite (``store.compact``: every row copied into a fresh file,
        counted on both sides) builds the indexes again from the rows. Without room for the copy the bucket opens
        as it is, with an error in the log: a maintenance pass compacts it later."""
        path = bucket.path
        short = short_of_room(path, path.stat().st_size + WRITE_ROOM_BYTES)
        if short is not None:
            log.error(
                "bucket %s: not rewritten after its recovery (%s); compact it when there is room", path, short
            )
            return bucket
        with self._lock:
            if path in self._compacting:  # a maintenance pass rewrites it already: leave it to that one
                return bucket
            self._compacting.add(path)  # ``compact`` must not start a second rewrite meanwhile
        try:
            done = compact(bucket)  # closes ``bucket``
        except Exception:
            log.exception("bucket %s: rewriting it after its recovery failed; it opens as it is", path)
        else:
            log.warning(
                "bucket %s: rewritten after its recovery (its primary-key indexes built again from its %d rows "
                "and %d edges) in %.2f s",
                path,
                done.rows,
                done.edges,
                done.seconds,
            )
        finally:
            with self._lock:
                self._compacting.discard(path)
                self._released.notify_all()
        return self._open_bucket(path, m)

    def _let_go(self, bucket: BucketDatabase) -> None:
        with self._lock:
            bucket.in_use -= 1
            self._retire(bucket)
            self._recycle(bucket)
            self._released.notify_all()
            self._evict()

    @contextlib.contextmanager
    def empty(self) -> Iterator[ScopeDatabase]:
        """A scope view with this pool's schema and embedder and no rows, that refuses writes: what a scope that
        lives in its write log (``store.logs``) is read through, so that every reader merges the log's tail with
        "Kuzu's" lists as usual, with nothing on the Kuzu side.

        Why a real database and not ``None``: every read path (the retriever's lists, the graph candidates, the
        timeline) takes a database; an empty one gives each of them the right answer, nothing, without a second
        code path. It lives in a temporary directory of this process (Kuzu allows one process per file), is
        created on first use (~0.1-0.3 s) and removed by ``close``."""
        with self._lock:
            if self._empty is None or self._empty.closed:
                where = Path(tempfile.mkdtemp(prefix="graphrecall-empty-"))
                bucket = BucketDatabase(
                    where / "empty.kuzu",
                    embedder_id=self.embedder_id,
                    dim=self.dim,
                    buffer_pool_size=EMPTY_BUFFER_POOL,
                    max_db_size=self._max,
                )
                bucket.placeholder = True
                # No such scope: every pattern from its Scope node finds nothing, every key lookup too.
                self._empty = ScopeDatabase(
                    bucket, ".empty", where / "empty.kuzu", Member(prefix=".empty:", created=True)
                )
                weakref.finalize(self._empty, shutil.rmtree, where, True)  # also at exit, if never closed
            db = self._empty
        yield db

    # -- scopes ------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def acquire(self, scope: Scope, *, create: bool = True) -> Iterator[ScopeDatabase]:
        """The scope's view of its bucket for the body of a ``with``. A Kuzu I/O error raised in the body retires
        the bucket (module docstring) and, when it was for lack of room, becomes ``StorageFull``."""
        db = self._get(scope, create)
        failed: BaseException | None = None
        try:
            yield db
        except BaseException as e:
            if is_io_failure(e):
                failed = e
            raise
        finally:
            bucket = db.bucket
            reason = None if failed is None else no_room(failed, [bucket.path, wal_path(bucket.path)])
            with self._lock:
                db.in_use -= 1
                bucket.in_use -= 1
                if failed is not None and bucket not in self._broken:
                    self._broken.add(bucket)
                    if reason is not None:
                        self._out_of_room.add(scope)
                    log.warning(
                        "bucket %s: an operation of %s failed (%s); it is not used again",
                        bucket.path,
                        scope,
                        failed,
                    )
                self._retire(bucket)
                self._recycle(bucket)
                self._released.notify_all()
                self._evict()
            if failed is not None and reason is not None:
                raise StorageFull(f"scope {scope}: the store has no room for the write: {reason}") from failed

    def _retire(self, bucket: BucketDatabase) -> None:
        """Take a broken bucket, and every view of it, out of the pool once nobody uses it (caller holds
        ``_lock``)."""
        if bucket not in self._broken or bucket.in_use != 0 or self._buckets.get(bucket.path) is not bucket:
            return
        del self._buckets[bucket.path]
        for scope in [s for s, v in self._open.items() if v.bucket is bucket]:
            self._open.pop(scope).close()
        self._abandon(bucket)

    def no_room_for(self, scope: Scope) -> str | None:
        """Why ``scope``'s store should not be written yet: a write into it failed for lack of room and there is
        still less than ``WRITE_ROOM_BYTES`` (the free space, the file-size limit); None when it may be written."""
        with self._lock:
            if scope not in self._out_of_room:
                return None
        where = self.bucket_path(scope) or self.path_for(scope)
        short = short_of_room(where, WRITE_ROOM_BYTES)
        if short is None:
            with self._lock:
                self._out_of_room.discard(scope)
        return short

    def _await_compaction(self, path: Path) -> None:
        """Before handing out the bucket at ``path``: wait while it is compacted (``compact``). Caller holds
        ``_lock``."""
        if path in self._compacting and not self._released.wait_for(
            lambda: path not in self._compacting, COMPACT_WAIT_SECONDS
        ):
            raise StoreBusy(
                f"bucket {path} is being compacted and was not done after {COMPACT_WAIT_SECONDS:g} s; retry later"
            )

    def _await_broken(self, path: Path) -> None:
        """Before handing out the bucket at ``path``: wait until a broken one has left the pool, so that a fresh
        one is opened. Caller holds ``_lock``."""
        bucket = self._buckets.get(path)

        def gone() -> bool:
            return self._buckets.get(path) is not bucket

        if (
            bucket is not None
            and bucket in self._broken
            and not self._released.wait_for(gone, DROP_WAIT_SECONDS)
        ):
            raise StoreBusy(
                f"bucket {path}: it is reopened after a failed write, and is still in use after "
                f"{DROP_WAIT_SECONDS:g} s"
            )

    def _recycle(self, bucket: BucketDatabase) -> None:
        """Close a bucket that was just let go if it wrote ``recycle_after_commits`` since it was opened, with its
        views, when nobody uses it and it is still the pool's, not being compacted or broken (caller holds
        ``_lock``): the next request opens it afresh, without the memory Kuzu held for those writes."""
        path = bucket.path
        if (
            bucket.commits < self.recycle_after_commits
            or bucket.in_use != 0
            or bucket in self._broken
            or path in self._compacting
            or self._buckets.get(path) is not bucket
        ):
            return
        views = [scope for scope, v in self._open.items() if v.bucket is bucket]
        if any(self._open[scope].in_use for scope in views):
            return
        for scope in views:
            self._open.pop(scope).close()
        del self._buckets[path]
        log.debug("bucket %s: closed after %d commits, to be opened afresh", path, bucket.commits)
        self._dispose(bucket)

    def _dispose(self, bucket: BucketDatabase) -> None:
        """Close a bucket that leaves the pool, unless it is broken (then it is abandoned)."""
        if bucket in self._broken:
            self._abandon(bucket)
        else:
            bucket.close()

    @staticmethod
    def _abandon(bucket: BucketDatabase) -> None:
        """Keep a broken bucket alive, unclosed, until the process exits (``database.keep_unclosed``; module
        docstring: closing it aborts the process or writes the failed commit into the files), and move its
        write-ahead log aside. Writes are retried with backoff and only once there is room."""
        _ABANDONED.append(bucket)
        keep_unclosed(bucket)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%f")
        for part in (wal_path(bucket.path), Path(str(bucket.path) + ".shadow")):
            if part.exists():
                aside = Path(f"{part}.failed-{stamp}")
                part.rename(aside)
                log.warning(
                    "bucket %s: set the failed commit's %s aside as %s", bucket.path, part.name, aside.name
                )

    def _get(self, scope: Scope, create: bool) -> ScopeDatabase:
        """The scope's view, with one more use (of it and of its bucket)."""
        with self._lock:
            db = self._open.get(scope)
            if db is not None and db.bucket not in self._broken and db.bucket.path not in self._compacting:
                self._open.move_to_end(scope)
                db.in_use += 1
                db.bucket.in_use += 1
                return db
            scope_lock = self._scope_locks.setdefault(scope, threading.Lock())
        with scope_lock:
            with self._lock:
                db = self._open.get(scope)
                if (
                    db is not None
                    and db.bucket not in self._broken
                    and db.bucket.path not in self._compacting
                ):
                    db.in_use += 1
                    db.bucket.in_use += 1
                    return db
            legacy = self.path_for(scope)
            moving = legacy.exists()
            m = self._manifest(scope.org_id, create=create or moving)
            if m is None:
                self._refuse(scope, create)
                raise NotFound(f"no memory stored for scope {scope}")
            path = m.path_for(scope.user_id)
            if not (create or moving or path.exists()):
                self._refuse(scope, create)
                raise NotFound(f"no memory stored for scope {scope}")
            bucket = self._bucket(path, m)  # waits while the bucket is compacted
            with self._lock:
                db = self._open.get(scope)
                if (
                    db is not None and db.bucket is bucket
                ):  # open before a compaction that gave up: still good
                    db.in_use += 1
                    return db
            try:
                if moving:
                    move_legacy(
                        bucket, scope.user_id, legacy, buffer_pool_size=self._bp, max_db_size=self._max
                    )
                member = bucket.member(scope.user_id)
                if member is None:
                    self._refuse(scope, create)
                    if not create:
                        raise NotFound(f"no memory stored for scope {scope}")
                    member = bucket.create_scope(scope.user_id)
                db = ScopeDatabase(bucket, scope.user_id, self.path_for(scope), member)
            except BaseException:
                self._let_go(bucket)
                raise
            self.opens += 1
            with self._lock:
                db.in_use += 1
                self._open[scope] = db
                self._evict()
            return db

    def _refuse(self, scope: Scope, create: bool) -> None:
        """``EmbedderMismatch`` when another embedder's bucket holds the scope (its vectors are another model's)."""
        for m in self._foreign(scope.org_id):
            path = m.path_for(scope.user_id)
            if not path.exists():
                continue
            with self._using(path, m) as bucket:
                held = bucket.member(scope.user_id) is not None
            if held:
                raise EmbedderMismatch.of_store(
                    "database",
                    self.path_for(scope),
                    stored=(m.embedder_id, m.dim),
                    wanted=(self.embedder_id, self.dim),
                    specs=(spec_of(m.embedder_id), spec_of(self.embedder_id)),
                )

    def _evict(self) -> None:
        """Close least-recently-used idle views, then idle buckets that no open view uses, beyond capacity (caller
        holds ``_lock``)."""
        if len(self._open) > self.capacity:
            for scope in list(self._open):
                if len(self._open) <= self.capacity:
                    break
                db = self._open[scope]
                if db.in_use == 0:
                    del self._open[scope]
                    db.close()
        if len(self._buckets) > self.bucket_capacity:
            viewed = {id(v.bucket) for v in self._open.values()}
            for path in list(self._buckets):
                if len(self._buckets) <= self.bucket_capacity:
                    break
                bucket = self._buckets[path]
                if bucket.in_use == 0 and id(bucket) not in viewed:
                    del self._buckets[path]
                    self._dispose(bucket)

    # -- compaction ----------------------------------------------------------------------------------------------
    def free_space(self, scope: Scope) -> tuple[Path, freespace.FreeSpace] | None:
        """The bucket of this embedder that holds (or would hold) the scope's rows and its free space
        (``store.freespace``); None when that bucket does not exist."""
        m = self._manifest(scope.org_id, create=False)
        path = None if m is None else m.path_for(scope.user_id)
        if m is None or path is None or not path.exists():
            return None
        with self._using(path, m) as bucket:
            return path, freespace.measure(bucket)

    def compact(
        self, path: Path, *, wait_seconds: float = DROP_WAIT_SECONDS, on_step: OnStep | None = None
    ) -> Compacted:
        """Rewrite the bucket at ``path`` into a fresh file (``store.compact``). Requests for its scopes wait
        meanwhile (``StoreBusy`` after ``COMPACT_WAIT_SECONDS``); those already holding it finish first, and if they
        do not let go within ``wait_seconds`` nothing is done and ``StoreBusy`` is raised. Its views are closed and
        reopened on the new file by the next request; their derived indexes stay as they are (same ids, same
        marks). ``StorageFull`` when the file system has no room for a second copy of the file."""
        m = buckets.read_manifest(path.parent)
        if m is None or not path.exists():
            raise NotFound(f"no bucket at {path}")
        short = short_of_room(path, path.stat().st_size + WRITE_ROOM_BYTES)
        if short is not None:
            raise StorageFull(f"bucket {path}: no room to rewrite it: {short}")
        with self._lock:
            if path in self._compacting:
                raise StoreBusy(f"bucket {path} is being compacted already")
            if any(b.path == path for b in _ABANDONED):  # its file lock is shared with a broken twin
                raise StoreBusy(
                    f"bucket {path} was reopened after a failed write; it is compacted after a restart"
                )
            self._compacting.add(path)
            opening = self._bucket_locks.setdefault(path, threading.Lock())
        try:
            # A request that began to open the bucket before ``_compacting`` had it finishes first (``_bucket``
            # opens under this lock), so the bucket is then in the pool and taken out here, never opened twice.
            with opening:
                bucket = self._take_out(path, wait_seconds)
                if bucket is None:
                    bucket = self._open_bucket(path, m)
            return compact(bucket, on_step=on_step)
        finally:
            with self._lock:
                self._compacting.discard(path)
                self._released.notify_all()

    def _take_out(self, path: Path, wait_seconds: float) -> BucketDatabase | None:
        """The open bucket at ``path`` out of the pool, once the requests holding it let go, with its views closed
        (None when it is not open). The caller has put ``path`` in ``_compacting``, so no request takes it again."""
        with self._lock:
            self._await_broken(path)
            found = self._buckets.get(path)

            def idle() -> bool:
                return found is None or self._buckets.get(path) is not found or found.in_use == 0

            if not self._released.wait_for(idle, wait_seconds):
                raise StoreBusy(
                    f"bucket {path} is still in use after {wait_seconds:g} s; it was not compacted"
                )
            for scope in [s for s, v in self._open.items() if v.bucket.path == path]:
                self._open.pop(scope).close()
            return self._buckets.pop(path, None)

    def open_count(self) -> int:
        """Scope views open."""
        with self._lock:
            return len(self._open)

    def bucket_count(self) -> int:
        """Buckets open."""
        with self._lock:
            return len(self._buckets)

    def drop(self, scope: Scope, *, wait_seconds: float = DROP_WAIT_SECONDS) -> bool:
        """Erase a scope entirely: every row it owns in its bucket (of any embedder), its derived indexes and a
        database of its own written before buckets. Returns whether anything existed.

        Requests already holding the scope's view finish first (new ones wait for the drop, then see an empty
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
                db.close()
            existed = False
            for m in buckets.manifests(self.root, scope.org_id):
                path = m.path_for(scope.user_id)
                if path.exists():
                    with self._using(path, m) as bucket:
                        existed = bucket.drop_scope(scope.user_id) or existed
            path = self.path_for(scope)
            for p in [Path(str(path).removesuffix(".kuzu") + s) for s in LEGACY_SUFFIXES] + [index_dir(path)]:
                if p.is_dir():
                    shutil.rmtree(p)
                    existed = True
                elif p.exists():
                    p.unlink()
                    existed = True
            return existed

    def close(self) -> None:
        with self._lock:
            for db in self._open.values():
                db.close()
            self._open.clear()
            for bucket in self._buckets.values():
                self._dispose(bucket)
            self._buckets.clear()
            empty, self._empty = self._empty, None
        if empty is not None:
            empty.close()
            empty.bucket.close()
            shutil.rmtree(empty.path.parent, ignore_errors=True)
