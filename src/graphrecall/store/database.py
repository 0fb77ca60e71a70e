"""Buckets: Kuzu databases that each hold many scopes, and ``ScopeDatabase``, one scope's view of its bucket, which
every store function reads and writes through.

Why buckets. Kuzu 0.11.3 spends ~1.05 MB on the first row of every node table (its primary-key index allocates all
256 partitions), whatever the row; a scope with extraction fills eight tables, so a database per scope cost 10-12 MB
per user before it held anything (docs/architecture.md, "Storage: buckets"). Many scopes share one database, so the
floor is paid once per bucket. A bucket is one ``kuzu.Database`` with Kuzu's one writer: every scope of a bucket
writes under its ``write_lock``, one transaction at a time; reads run in parallel on per-thread connections.

**The scope invariant.** A statement run through a ``ScopeDatabase`` sees only its scope's rows, because
1. every row of a scope table (``schema.SCOPE_TABLES``) has the primary key ``key`` = the scope's prefix (unique in the
   bucket, never reused) + its ``id``, written by ``WriteTxn.copy`` (the only insert of a scope row); a session,
   fact, event or entity is owned by its scope's ``Scope`` node through an ``OWNS`` edge written in the same
   statement, a message or round hangs from its session (``MSG_IN``, ``ROUND_IN``) and a passage from its round
   (``PASSAGE_OF``), edges written in the same transaction (``schema.ANCHORED``, ``schema.owned``);
2. every edge between rows is written by ``WriteTxn.copy`` with both ends keyed by the writing scope's prefix, so no
   edge joins two scopes;
3. every statement reaches rows only by ``key`` (``ScopeDatabase.key``: the prefix added in the store, never by the
   caller), or from the scope's ``Scope`` node bound first (``schema.MATCH_SCOPE``, ``schema.owned``), or along
   edges from rows reached so.
``ScopeDatabase.query`` and ``WriteTxn.execute`` bind ``$scope`` and refuse a statement that names neither ``$scope``
nor a ``key`` and any statement that looks a row up by ``id`` (``check_scoped``: a tripwire, not the proof; the
proof is ``tests/integration/test_bucket_isolation.py``). Ids returned to callers are the rows' own ``id``: the
prefix never leaves the store. A scope's rows are found from its ``Scope`` node in time that grows with the scope, not
with the bucket (``benchmarks/perf/bucket_layout.py``: a ``scope`` column in every row instead cost a scan of every
user's rows per lookup, which grew with the bucket).

Whole-scope erase (``BucketDatabase.drop_scope``) deletes every row reachable from the ``Scope`` node and then the
node, in one transaction. The derived indexes stay per scope (``<user>.kuzu.idx/``, ``store.derived``), so a search costs the
same whatever the bucket holds, and their marks live in the scope's ``Scope`` row.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util  # noqa: F401  (kuzu's pyarrow scan path needs importlib.util imported)
import logging
import os
import re
import shutil
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kuzu
import pyarrow.compute as pc

from graphrecall.config import BUFFER_POOL_BYTES
from graphrecall.errors import SchemaMismatch, StorageFull, StoreBusy
from graphrecall.index import IndexSpace, index_dir
from graphrecall.index.manifest import fsync_dir
from graphrecall.models import utcnow
from graphrecall.store import compact_swap, nodegroups, proclock, schema, statements
from graphrecall.store.derived import (
    INDEXED_TABLES,
    RETURN_MARKS,
    Change,
    DerivedIndexes,
    mark_params,
    marks_of,
    parse_marks,
    set_marks,
)
from graphrecall.store.known import KNOWN_TABLES, KnownIds
from graphrecall.store.recovery import recover, wal_path
from graphrecall.store.schema import (
    MATCH_SCOPE as MATCH_SCOPE,
)  # every store module scopes its patterns with these
from graphrecall.store.schema import owned as owned
from graphrecall.store.space import is_io_failure, no_room, short_of_room
from graphrecall.store.statements import execute

log = logging.getLogger(__name__)

DEFAULT_MAX_DB_SIZE = 1 << 36  # 64 GiB of address space per database, not memory
ERASE_ORDER = ("Passage", "Round", "Message", "Session", "Fact", "Event", "Entity")
CREATE_MAX_ROWS = 256
CREATE_CHUNK = 256  # rows per CREATE statement (``insert_rows``)  # inserts up to this many rows are CREATE statements (``WriteTxn.copy``)


class UnscopedQuery(RuntimeError):
    """A statement that could reach another scope's rows (``check_scoped``): a bug in the store."""


_BY_ID = re.compile(r"\{\s*id\s*:")
_BY_KEY = re.compile(r"\{\s*key\s*:")


def check_scoped(cypher: str) -> None:
    """The tripwire of the scope invariant (module docstring): a statement must name ``$scope`` or look rows up by
    ``key``, and never by ``id`` (``{id: ...}`` is a scan of every scope's rows)."""
    if "MATCH" not in cypher.upper():  # reads no row (``RETURN 1``, a catalog call)
        return
    if _BY_ID.search(cypher):
        raise UnscopedQuery(f"a row is looked up by id, not by key: {cypher}")
    if "$scope" not in cypher and not _BY_KEY.search(cypher):
        raise UnscopedQuery(f"the statement names neither $scope nor a key: {cypher}")


@dataclass(frozen=True)
class ChatNote:
    """What a write of chat alone (``WriteTxn.graph_writes`` false) added or replaced: the only things in it that
    could change what the graph's views read (``store.adjacency`` checks them against what it holds)."""

    writes: int  # the commit's number (``Generations.writes``)
    sessions: frozenset[str]  # sessions inserted (an event may name a session that was not stored)
    rounds_deleted: frozenset[str]  # rounds deleted (replaced, as the write log replays them)
    round_messages: frozenset[str]  # the messages of the rounds inserted


