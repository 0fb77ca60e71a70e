"""One scope's Kuzu database: schema (and its upgrade), embedder check, the single-writer lock, per-thread read
connections, and the derived indexes beside it.

Kuzu allows one write transaction per database at a time, and a second concurrent writer fails at once instead of
waiting; worse, after a failed ``BEGIN`` the next query on that connection crashes the process. So every write goes
through ``ScopeDatabase.write()``: one dedicated connection, one ``threading.Lock``, ``BEGIN``/``COMMIT`` around the
whole batch and ``ROLLBACK`` on error, so a failed batch leaves nothing half-written. The same call keeps the derived
indexes (``store.derived``) in step: what a transaction did to an indexed table is applied to them after its commit,
before ``write()`` returns, so a write is searchable as soon as it is acknowledged.
"""

from __future__ import annotations

import contextlib
import importlib.util  # noqa: F401  (kuzu's pyarrow scan path needs importlib.util imported)
import logging
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import kuzu

from graphrecall.config import BUFFER_POOL_BYTES
from graphrecall.embed.spec import spec_of
from graphrecall.errors import EmbedderMismatch, SchemaMismatch, StoreBusy
from graphrecall.index import index_dir
from graphrecall.models import utcnow
from graphrecall.store import schema
from graphrecall.store.derived import INDEXED_TABLES, Change, DerivedIndexes, dump_marks, parse_marks
from graphrecall.store.known import KNOWN_TABLES, KnownIds
from graphrecall.store.recovery import recover
from graphrecall.text import message_language

log = logging.getLogger(__name__)

# What opening a store of each older schema does to it (logged once, when it happens).
_UPGRADE_WORK = {
    1: "dropped Kuzu's full-text indexes, kept its vector indexes (no longer searched), added Fact.reinforcement,"
    " the Passage table and Message.lang",
    2: "added Fact.reinforcement, the Passage table (`graphrecall backfill-passages` fills it) and Message.lang",
    3: "added the Passage table (long rounds stored before keep their pooled vector only until "
    "`graphrecall backfill-passages` or Memory.backfill_passages embeds their passages) and Message.lang",
    4: "added Message.lang (each message's language, detected from its text)",
}
# Messages read per query while an upgrade detects their languages (``_upgrade_from_4``).
LANG_BACKFILL_PAGE = 2_000

DEFAULT_MAX_DB_SIZE = 1 << 36  # 64 GiB of address space per database, not memory
CREATE_MAX_ROWS = 256  # inserts up to this many rows are CREATE statements (``WriteTxn.copy``)
# Below this many rounds a scope's edges are created with one UNWIND statement per table, else one statement per
# edge (``WriteTxn._create``): Kuzu plans the UNWIND as a scan of both node tables, which cost ~18 ms for 140 edges
# between 1k-row tables against ~115 ms one by one, and ~1 s between 100k-row tables against ~110 ms (a scope has
# about two messages per round, so 2,500 rounds keep the message table near 5k rows).
UNWIND_EDGES_MAX_ROUNDS = 2_500


class ScopeDatabase:
    """Owns a ``kuzu.Database`` file and the connections onto it."""

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
        self.recovered_wal = recover(path)
        try:
            self._db = kuzu.Database(str(path), buffer_pool_size=buffer_pool_size, max_db_size=max_db_size)
        except RuntimeError as e:
            if "lock" in str(e).lower():
                raise StoreBusy(f"database {path} is held by another process: {e}") from e
            raise
        self.write_lock = threading.RLock()
        self._txn: WriteTxn | None = None  # the open write transaction (a nested write() joins it)
        self._gate = _ReadGate()
        self._writer = kuzu.Connection(self._db)
        self._local = threading.local()
        self._conns: list[kuzu.Connection] = [self._writer]
        self._conns_lock = threading.Lock()
        self.in_use = 0
        self.closed = False
        self.placeholder = False  # ``DatabasePool.empty``: stands for a scope with no database; never written
        self._marks: dict[str, int] = {}
        self._embedder_id, self._dim = embedder_id, dim
        self.known = KnownIds(self)  # its Session and Message ids, kept in step by ``write`` (store/known.py)
        t0 = time.perf_counter()
        created, upgraded = self._ensure_schema(embedder_id, dim)
        try:
            # Only schema 1 had other indexes; later upgrades add a column or empty tables (the ``Passage`` index
            # is built empty on open), so the derived indexes of the rest hold.
            self.indexes = DerivedIndexes.open(
                self, path, self._marks, embedder_id=embedder_id, dim=dim, fresh=created or upgraded == 1
            )
        except BaseException:
            self.close()
            raise
        if upgraded:
            log.warning(
                "upgraded the store %s from schema %d to %d in %.2f s: %s; built its derived indexes (%s)",
                path,
                upgraded,
                schema.SCHEMA_VERSION,
                time.perf_counter() - t0,
                _UPGRADE_WORK[upgraded],
                ", ".join(self.indexes.rebuilt) or "none",
            )

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
        """Run a read query and return all rows."""
        with self._gate.shared():
            return _run(self.reader(), cypher, params)

    def query_each(self, cypher: str, param_sets: list[dict[str, Any]]) -> list[list[Any]]:
        """Run one read query once per parameter set, prepared once; the rows of all runs, in order.

        For point lookups by primary key: Kuzu plans ``UNWIND $ids MATCH (n {id: i})`` as a scan of the whole
        table, so many lookups are cheaper one by one, and preparing the statement once halves their cost.
        """
        rows: list[list[Any]] = []
        if not param_sets:
            return rows
        conn = self.reader()
        with self._gate.shared():
            stmt = conn.prepare(cypher)
            for params in param_sets:
                rows.extend(_drain(conn.execute(stmt, params)))
        return rows

    @contextlib.contextmanager
    def write(self, *, durable: bool = True, bulk: bool = False) -> Iterator[WriteTxn]:
        """The only way to write: serialized by a lock, atomic by a transaction, indexed before it returns.

        ``durable``: checkpoint after a commit that did not (a ``COPY`` checkpoints by itself, ``CREATE``s do not),
        so that what the caller acknowledges does not rest on Kuzu's WAL alone, which recovery may have to set aside
        (store/recovery.py). The write log's flusher passes ``False``: its entries stay in the log until it
        checkpoints (``checkpoint``), a few seconds later, for many batches at once. ``bulk``: every insert is a
        ``COPY`` (bulk ingest: ~20x cheaper per row, and one checkpoint per call is nothing at that size)."""
        if self.placeholder:
            raise RuntimeError(
                f"{self.path} stands for a scope that has no database yet; it is never written"
            )
        with self.write_lock:
            if self._txn is not None:  # a nested write() on the same thread joins the open transaction
                yield self._txn
                return
            txn = WriteTxn(
                self._writer,
                create_small=not (self.native_indexes or bulk),
                small_tables=self.indexes.count("round_user") < UNWIND_EDGES_MAX_ROUNDS,
            )
            _run(self._writer, "BEGIN TRANSACTION")
            self._txn = txn
            try:
                yield txn
                marks = self._bump_marks(txn.changes)
            except BaseException:
                self._rollback()
                raise
            else:
                with self._gate.exclusive():  # COMMIT may checkpoint, which needs every read to have left
                    _run(self._writer, "COMMIT")
            finally:
                self._txn = None
            self.known.committed(txn.ids_added, txn.ids_deleted)  # before anyone can trim what was written
            if txn.changes:
                self._marks = marks
                self._apply_to_indexes(txn.changes, marks)
            if durable and txn.created and not txn.copied:
                self.checkpoint()

    def checkpoint(self) -> None:
        """Fold Kuzu's WAL into the database file: what was committed before is durable without it."""
        with self.write_lock, self._gate.exclusive():  # a checkpoint waits for every read to leave
            _run(self._writer, "CHECKPOINT")

    native_indexes = (
        False  # Kuzu-native indexes (an upgraded schema 1 store's vector indexes): inserts must COPY
    )

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
                self, self.path, marks, embedder_id=self._embedder_id, dim=self._dim, fresh=False
            )

    def _bump_marks(self, changes: Sequence[Change]) -> dict[str, int]:
        """The marks after this transaction, written into it: one more for each indexed table it changed."""
        if not changes:
            return self._marks
        marks = dict(self._marks)
        for table in {c.table for c in changes}:
            marks[table] = marks.get(table, 0) + 1
        _run(
            self._writer,
            "MATCH (m:Meta {key: 'meta'}) SET m.index_marks = $j",
            {"j": dump_marks(marks)},
        )
        return marks

    def _rollback(self) -> None:
        try:
            _run(self._writer, "ROLLBACK")
        except RuntimeError as e:  # a failed statement already rolled the transaction back
            log.debug("rollback after error: %s", e)

    # -- schema ------------------------------------------------------------------------------------------------
    def _ensure_schema(self, embedder_id: str, dim: int) -> tuple[bool, int]:
        """(created now, the schema version upgraded from or 0); loads the index marks."""
        tables = {row[1] for row in self.query("CALL show_tables() RETURN *")}
        if "Meta" not in tables:
            self._create_schema(embedder_id, dim)
            return True, 0
        rows = self.query("MATCH (m:Meta {key: 'meta'}) RETURN m.schema_version, m.embedder_id, m.dim")
        if not rows:
            raise SchemaMismatch(f"database {self.path} has no Meta node; it was not created by graphrecall")
        version, stored_id, stored_dim = rows[0]
        if stored_id != embedder_id or stored_dim != dim:
            raise EmbedderMismatch.of_store(
                "database",
                self.path,
                stored=(stored_id, stored_dim),
                wanted=(embedder_id, dim),
                specs=(spec_of(stored_id), spec_of(embedder_id)),
            )
        upgraded = 0
        if version == 1:
            self._upgrade_from_1()
            upgraded, version = 1, 2
        if version == 2:
            self._upgrade_from_2()
            upgraded, version = upgraded or 2, 3
        if version == 3:
            self._upgrade_from_3(dim)
            upgraded, version = upgraded or 3, 4
        if version == 4:
            self._upgrade_from_4()
            upgraded = upgraded or 4
        elif version != schema.SCHEMA_VERSION:
            raise SchemaMismatch(
                f"database {self.path} has schema version {version}; this graphrecall reads versions 1 to "
                f"{schema.SCHEMA_VERSION} (a newer graphrecall wrote it?)"
            )
        self._marks = parse_marks(self.query("MATCH (m:Meta {key: 'meta'}) RETURN m.index_marks")[0][0])
        self.native_indexes = bool(self.query("CALL show_indexes() RETURN *"))
        return False, upgraded

    def _create_schema(self, embedder_id: str, dim: int) -> None:
        with self.write_lock:
            # DDL runs in auto-commit mode (Kuzu does not allow it in one manual transaction).
            for stmt in [*schema.node_tables(dim), *schema.REL_TABLES]:
                _run(self._writer, stmt)
            _run(
                self._writer,
                "CREATE (:Meta {key: 'meta', schema_version: $v, embedder_id: $e, dim: $d, created_at: $t,"
                " index_marks: '{}'})",
                {"v": schema.SCHEMA_VERSION, "e": embedder_id, "d": dim, "t": utcnow()},
            )
            # A new database is durable as a whole before its first write: recovery never has to replay DDL.
            _run(self._writer, "CHECKPOINT")
        # Indexes of an earlier store at this path (erased while this process held it open) describe nothing now.
        shutil.rmtree(index_dir(self.path), ignore_errors=True)

    def _upgrade_from_1(self) -> None:
        """Schema 1 -> 2: the index marks column, Kuzu's full-text indexes dropped (the derived lexical index
        replaces them; they cost ~6 MB per store and a checkpointed update per write). Its vector indexes cannot be
        dropped safely in Kuzu 0.11.3 and stay, unused. Idempotent: a crash half-way is finished by the next open."""
        with self.write_lock:
            columns = {r[1] for r in self.query("CALL table_info('Meta') RETURN *")}
            if "index_marks" not in columns:
                _run(self._writer, "ALTER TABLE Meta ADD index_marks STRING DEFAULT '{}'")
            existing = {(r[0], r[1]) for r in self.query("CALL show_indexes() RETURN table_name, index_name")}
            for table, name, _ in schema.FTS_INDEXES:
                if (table, name) in existing:
                    _run(self._writer, f"CALL DROP_FTS_INDEX('{table}', '{name}')")
            _run(self._writer, "MATCH (m:Meta {key: 'meta'}) SET m.schema_version = 2")
            _run(self._writer, "CHECKPOINT")
        Path(str(self.path) + ".fts-rebuild").unlink(
            missing_ok=True
        )  # schema 1's repair marker: nothing to repair

    def _upgrade_from_2(self) -> None:
        """Schema 2 -> 3: ``Fact.reinforcement``, added with a default of 1 and then set to the number of distinct
        sessions the fact's source messages come from (what extraction would have counted; a fact the application
        added has none and stays 1). ``ALTER TABLE ... ADD ... DEFAULT`` is DDL, so it runs in auto-commit mode
        (Kuzu refuses DDL in a manual transaction). Idempotent: a crash half-way is finished by the next open."""
        with self.write_lock:
            columns = {r[1] for r in self.query("CALL table_info('Fact') RETURN *")}
            if "reinforcement" not in columns:
                _run(self._writer, "ALTER TABLE Fact ADD reinforcement INT64 DEFAULT 1")
            _run(
                self._writer,
                "MATCH (f:Fact)-[:FACT_FROM]->(m:Message) WITH f, count(DISTINCT m.session_id) AS n "
                "SET f.reinforcement = CASE WHEN n > 1 THEN n ELSE 1 END",
            )
            _run(self._writer, "MATCH (m:Meta {key: 'meta'}) SET m.schema_version = 3")
            _run(self._writer, "CHECKPOINT")

    def _upgrade_from_3(self, dim: int) -> None:
        """Schema 3 -> 4: the ``Passage`` table and its ``PASSAGE_OF`` edges, empty (a round stored before keeps its
        pooled vector only until it is written again). Idempotent, like the other upgrades."""
        with self.write_lock:
            tables = {row[1] for row in self.query("CALL show_tables() RETURN *")}
            if "Passage" not in tables:
                _run(self._writer, schema.PASSAGE_TABLE.format(vec=f"FLOAT[{dim}]"))
            if "PASSAGE_OF" not in tables:
                _run(self._writer, schema.PASSAGE_REL)
            _run(self._writer, "MATCH (m:Meta {key: 'meta'}) SET m.schema_version = 4")
            _run(self._writer, "CHECKPOINT")

    def _upgrade_from_4(self) -> None:
        """Schema 4 -> 5: ``Message.lang``, added as ``''`` (DDL, in auto-commit mode) and then set to every
        message's detected language (``text.message_language``, as a write would have stored it), read a page of
        messages at a time, in one transaction with the version bump: a crash half-way leaves the column and
        version 4, and the next open detects again. Measured on a LongMemEval-sized store (5,000 messages): see
        docs/architecture.md."""
        with self.write_lock:
            columns = {r[1] for r in self.query("CALL table_info('Message') RETURN *")}
            if "lang" not in columns:
                _run(self._writer, "ALTER TABLE Message ADD lang STRING DEFAULT ''")
            found: list[dict[str, str]] = []
            after = ""
            while True:
                page = self.query(
                    "MATCH (m:Message) WHERE m.id > $after RETURN m.id, m.text ORDER BY m.id LIMIT $n",
                    {"after": after, "n": LANG_BACKFILL_PAGE},
                )
                found += [
                    {"id": mid, "lang": lang} for mid, text in page if (lang := message_language(text or ""))
                ]
                if len(page) < LANG_BACKFILL_PAGE:
                    break
                after = page[-1][0]
            _run(self._writer, "BEGIN TRANSACTION")
            try:
                for start in range(0, len(found), LANG_BACKFILL_PAGE):
                    _run(
                        self._writer,
                        "UNWIND $rows AS r MATCH (m:Message {id: r.id}) SET m.lang = r.lang",
                        {"rows": found[start : start + LANG_BACKFILL_PAGE]},
                    )
                _run(
                    self._writer,
                    "MATCH (m:Meta {key: 'meta'}) SET m.schema_version = $v",
                    {"v": schema.SCHEMA_VERSION},
                )
            except BaseException:
                self._rollback()
                raise
            _run(self._writer, "COMMIT")
            _run(self._writer, "CHECKPOINT")

    def close(self) -> None:
        if self.closed:
            return
        with self.write_lock:
            self.closed = True
            indexes: DerivedIndexes | None = getattr(self, "indexes", None)
            if indexes is not None:
                indexes.close()
            with self._conns_lock:
                for c in self._conns:
                    with contextlib.suppress(Exception):
                        c.close()
                self._conns.clear()
            self._db.close()


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