@dataclass
class Generations:
    """How far a scope's writes have gone in this process: what the in-memory views of its rows (``store.adjacency``,
    ``store.mentions``) compare with the generation they were read at, instead of asking Kuzu.

    ``writes`` counts the write transactions committed through ``ScopeDatabase.write()``; ``graph`` is the value
    ``writes`` had at the last one that wrote something other than chat (``WriteTxn.graph_writes``); ``notes`` are
    what each write of chat since then added or replaced (``ChatNote``), at most ``MAX_NOTE_IDS`` ids in all (past
    that, a write counts as a graph write: the views are read again, and the notes start over). Only one process
    holds a database (``store.proclock``), every write of a scope's rows goes through ``write()`` (a scope moved or
    copied into a bucket is a new ``Member``, so views of it start over), and the counters live on the bucket's
    ``Member``, which every view of the scope in this process shares."""

    MAX_NOTE_IDS = 200_000

    writes: int = 0
    graph: int = 0
    notes: tuple[ChatNote, ...] = ()  # replaced, never mutated: readers take it without a lock
    _note_ids: int = 0

    def committed(self, txn: WriteTxn) -> None:
        """Count a commit (the caller holds the bucket's write lock). ``writes`` moves last: a reader that reads it
        first (``store.adjacency``) then finds ``graph`` and ``notes`` at least as new as that count."""
        n = self.writes + 1
        note = txn.chat_note(n)
        size = len(note.sessions) + len(note.rounds_deleted) + len(note.round_messages)
        if txn.graph_writes or self._note_ids + size > self.MAX_NOTE_IDS:
            self.graph, self.notes, self._note_ids = n, (), 0
        elif size:
            self.notes, self._note_ids = (*self.notes, note), self._note_ids + size
        self.writes = n


@dataclass
class Member:
    """A scope of a bucket: the prefix of its rows' keys and its derived indexes' marks (its ``Scope`` row)."""

    prefix: str
    marks: dict[str, int] = field(default_factory=dict)
    created: bool = False  # created by this process just now: its derived indexes start empty
    generations: Generations = field(default_factory=Generations)


def _prefix(n: int) -> str:
    """The ``n``-th prefix of a bucket: base 36 and a colon (``0:``, ``1:``, ... ``z:``, ``10:``): a few bytes per
    row, and a colon never occurs in an id (``models.validate_identifier``), so prefixes cannot overlap."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out + ":"


class BucketDatabase:
    """One Kuzu database holding the scopes of one bucket (``store.buckets``), with its single writer."""

    def __init__(
        self,
        path: Path,
        *,
        embedder_id: str,
        dim: int,
        buffer_pool_size: int = BUFFER_POOL_BYTES,
        max_db_size: int = DEFAULT_MAX_DB_SIZE,
    ) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        compact_swap.finish(path)  # a compaction a killed process left: its rewrite in place, or thrown away
        self.recovered_wal = recover(path)
        if not path.exists():
            create_bucket(path, embedder_id, dim)
        self._db = _open_kuzu(path, buffer_pool_size, max_db_size)
        if _half_created(self._db):
            self._db.close()
            log.warning(
                "bucket %s was left half created by a killed process (tables without the bucket row, no rows): "
                "created again",
                path,
            )
            _remove(path)
            create_bucket(path, embedder_id, dim)
            self._db = _open_kuzu(path, buffer_pool_size, max_db_size)
        self.write_lock = threading.RLock()
        self.txn: WriteTxn | None = (
            None  # the open write transaction (a nested write() of its scope joins it)
        )
        self.gate = _ReadGate()
        self.writer = kuzu.Connection(self._db)
        self._local = threading.local()
        self._conns: list[kuzu.Connection] = [self.writer]
        self._conns_lock = threading.Lock()
        self.in_use = 0  # requests holding a view of it (``DatabasePool``)
        self.closed = False
        self.placeholder = False  # ``DatabasePool.empty``: stands for scopes with no rows; never written
        self.embedder_id, self.dim = embedder_id, dim
        self.commits = 0  # write transactions committed by this object
        self._checkpointed = 0  # ... of which every one before this count is in the database file
        self._members: dict[str, Member] = {}
        self._members_lock = threading.Lock()
        self._padded: dict[str, int] = {}  # node table -> the offset after which ``commit`` padded it
        try:
            self._ensure_schema()
            self._mend_node_groups()
        except BaseException:
            self.close()
            raise

    # -- connections -------------------------------------------------------------------------------------------
    def reader(self) -> kuzu.Connection:
        """A connection private to the calling thread, for read queries (concurrent reads are fine in Kuzu)."""
        conn: kuzu.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = kuzu.Connection(self._db)
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Run a read query over the whole bucket (the store's own bookkeeping; scopes read through their view)."""
        with self.gate.shared():
            return _run(self.reader(), cypher, params)

    def arrow(self, cypher: str, params: dict[str, Any] | None = None) -> Any:
        """Run a read query over the whole bucket and return its rows as one pyarrow table: for reads of many
        vectors, which as Python lists cost a Python number per component."""
        with self.gate.shared():
            result = execute(self.reader(), cypher, params)
            assert not isinstance(result, list)
            try:
                return result.get_as_arrow(chunk_size=100_000)
            finally:
                result.close()

    def query_each(self, cypher: str, param_sets: list[dict[str, Any]]) -> list[list[Any]]:
        """Run one read query once per parameter set, prepared once; the rows of all runs, in order.

        For point lookups by primary key: Kuzu plans ``UNWIND $keys MATCH (n {key: k})`` as a cross product with a
        scan of the whole table (measured: 101 s for 320 edges between 200k-row tables), so many lookups are cheaper
        one by one, and preparing the statement once halves their cost.
        """
        rows: list[list[Any]] = []
        if not param_sets:
            return rows
        conn = self.reader()
        with self.gate.shared():
            stmt = statements.prepared(conn, cypher)
            for params in param_sets:
                rows.extend(_drain(conn.execute(stmt, params)))
        return rows

    def checkpoint(self, upto: int | None = None) -> None:
        """Fold Kuzu's WAL into the database file, unless every commit up to ``upto`` (a ``commits`` count) is
        there already: the flushers of many scopes of a bucket each ask for one, and one checkpoint serves all the
        commits before it (a checkpoint makes every read of the bucket wait)."""
        with self.write_lock:
            if upto is not None and self._checkpointed >= upto:
                return
            with self.gate.exclusive():  # a checkpoint waits for every read to leave
                _run(self.writer, "CHECKPOINT")
            self._checkpointed = self.commits

    def rollback(self) -> None:
        try:
            _run(self.writer, "ROLLBACK")
        except RuntimeError as e:  # a failed statement already rolled the transaction back
            log.debug("rollback after error: %s", e)

    def commit(self) -> int:
        """COMMIT the open transaction (caller holds ``write_lock``); its number in ``commits``. First, in the same
        transaction, no node table is left with a lone row in its last scan batch (``store.nodegroups``: Kuzu
        0.11.3 then misreads that row in every ``IN`` filter once a checkpoint has written it); if that fails, the
        transaction is rolled back and nothing of it is kept."""
        try:
            padded = nodegroups.pad(self._write_query, nodegroups.NODE_TABLES, self._padded)
        except BaseException:
            self.rollback()
            raise
        with self.gate.exclusive():  # COMMIT may checkpoint, which needs every read to have left
            _run(self.writer, "COMMIT")
        self._padded.update(padded)
        self.commits += 1
        return self.commits

    def _write_query(self, cypher: str, params: dict[str, Any] | None) -> list[list[Any]]:
        return _run(self.writer, cypher, params)

    def _mend_node_groups(self) -> None:
        """A bucket that a checkpoint left with a lone row in a node table's last scan batch (written before the
        rule in ``commit``) is padded once, durably, before anyone reads it."""
        if not nodegroups.exposed(self._write_query, nodegroups.NODE_TABLES):
            return
        with self.write_lock:
            _run(self.writer, "BEGIN TRANSACTION")
            self.commit()
            self.checkpoint()

    # -- scopes ------------------------------------------------------------------------------------------------
    def member(self, user_id: str) -> Member | None:
        """The scope's prefix and marks, or None when the bucket holds no such scope."""
        with self._members_lock:
            return self._members.get(user_id)

    def members(self) -> list[str]:
        with self._members_lock:
            return sorted(self._members)

    def create_scope(self, user_id: str, marks: dict[str, int] | None = None) -> Member:
        """The scope's ``Scope`` row, created if need be (durable when this returns): a new prefix, never used
        before in this bucket, so no row left by an earlier scope of the same name could be taken for its own."""
        with self.write_lock:
            found = self.member(user_id)
            if found is not None:
                return found
            if self.placeholder:
                raise RuntimeError(f"{self.path} stands for scopes that have no rows; it is never written")
            _run(self.writer, "BEGIN TRANSACTION")
            try:
                prefix = self.create_scope_row(user_id, marks or {})
            except BaseException:
                self.rollback()
                raise
            self.commit()
            self.checkpoint()
            member = Member(prefix=prefix, marks=dict(marks or {}), created=marks is None)
            with self._members_lock:
                self._members[user_id] = member
            return member

    def create_scope_row(self, user_id: str, marks: dict[str, int]) -> str:
        """Inside the caller's transaction: the scope's row with the bucket's next prefix."""
        [[n]] = _run(self.writer, "MATCH (b:Scope {key: $b}) RETURN b.next_prefix", {"b": schema.BUCKET_ROW})
        _run(
            self.writer,
            "MATCH (b:Scope {key: $b}) SET b.next_prefix = $n",
            {"b": schema.BUCKET_ROW, "n": n + 1},
        )
        prefix = _prefix(int(n))
        columns = mark_params(marks)
        _run(
            self.writer,
            "CREATE (:Scope {key: $k, prefix: $p, created_at: $t, "
            + ", ".join(f"{c}: ${c}" for c in columns)
            + "})",
            {"k": user_id, "p": prefix, "t": utcnow(), **columns},
        )
        return prefix

    def adopt(self, user_id: str, member: Member) -> None:
        """Record a scope whose row a transaction of the caller created (``store.move``), after its commit."""
        with self._members_lock:
            self._members[user_id] = member

    def drop_scope(self, user_id: str) -> bool:
        """Delete every row the scope owns (and their edges), then its ``Scope`` row, in one durable transaction.
        Returns whether the bucket held the scope. The caller makes sure nobody uses the scope's view."""
        with self.write_lock:
            if self.member(user_id) is None:
                return False
            _run(self.writer, "BEGIN TRANSACTION")
            try:
                for table in ERASE_ORDER:  # what hangs from a session before the session
                    _run(
                        self.writer,
                        f"{MATCH_SCOPE}MATCH {owned('n', table)} DETACH DELETE n",
                        {"scope": user_id},
                    )
                _run(self.writer, "MATCH (s:Scope {key: $s}) DETACH DELETE s", {"s": user_id})
            except BaseException:
                self.rollback()
                raise
            self.commit()
            self.checkpoint()
            with self._members_lock:
                self._members.pop(user_id, None)
            return True

    # -- schema ------------------------------------------------------------------------------------------------
    def _ensure_schema(self) -> None:
        rows = self.query(
            "MATCH (b:Scope {key: $b}) RETURN b.schema_version, b.embedder_id, b.dim",
            {"b": schema.BUCKET_ROW},
        )
        if not rows:
            raise SchemaMismatch(f"bucket {self.path} has no bucket row; it was not created by graphrecall")
        version, stored_id, stored_dim = rows[0]
        if version not in (schema.SCHEMA_VERSION, schema.UPGRADABLE_FROM):
            raise SchemaMismatch(
                f"bucket {self.path} has schema version {version}; this graphrecall reads version "
                f"{schema.SCHEMA_VERSION} (a newer graphrecall wrote it?)"
            )
        if stored_id != self.embedder_id or stored_dim != self.dim:
            raise SchemaMismatch(
                f"bucket {self.path} holds vectors of {stored_id!r} (dim {stored_dim}), not of {self.embedder_id!r} "
                f"(dim {self.dim}): its folder's manifest was changed by hand?"
            )
        if version == schema.UPGRADABLE_FROM:  # after the embedder check: a bucket refused is not written
            self._upgrade()
        for key, prefix, *marks in self.query(
            f"MATCH (s:Scope) WHERE s.key <> $b RETURN s.key, s.prefix, {RETURN_MARKS}",
            {"b": schema.BUCKET_ROW},
        ):
            self._members[key] = Member(prefix=prefix, marks=marks_of(marks))

    def _upgrade(self) -> None:
        """Schema 6 -> 7 in place: each scope's index marks move from the JSON string ``index_marks`` into the
        integer ``MARK_COLUMNS`` (``schema.MARK_COLUMNS`` says why), the version set last. Each step is its own Kuzu
        transaction and can be run again, so a process killed in between leaves a version 6 bucket that the next
        open upgrades again: a column is added only when missing, the marks are copied from the string column.
        The string column is not dropped (``schema.DEAD_COLUMNS``): once Kuzu 0.11.3 had replayed a ``DROP`` from
        its WAL after a kill, every later ``SET`` on the table crashed the process at its checkpoint, on every
        open. It stays, unwritten, until the next compaction rewrites the bucket without it. One log line."""
        with self.write_lock:
            have = {str(r[0]) for r in _run(self.writer, "CALL table_info('Scope') RETURN name")}
            for column in schema.MARK_COLUMNS.values():
                if column not in have:
                    _run(self.writer, f"ALTER TABLE Scope ADD {column} INT64")
            self.checkpoint()
            scopes = 0
            if "index_marks" in have:
                rows = _run(
                    self.writer,
                    "MATCH (s:Scope) WHERE s.key <> $b RETURN s.key, s.index_marks",
                    {"b": schema.BUCKET_ROW},
                )
                _run(self.writer, "BEGIN TRANSACTION")
                try:
                    for key, raw in rows:
                        params = mark_params(parse_marks(raw))
                        _run(
                            self.writer,
                            f"MATCH (s:Scope {{key: $k}}) {set_marks(params)}",
                            {"k": key, **params},
                        )
                except BaseException:
                    self.rollback()
                    raise
                self.commit()
                self.checkpoint()
                scopes = len(rows)
            _run(
                self.writer,
                "MATCH (b:Scope {key: $b}) SET b.schema_version = $v",
                {"b": schema.BUCKET_ROW, "v": schema.SCHEMA_VERSION},
            )
            self.checkpoint()
        log.info(
            "bucket %s: upgraded from schema %d to %d (the index marks of its %d scopes as integer columns)",
            self.path,
            schema.UPGRADABLE_FROM,
            schema.SCHEMA_VERSION,
            scopes,
        )

    def close(self) -> None:
        if self.closed:
            return
        with self.write_lock:
            self.closed = True
            with self._conns_lock:
                for c in self._conns:
                    with contextlib.suppress(Exception):
                        statements.close(c)
                self._conns.clear()
            self._db.close()