def _run(conn: kuzu.Connection, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    return _drain(conn.execute(cypher, params or {}))


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
    elif pa.types.is_fixed_size_list(arrow_type):
        kuzu_type = f"FLOAT[{arrow_type.list_size}]"
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
    """A handle on the writer connection inside ``ScopeDatabase.write()``."""

    def __init__(
        self, conn: kuzu.Connection, *, create_small: bool = False, small_tables: bool = False
    ) -> None:
        self._conn = conn
        self.create_small = create_small  # small inserts as CREATE (see ``copy``)
        self.small_tables = small_tables  # the scope is small: edges by UNWIND (see ``_create``)
        self.changes: list[Change] = []  # what this transaction did to indexed tables
        # Ids it inserted into and deleted from the tables whose ids the database keeps in memory (``KnownIds``).
        self.ids_added: dict[str, list[str]] = {}
        self.ids_deleted: dict[str, list[str]] = {}
        self.created = False  # it inserted with CREATE (its commit does not checkpoint)
        self.copied = False  # it ran a COPY (its commit checkpoints)

    def execute(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Run a statement. Deleting rows of an indexed table must be announced with ``unindex``."""
        return _run(self._conn, cypher, params)

    def unindex(self, table: str, ids: Sequence[str]) -> None:
        """Announce that this transaction deletes ``ids`` of ``table`` (call it beside the statement that deletes
        them): at commit they leave its derived indexes and the database's known ids."""
        if table in INDEXED_TABLES and ids:
            self.changes.append(Change(table, deleted=list(ids)))
        if table in KNOWN_TABLES and ids:
            self.ids_deleted.setdefault(table, []).extend(ids)

    def copy(self, table: str, data: Any) -> None:
        """Insert a pyarrow table; an indexed table's rows are indexed at commit.

        How: a small insert into a store without Kuzu-native indexes is ``CREATE`` statements, anything else a
        ``COPY``. Why: a transaction that ran a ``COPY`` checkpoints on commit (measured: ~130 ms p50 for one
        2-message session, ~10 ms with ``CREATE``), which every read waits out; but ``COPY`` is ~20x faster per row
        in bulk, and with Kuzu's own indexes (schema 1 stores keep their vector indexes) ``UNWIND ... CREATE`` lost
        rows (measured), so those stores always ``COPY``.
        """
        if data.num_rows == 0:
            return
        if self.create_small and data.num_rows <= CREATE_MAX_ROWS:
            self._create(table, data)
            self.created = True
        else:
            # Kuzu resolves ``FROM <name>`` against the calling frame's variables, hence the local name.
            frame = data  # noqa: F841
            _drain(self._conn.execute(f"COPY {table} FROM frame"))
            self.copied = True
        if table in INDEXED_TABLES:
            self.changes.append(Change(table, added=data))
        if table in KNOWN_TABLES:
            self.ids_added.setdefault(table, []).extend(data.column("id").to_pylist())

    def _create(self, table: str, data: Any) -> None:
        rows = data.to_pylist()
        ends = schema.rel_ends(table)
        if ends is None:
            props = ", ".join(
                f"{c}: {_typed(f'r.{c}', data.schema.field(c).type)}" for c in data.column_names
            )
            _run(self._conn, f"UNWIND $rows AS r CREATE (:{table} {{{props}}})", {"rows": rows})
            return
        src, dst = ends
        extra = [c for c in data.column_names if c not in ("from", "to")]
        if self.small_tables:
            # One statement for all edges: it scans both node tables, which is cheap while they are small.
            props = ", ".join(f"{c}: {_typed(f'r.{c}', data.schema.field(c).type)}" for c in extra)
            _run(
                self._conn,
                f"UNWIND $rows AS r MATCH (a:{src} {{id: r.from}}) WITH a, r MATCH (b:{dst} {{id: r.to}}) "
                f"CREATE (a)-[:{table} {{{props}}}]->(b)",
                {"rows": rows},
            )
            return
        # One statement per edge: ``UNWIND ... MATCH`` scans both node tables (Kuzu plans it as a hash join), ~1 s
        # for 140 edges between 100k-row tables.
        props = ", ".join(f"{c}: {_typed(f'${c}', data.schema.field(c).type)}" for c in extra)
        stmt = self._conn.prepare(
            f"MATCH (a:{src} {{id: $f}}), (b:{dst} {{id: $t}}) CREATE (a)-[:{table} {{{props}}}]->(b)"
        )
        for r in rows:
            _drain(self._conn.execute(stmt, {"f": r["from"], "t": r["to"], **{c: r[c] for c in extra}}))