class ScopeDatabase:
    """One scope's view of its bucket: what every store function takes. Reads and writes through it are confined to
    the scope (the module's invariant); it owns the scope's derived indexes and its known ids."""

    def __init__(self, bucket: BucketDatabase, user_id: str, path: Path, member: Member) -> None:
        """``path``: ``<root>/<org>/<user>.kuzu``, the name the scope's derived indexes (``<path>.idx``) and its
        messages are given; no such file exists."""
        self.bucket = bucket
        self.user_id = user_id
        self.path = path
        self.prefix = member.prefix
        self.write_lock = bucket.write_lock
        self.in_use = 0
        self.closed = False
        self._marks: dict[str, int] = dict(member.marks)
        self.generations = member.generations  # bumped by every commit of ``write`` (``Generations``)
        self._last_commit = 0  # the bucket's commit count after this scope's last commit
        self._owns_bucket = False  # ``standalone``: closing the view closes the bucket
        self._deferred = threading.local()  # ``checkpoint_once`` blocks open on the calling thread
        self.known = KnownIds(self)  # its Session and Message ids, kept in step by ``write`` (store/known.py)
        if member.created:
            shutil.rmtree(
                index_dir(path), ignore_errors=True
            )  # of an earlier scope of that name: nothing now
        self.indexes = DerivedIndexes.open(
            self, path, self._marks, embedder_id=bucket.embedder_id, dim=bucket.dim, fresh=member.created
        )
        member.created = False

    @classmethod
    def standalone(
        cls,
        path: Path,
        *,
        embedder_id: str,
        dim: int,
        user_id: str = "u",
        buffer_pool_size: int = BUFFER_POOL_BYTES,
        max_db_size: int = DEFAULT_MAX_DB_SIZE,
    ) -> ScopeDatabase:
        """One scope in a bucket of its own at ``path`` (its derived indexes at ``<path>.idx``), created if need be:
        for tests and benchmarks that work on one scope without a pool. Closing the view closes the bucket."""
        bucket = BucketDatabase(
            path, embedder_id=embedder_id, dim=dim, buffer_pool_size=buffer_pool_size, max_db_size=max_db_size
        )
        try:
            view = cls(bucket, user_id, path, bucket.create_scope(user_id))
        except BaseException:
            bucket.close()
            raise
        view._owns_bucket = True
        return view

    @property
    def placeholder(self) -> bool:
        """Stands for a scope that has no rows yet (``DatabasePool.empty``); never written."""
        return self.bucket.placeholder

    def key(self, id_: str) -> str:
        """The primary key of this scope's row ``id_``."""
        return self.prefix + id_

    def keys(self, ids: Sequence[str]) -> list[str]:
        return [self.prefix + i for i in ids]

    def _bind(self, cypher: str, params: dict[str, Any] | None) -> dict[str, Any]:
        check_scoped(cypher)
        out = dict(params or {})
        if "$scope" in cypher:
            out["scope"] = self.user_id
        return out

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Run a read query confined to the scope (``$scope`` is bound to it) and return all rows."""
        return self.bucket.query(cypher, self._bind(cypher, params))

    def arrow(self, cypher: str, params: dict[str, Any] | None = None) -> Any:
        """``query`` with the rows as one pyarrow table (``BucketDatabase.arrow``)."""
        return self.bucket.arrow(cypher, self._bind(cypher, params))

    def query_each(self, cypher: str, param_sets: list[dict[str, Any]]) -> list[list[Any]]:
        """``BucketDatabase.query_each`` confined to the scope."""
        return self.bucket.query_each(cypher, [self._bind(cypher, p) for p in param_sets])

    @contextlib.contextmanager
    def write(self, *, durable: bool = True, bulk: bool = False) -> Iterator[WriteTxn]:
        """The only way to write: serialized by the bucket's lock, atomic by a transaction, indexed before it
        returns.

        ``durable``: checkpoint after a commit that wrote anything and did not checkpoint itself (a ``COPY`` does;
        ``CREATE``, ``SET`` and ``DELETE`` do not), so that what the caller acknowledges does not rest on Kuzu's WAL
        alone, which recovery may have to set aside, losing part of what it held (store/recovery.py; until
        2026-12-05 only a commit that inserted rows was checkpointed, so an acknowledged erase, supersession or
        feedback could come back undone after a crash: ``tests/integration/test_acknowledged_in_the_file.py``).
        The write log's flusher passes ``False``: its entries stay in the log until it checkpoints
        (``checkpoint``), a few seconds later, for many batches at once. ``bulk``: every insert is a
        ``COPY`` (bulk ingest: ~20x cheaper per row, and one checkpoint per call is nothing at that size)."""
        if self.placeholder:
            raise RuntimeError(f"{self.path} stands for a scope that has no rows yet; it is never written")
        bucket = self.bucket
        with bucket.write_lock:
            if bucket.txn is not None:  # a nested write() on the same thread joins the open transaction
                if bucket.txn.scope is not self:
                    raise RuntimeError(f"{self.path}: a write inside another scope's transaction")
                yield bucket.txn
                return
            txn = WriteTxn(bucket.writer, self, create_small=not bulk)
            _run(bucket.writer, "BEGIN TRANSACTION")
            bucket.txn = txn
            try:
                yield txn
                marks = self._bump_marks(txn)
            except BaseException:
                bucket.rollback()
                raise
            else:
                self._last_commit = bucket.commit()
                self.generations.committed(txn)
            finally:
                bucket.txn = None
            self.known.committed(txn.ids_added, txn.ids_deleted)  # before anyone can trim what was written
            if txn.changes:
                self._marks = marks
                member = bucket.member(self.user_id)
                if member is not None:
                    member.marks = dict(marks)
                self._apply_to_indexes(txn.changes, marks)
            if txn.copied:
                self._last_commit = 0  # a COPY's commit checkpointed
            if durable and txn.wrote and not txn.copied and not getattr(self._deferred, "depth", 0):
                self.checkpoint()

    @contextlib.contextmanager
    def checkpoint_once(self) -> Iterator[None]:
        """The calling thread's durable writes inside the block are made durable by one checkpoint at its end, not
        one each. For a caller that acknowledges only after the block (extraction of a scope's sessions: its jobs
        are settled after it): each checkpoint rewrites the bucket's changed column chunks and edge regions, whose
        old pages Kuzu 0.11.3 does not reuse, so a checkpoint per session grew a bucket by ~2 MB per 100 extracted
        rounds (docs/benchmarks.md "Buckets"). A commit inside the block rests on Kuzu's WAL until the end: a crash
        before it loses what the caller never acknowledged."""
        depth = getattr(self._deferred, "depth", 0)
        self._deferred.depth = depth + 1
        try:
            yield
        finally:
            self._deferred.depth = depth
            if depth == 0 and not self.placeholder:
                self.checkpoint()

    def checkpoint(self) -> None:
        """Make this scope's commits durable in the database file (one checkpoint serves every scope of the bucket
        that committed before it)."""
        self.bucket.checkpoint(upto=self._last_commit)

    def _apply_to_indexes(self, changes: Sequence[Change], marks: dict[str, int]) -> None:
        """After a commit: the changes into the derived indexes; if that fails (a full disk, a damaged file), the
        indexes are reopened, which rebuilds the ones behind Kuzu. The data is committed either way; only an index
        that cannot be rebuilt either raises."""
        try:
            self.indexes.apply(changes, marks)
        except Exception as e:
            log.warning(
                "updating the derived indexes of %s failed (%s); rebuilding them from the store", self.path, e
            )
            self.indexes.close()
            self.indexes = DerivedIndexes.open(
                self, self.path, marks, embedder_id=self.bucket.embedder_id, dim=self.bucket.dim, fresh=False
            )

    def compact_indexes(self, bound: float, *, dry_run: bool = False) -> list[IndexSpace]:
        """Rewrite the scope's derived indexes whose dead share passed ``bound`` (``index.scope``), under the
        bucket's write lock: no commit moves the marks or the rows meanwhile; searches go on."""
        if self.placeholder:
            return []
        with self.write_lock:
            return self.indexes.compact(self, self._marks, bound, dry_run=dry_run)

    def _bump_marks(self, txn: WriteTxn) -> dict[str, int]:
        """The marks after this transaction, written into it: one more for each indexed table it changed."""
        if not txn.changes:
            return self._marks
        marks = dict(self._marks)
        changed = sorted({c.table for c in txn.changes})
        for table in changed:
            marks[table] = marks.get(table, 0) + 1
        columns = mark_params(marks, changed)
        txn.execute(f"MATCH (s:Scope {{key: $scope}}) {set_marks(columns)}", columns)
        return marks

    def close(self) -> None:
        """Close the scope's derived indexes (its bucket stays open: other scopes use it)."""
        if self.closed:
            return
        with self.write_lock:
            self.closed = True
            indexes: DerivedIndexes | None = getattr(self, "indexes", None)
            if indexes is not None:
                indexes.close()
        if self._owns_bucket:
            self.bucket.close()


def _drain(result: kuzu.QueryResult | list[kuzu.QueryResult]) -> list[list[Any]]:
    """All rows of a result, which is closed right away.

    Why close explicitly: a result left to the garbage collector (say, kept alive by an exception's traceback)
    may be finalized after its database was closed, and Kuzu must not touch a closed database's results.
    """
    results = result if isinstance(result, list) else [result]
    rows: list[list[Any]] = []
    try:
        for r in results:
            while r.has_next():
                rows.append(list(r.get_next()))
    finally:
        for r in results:
            r.close()
    return rows


def create_bucket(path: Path, embedder_id: str, dim: int) -> None:
    """A new bucket at ``path``: its tables and its bucket row, made whole in ``<path>.creating`` and renamed into
    place. Why not in place: Kuzu runs DDL only in auto-commit mode, a statement at a time, so a process killed while
    creating a bucket in place left a file with some tables and no bucket row (found by a killed ``graphrecall
    reembed``: every later open failed on it). A leftover ``.creating`` of such a kill is deleted first. The file is
    checkpointed and closed before the rename: recovery never has to replay DDL. One creator at a time (a thread
    lock, and a process lock beside the file: ``StoreBusy`` while another process creates it); one that finds the
    bucket made meanwhile leaves it as it is."""
    tmp = path.with_name(path.name + CREATING)
    with _CREATING_LOCK:
        proclock.acquire(tmp, f"bucket {path} (another process is creating it)")
        try:
            if not path.exists():
                _create_at(tmp, embedder_id, dim)
                os.replace(tmp, path)
                fsync_dir(path.parent)
        finally:
            proclock.release(tmp)


def _create_at(tmp: Path, embedder_id: str, dim: int) -> None:
    """The bucket's file at ``tmp``. Without room for it, ``StorageFull`` before Kuzu writes anything; a write that
    fails anyway (the room taken meanwhile) leaves the database unclosed: closing a Kuzu database whose write failed
    for lack of room never returns (measured, Kuzu 0.11.3: ``Database.close`` blocked for good with 0.2-2 MB free,
    and the whole test run with it), so it is kept alive like the pool's broken buckets and its files removed."""
    _remove(tmp)
    refused = f"no room to create the bucket {tmp.name.removesuffix(CREATING)}"
    short = short_of_room(tmp, CREATE_ROOM_BYTES)
    if short is not None:
        raise StorageFull(f"{refused}: {short}")
    db = _open_kuzu(tmp, 16 << 20, DEFAULT_MAX_DB_SIZE)
    conn = kuzu.Connection(db)
    try:
        for stmt in schema.bucket_tables(dim):
            _run(conn, stmt)
        _run(
            conn,
            "CREATE (:Scope {key: $b, schema_version: $v, embedder_id: $e, dim: $d, created_at: $t, next_prefix: 0})",
            {"b": schema.BUCKET_ROW, "v": schema.SCHEMA_VERSION, "e": embedder_id, "d": dim, "t": utcnow()},
        )
        _run(conn, "CHECKPOINT")
    except BaseException as e:
        if not is_io_failure(e):
            statements.close(conn)
            db.close()
            raise
        keep_unclosed(conn, db)
        _remove(tmp)
        reason = no_room(e, [tmp, wal_path(tmp)])
        if reason is not None:
            raise StorageFull(f"{refused}: {reason}") from e
        raise
    statements.close(conn)
    db.close()
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())


CREATE_ROOM_BYTES = 8 << 20
"""Free space a new bucket needs before it is created: its empty file (~1.1 MB), the shadow and write-ahead log of
its one checkpoint (~1.2 MB), and room for the first write."""


def keep_unclosed(*objects: object) -> None:
    """Keep Kuzu objects whose write failed alive, unclosed, until the process exits. Why: closing such a database
    aborts the process, writes the failed commit into the files, or blocks for good (``store/space.py``,
    ``_create_at``); the garbage collector would close it, at the latest at exit, so each gets a reference that is
    never given back. Its memory stays taken: one database per failed write."""
    for o in objects:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(o))


CREATING = ".creating"
_CREATING_LOCK = threading.Lock()


def _open_kuzu(path: Path, buffer_pool_size: int, max_db_size: int) -> kuzu.Database:
    try:
        return kuzu.Database(str(path), buffer_pool_size=buffer_pool_size, max_db_size=max_db_size)
    except RuntimeError as e:
        if "lock" in str(e).lower():
            raise StoreBusy(f"database {path} is held by another process: {e}") from e
        raise


def _half_created(db: kuzu.Database) -> bool:
    """Whether the database is a bucket that earlier code began to create in place and a kill cut off: no bucket
    row, and not one row in any table (so nothing is lost by creating it again). A database that holds rows but no
    bucket row is not graphrecall's: ``_ensure_schema`` refuses it."""
    conn = kuzu.Connection(db)
    try:
        tables = {row[1]: row[2] for row in _run(conn, "CALL show_tables() RETURN *")}
        # Without parameters, so nothing is prepared on this throwaway connection (``store.statements``).
        if "Scope" in tables and _run(conn, f"MATCH (b:Scope {{key: '{schema.BUCKET_ROW}'}}) RETURN 1"):
            return False
        return all(
            not _run(conn, f"MATCH (n:{t}) RETURN 1 LIMIT 1")
            if kind == "NODE"
            else not _run(conn, f"MATCH ()-[r:{t}]->() RETURN 1 LIMIT 1")
            for t, kind in tables.items()
        )
    finally:
        conn.close()


def _remove(path: Path) -> None:
    """A Kuzu database file and its companions."""
    for p in (path, Path(f"{path}.wal"), Path(f"{path}.shadow")):
        p.unlink(missing_ok=True)


def _run(conn: kuzu.Connection, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    return _drain(execute(conn, cypher, params))


def _typed(expr: str, arrow_type: Any) -> str:
    """``expr`` cast to the Kuzu type of an arrow column: a parameter's type is inferred from its value, so a null
    would arrive as STRING and a vector as DOUBLE[]."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return expr
    if pa.types.is_timestamp(arrow_type):
        kuzu_type = "TIMESTAMP"
    elif pa.types.is_int64(arrow_type):
        kuzu_type = "INT64"
    elif pa.types.is_floating(arrow_type):
        kuzu_type = "DOUBLE" if pa.types.is_float64(arrow_type) else "FLOAT"
    elif pa.types.is_fixed_size_list(arrow_type):  # a vector: FLOAT, or half precision's bits (store.vectors)
        element = "INT16" if pa.types.is_int16(arrow_type.value_type) else "FLOAT"
        kuzu_type = f"{element}[{arrow_type.list_size}]"
    elif pa.types.is_list(arrow_type) and pa.types.is_string(arrow_type.value_type):
        kuzu_type = "STRING[]"
    elif pa.types.is_boolean(arrow_type):
        kuzu_type = "BOOLEAN"
    else:
        raise TypeError(f"no Kuzu type for arrow type {arrow_type}")
    return f"CAST({expr} AS {kuzu_type})"


class _ReadGate:
    """Keeps read queries out of the database while a COMMIT runs.

    Why: a COMMIT may trigger Kuzu's checkpoint, which waits (about 5 s) for every active transaction to leave and
    then fails with "Timeout waiting for active transactions to leave the system before checkpointing", although the
    data *was* committed. With readers querying back to back (searches during ingest), that happened on every write.
    Reads share the gate; a commit takes it exclusively, and a waiting commit holds back new reads so it cannot
    starve.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._committing = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._committing:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if self._readers == 0:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._committing:  # defensive: the write lock already serializes commits
                self._cond.wait()
            self._committing = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._committing = False
                self._cond.notify_all()


class WriteTxn:
    """A handle on the writer connection inside ``ScopeDatabase.write()``, confined to that scope: statements bind
    ``$scope`` and pass ``check_scoped``; inserted rows get their key and their ``OWNS`` edge (``copy``)."""

    def __init__(self, conn: kuzu.Connection, scope: ScopeDatabase, *, create_small: bool = False) -> None:
        self._conn = conn
        self.scope = scope
        self.create_small = create_small  # small inserts as CREATE (see ``copy``)
        self.changes: list[Change] = []  # what this transaction did to indexed tables
        # Ids it inserted into and deleted from the tables whose ids the database keeps in memory (``KnownIds``).
        self.ids_added: dict[str, list[str]] = {}
        self.ids_deleted: dict[str, list[str]] = {}
        self.wrote = False  # it ran a statement that writes (CREATE, SET, DELETE...: ``ScopeDatabase.write``)
        self.copied = False  # it ran a COPY (its commit checkpoints)
        # It wrote something other than chat (``Generations``): a statement that changes rows other than by
        # stamping a session or the scope row or deleting rounds (``_chat_only``), a deletion of rows other than
        # rounds and passages (``unindex``), an insert outside the chat tables (``CHAT_TABLES``).
        self.graph_writes = False
        self._sessions: list[str] = []  # what a write of chat inserted and replaced: ``chat_note``
        self._rounds_deleted: list[str] = []
        self._round_messages: list[str] = []

    def execute(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Run a statement confined to the scope. Deleting rows of an indexed table must be announced with
        ``unindex``."""
        if _WRITES.search(cypher):
            self.wrote = True
            if not self.graph_writes and not _chat_only(cypher):
                self.graph_writes = True
        return _run(self._conn, cypher, self.scope._bind(cypher, params))

    def key(self, id_: str) -> str:
        """The primary key of the scope's row ``id_``."""
        return self.scope.key(id_)

    def unindex(self, table: str, ids: Sequence[str]) -> None:
        """Announce that this transaction deletes ``ids`` of ``table`` (call it beside the statement that deletes
        them): at commit they leave its derived indexes and the database's known ids."""
        if table == "Round":
            self._rounds_deleted.extend(ids)
        elif ids and table != "Passage":
            self.graph_writes = True
        if table in INDEXED_TABLES and ids:
            self.changes.append(Change(table, deleted=list(ids)))
        if table in KNOWN_TABLES and ids:
            self.ids_deleted.setdefault(table, []).extend(ids)

    def copy(self, table: str, data: Any) -> None:
        """Insert a pyarrow table of the scope's rows (``id`` column; for an edge table ``from`` and ``to`` ids):
        each row keyed by the scope's prefix and, for a row of an ``schema.ANCHORED`` table, owned by the scope's
        ``Scope`` node in the same statement (the scope invariant, module docstring); a message, round or passage is
        reached through the edge to its session or round, which the caller writes in the same transaction. An
        indexed table's rows are indexed at commit, with the columns Kuzu does not keep (``schema.INDEX_ONLY``: a
        round's texts, which are its messages').

        How: messages, rounds and passages in bulk (more than ``CREATE_MAX_ROWS``, or ``bulk``) are one ``COPY``;
        every other insert is ``CREATE`` statements, edges one statement per edge (``insert_rows``,
        ``insert_edges``). Why: a transaction that ran a ``COPY`` checkpoints on commit (measured: ~130 ms p50 for
        one 2-message session, ~10 ms with ``CREATE``), which every read of the bucket waits out, but ``COPY`` is
        ~20x faster per row in bulk; and a ``COPY`` into a relationship table that is rolled back deletes every
        checkpointed edge of that table in Kuzu 0.11.3 (every user's, in a bucket: measured with Kuzu alone,
        docs/architecture.md), so edges and the ``OWNS`` edges of anchored rows are never copied.
        """
        if data.num_rows == 0:
            return
        if table not in CHAT_TABLES:
            self.graph_writes = True
        elif table == "Session":
            self._sessions.extend(data.column("id").to_pylist())
        elif table == "Round":
            if "message_ids" in data.column_names:
                self._round_messages.extend(pc.list_flatten(data.column("message_ids")).to_pylist())
            else:
                self.graph_writes = True
        ends = schema.rel_ends(table)
        index_only = [c for c in schema.INDEX_ONLY.get(table, ()) if c in data.column_names]
        keyed = _keyed(
            _unset_as_null(table, data.drop_columns(index_only)), self.scope.prefix, ends is not None
        )
        self.wrote = True
        if ends is not None:
            insert_edges(self._conn, table, keyed)
        elif table in schema.ANCHORED or (self.create_small and data.num_rows <= CREATE_MAX_ROWS):
            if insert_rows(self._conn, table, keyed, self.scope.user_id):
                self.copied = True
        else:
            # Kuzu resolves ``FROM <name>`` against the calling frame's variables, hence the local name.
            frame = keyed  # noqa: F841
            _drain(self._conn.execute(f"COPY {table} FROM frame"))
            self.copied = True
        if table in INDEXED_TABLES:
            self.changes.append(Change(table, added=data))
        if table in KNOWN_TABLES:
            self.ids_added.setdefault(table, []).extend(data.column("id").to_pylist())

    def chat_note(self, writes: int) -> ChatNote:
        """What this transaction, as commit number ``writes``, inserted and replaced of the chat."""
        return ChatNote(
            writes,
            frozenset(self._sessions),
            frozenset(self._rounds_deleted),
            frozenset(self._round_messages),
        )


CHAT_TABLES = frozenset({"Session", "Message", "Round", "Passage", "MSG_IN", "ROUND_IN", "PASSAGE_OF"})
_WRITES = re.compile(r"\b(SET|CREATE|DELETE|MERGE|REMOVE|COPY)\b", re.IGNORECASE)
_NOT_CHAT = re.compile(r"\b(CREATE|MERGE|REMOVE|COPY)\b", re.IGNORECASE)
_ROUND_LABELS = frozenset({"Round", "Passage", "PASSAGE_OF"})
_LABELS = re.compile(r"[:|]\s*([A-Za-z_][A-Za-z0-9_]*)")


def _chat_only(cypher: str) -> bool:
    """A statement that only ``SET``s columns of sessions, rounds or the scope row other than a session's start or
    a round's messages (the ingest's ``updated_at``, the derived indexes' marks, an extraction status, a round's
    feedback count), or that deletes rounds with their passages (``rounds.delete_rounds``: the ids are announced
    by ``unindex``, which notes them). Anything else may change what ``store.adjacency`` holds."""
    labels = set(_LABELS.findall(cypher))
    if _NOT_CHAT.search(cypher) or "started_at" in cypher or "message_ids" in cypher:
        return False
    if re.search(r"\bDELETE\b", cypher, re.IGNORECASE):
        return labels <= _ROUND_LABELS and not re.search(r"\bSET\b", cypher, re.IGNORECASE)
    return labels <= {"Session", "Round", "Scope"}


_ARROW_TYPES = {"STRING": "string", "INT64": "int64", "TIMESTAMP": "timestamp"}


def _unset_as_null(table: str, data: Any) -> Any:
    """``data`` with the columns that writers of earlier code did not know and do not set
    (``schema.NEW_IN_BUCKETS``, the table's last columns) appended as NULL, so every ``COPY`` and ``CREATE`` names
    the table's full row; a column the writer set is kept."""
    import pyarrow as pa

    for name in schema.NEW_IN_BUCKETS.get(table, ()):
        if name not in data.column_names:
            kind = _ARROW_TYPES[schema.NEW_COLUMN_TYPES[name]]
            arrow_type = (
                pa.timestamp("us") if kind == "timestamp" else getattr(pa, kind)()
            )  # as store.arrow.TS
            data = data.append_column(name, pa.nulls(data.num_rows, arrow_type))
    return data


def _keyed(data: Any, prefix: str, edges: bool) -> Any:
    """``data`` with its keys: a ``key`` column first for a node table, ``from`` and ``to`` as keys for an edge
    table."""
    import pyarrow as pa

    if not edges:
        return data.add_column(0, "key", pa.array([prefix + i for i in data.column("id").to_pylist()]))
    keyed = data.set_column(0, "from", pa.array([prefix + i for i in data.column("from").to_pylist()]))
    return keyed.set_column(1, "to", pa.array([prefix + i for i in data.column("to").to_pylist()]))


ANCHORED_COPY_FROM = 2_000
"""Rows of an anchored table from which ``insert_rows`` uses ``COPY`` (then one ``OWNS`` edge per row): Kuzu 0.11.3
keeps the rows of ``CREATE`` statements in the transaction's memory, and an import of 10,000 entities, 20,000
facts and 2,000 events in one transaction filled a 256 MiB buffer pool at commit ("Unable to allocate memory"),
while the same rows by ``COPY`` committed (benchmarks/perf/entities.py). Below it ``CREATE`` is cheaper: a ``COPY``
makes its commit checkpoint."""


def insert_rows(conn: kuzu.Connection, table: str, keyed: Any, user_id: str) -> bool:
    """``CREATE`` keyed rows of a scope table, ``CREATE_CHUNK`` per statement; a row of an anchored table with
    its ``OWNS`` edge from the scope's ``Scope`` node (``user_id``), in the same statement; from
    ``ANCHORED_COPY_FROM`` rows of an anchored table, a ``COPY`` of the rows and then their ``OWNS`` edges one by one
    (never a ``COPY`` of edges: ``WriteTxn.copy``). Returns whether it ran a ``COPY``."""
    if table in schema.ANCHORED and keyed.num_rows >= ANCHORED_COPY_FROM:
        frame = keyed  # noqa: F841  (COPY reads it by name)
        _drain(conn.execute(f"COPY {table} FROM frame"))
        owns = statements.prepared(
            conn, f"MATCH (sc:Scope {{key: $scope}}), (n:{table} {{key: $k}}) CREATE (sc)-[:OWNS]->(n)"
        )
        for k in keyed.column("key").to_pylist():
            _drain(conn.execute(owns, {"scope": user_id, "k": k}))
        return True
    props = ", ".join(f"{c}: {_typed(f'r.{c}', keyed.schema.field(c).type)}" for c in keyed.column_names)
    if table in schema.ANCHORED:  # starts from the Scope node (a key lookup)
        stmt = (
            f"MATCH (sc:Scope {{key: $scope}}) UNWIND $rows AS r CREATE (sc)-[:OWNS]->(:{table} {{{props}}})"
        )
    else:  # reached through the edge to its session or round, written in the same transaction
        stmt = f"UNWIND $rows AS r CREATE (:{table} {{{props}}})"
    for start in range(0, keyed.num_rows, CREATE_CHUNK):
        rows = keyed.slice(start, CREATE_CHUNK).to_pylist()
        _run(conn, stmt, {"rows": rows, "scope": user_id} if table in schema.ANCHORED else {"rows": rows})
    return False


def insert_edges(conn: kuzu.Connection, table: str, keyed: Any) -> None:
    """``CREATE`` edges between keyed rows, one prepared statement per edge, each end looked up by key. Why not
    ``UNWIND $rows MATCH (a {key: r.from})``: Kuzu plans it as a cross product with a scan of both node tables, which
    are the whole bucket's (101 s for 320 edges between 200k-row tables, against ~1 ms per edge one by one); and
    not ``COPY``: a rolled-back ``COPY`` of edges deletes the table's checkpointed edges (``WriteTxn.copy``)."""
    ends = schema.rel_ends(table)
    assert ends is not None, table
    src, dst = ends
    extra = [c for c in keyed.column_names if c not in ("from", "to")]
    props = ", ".join(f"{c}: {_typed(f'${c}', keyed.schema.field(c).type)}" for c in extra)
    stmt = statements.prepared(
        conn, f"MATCH (a:{src} {{key: $f}}), (b:{dst} {{key: $t}}) CREATE (a)-[:{table} {{{props}}}]->(b)"
    )
    for r in keyed.to_pylist():
        _drain(conn.execute(stmt, {"f": r["from"], "t": r["to"], **{c: r[c] for c in extra}}))
