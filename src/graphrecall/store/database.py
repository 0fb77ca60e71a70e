"""One scope's Kuzu database: schema, embedder check, the single-writer lock, and per-thread read connections.

Kuzu allows one write transaction per database at a time, and a second concurrent writer fails at once instead of
waiting; worse, after a failed ``BEGIN`` the next query on that connection crashes the process. So every write goes
through ``ScopeDatabase.write()``: one dedicated connection, one ``threading.Lock``, ``BEGIN``/``COMMIT`` around the
whole batch and ``ROLLBACK`` on error, so a failed batch leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import importlib.util  # noqa: F401  (kuzu's pyarrow scan path needs importlib.util imported)
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kuzu

from graphrecall.errors import EmbedderMismatch, SchemaMismatch, StoreBusy
from graphrecall.models import utcnow
from graphrecall.store import schema
from graphrecall.store.recovery import recover
from graphrecall.text import STOPWORDS

log = logging.getLogger(__name__)

DEFAULT_BUFFER_POOL = 64 << 20
DEFAULT_MAX_DB_SIZE = 1 << 36  # 64 GiB of address space per database, not memory


class ScopeDatabase:
    """Owns a ``kuzu.Database`` file and the connections onto it."""

    def __init__(
        self,
        path: Path,
        *,
        embedder_id: str,
        dim: int,
        buffer_pool_size: int = DEFAULT_BUFFER_POOL,
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
        self._copied: set[str] = set()  # tables COPYed into by the open write transaction
        self._gate = _ReadGate()
        self._writer = kuzu.Connection(self._db)
        self._local = threading.local()
        self._conns: list[kuzu.Connection] = [self._writer]
        self._conns_lock = threading.Lock()
        self.in_use = 0
        self.closed = False
        self._ensure_schema(embedder_id, dim)
        if (
            self._fts_marker.exists()
        ):  # the last owner rolled back a write and died before repairing the index
            with self.write_lock:
                self._rebuild_fts(self._fts_marker.read_text().split())

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
    def write(self) -> Iterator[WriteTxn]:
        """The only way to write: serialized by a lock, atomic by a transaction."""
        with self.write_lock:
            if self._active:  # a nested write() on the same thread joins the open transaction
                yield WriteTxn(self._writer, self._copied)
                return
            self._copied = set()
            txn = WriteTxn(self._writer, self._copied)
            _run(self._writer, "BEGIN TRANSACTION")
            self._active = True
            try:
                yield txn
            except BaseException:
                self._rollback()
                raise
            else:
                with self._gate.exclusive():  # COMMIT may checkpoint, which needs every read to have left
                    _run(self._writer, "COMMIT")
            finally:
                self._active = False

    _active = False

    def _rollback(self) -> None:
        # Kuzu 0.11.3: once a transaction that COPYed into a full-text-indexed table is rolled back, the next COPY
        # into that table is silently left out of the index (for good: reopening does not help), and deleting one
        # of those rows later crashes the process; a single CREATE to "heal" it crashes too, now and then
        # (measured, docs/architecture.md). Rebuilding the table's FTS index is what reliably helps, so that is
        # done right after the rollback. A marker file makes the next open finish the job if we die before that.
        stale = sorted({t for t, _, _ in schema.FTS_INDEXES} & self._copied)
        if stale:
            self._fts_marker.write_text("\n".join(stale))
        try:
            _run(self._writer, "ROLLBACK")
        except RuntimeError as e:  # a failed statement already rolled the transaction back
            log.debug("rollback after error: %s", e)
        if stale:
            self._rebuild_fts(stale)

    @property
    def _fts_marker(self) -> Path:
        return Path(str(self.path) + ".fts-rebuild")

    def _rebuild_fts(self, tables: list[str]) -> None:
        """Drop and re-create the FTS indexes of ``tables`` from their rows (auto-commit DDL on the writer)."""
        t0 = time.perf_counter()
        with self._gate.exclusive():
            for table, name, column in schema.FTS_INDEXES:
                if table in tables:
                    _run(self._writer, f"CALL DROP_FTS_INDEX('{table}', '{name}')")
                    _run(self._writer, schema.fts_index_statement(table, name, column))
        self._fts_marker.unlink(missing_ok=True)
        log.warning(
            "rebuilt the full-text index of %s in %s after a rolled-back write (%.2f s)",
            ", ".join(tables),
            self.path,
            time.perf_counter() - t0,
        )

    # -- schema ------------------------------------------------------------------------------------------------
    def _ensure_schema(self, embedder_id: str, dim: int) -> None:
        tables = {row[1] for row in self.query("CALL show_tables() RETURN *")}
        if "Meta" not in tables:
            self._create_schema(embedder_id, dim)
            return
        rows = self.query("MATCH (m:Meta {key: 'meta'}) RETURN m.schema_version, m.embedder_id, m.dim")
        if not rows:
            raise SchemaMismatch(f"database {self.path} has no Meta node; it was not created by graphrecall")
        version, stored_id, stored_dim = rows[0]
        if stored_id != embedder_id or stored_dim != dim:
            raise EmbedderMismatch(
                f"database {self.path} was built with embedder {stored_id!r} (dim {stored_dim}); "
                f"this Memory uses {embedder_id!r} (dim {dim}). Open it with the same embedder, or export and "
                "re-import into a new store."
            )
        if version != schema.SCHEMA_VERSION:
            raise SchemaMismatch(
                f"database {self.path} has schema version {version}; this graphrecall expects {schema.SCHEMA_VERSION}"
            )

    def _create_schema(self, embedder_id: str, dim: int) -> None:
        with self.write_lock:
            # DDL and index creation run in auto-commit mode (Kuzu does not allow them in one manual transaction).
            for stmt in [*schema.node_tables(dim), *schema.REL_TABLES, *schema.index_statements()]:
                _run(self._writer, stmt)
            _run(self._writer, "UNWIND $ws AS w CREATE (:Stopword {sw: w})", {"ws": sorted(STOPWORDS)})
            _run(
                self._writer,
                "CREATE (:Meta {key: 'meta', schema_version: $v, embedder_id: $e, dim: $d, created_at: $t})",
                {"v": schema.SCHEMA_VERSION, "e": embedder_id, "d": dim, "t": utcnow()},
            )
            # A new database is durable as a whole before its first write: recovery never has to replay DDL.
            _run(self._writer, "CHECKPOINT")

    def close(self) -> None:
        if self.closed:
            return
        with self.write_lock:
            self.closed = True
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

    def __init__(self, conn: kuzu.Connection, copied: set[str] | None = None) -> None:
        self._conn = conn
        self.copied = copied if copied is not None else set()  # tables COPYed into in this transaction

    def execute(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        return _run(self._conn, cypher, params)

    def copy(self, table: str, data: Any) -> None:
        """Insert a pyarrow table with ``COPY``, whatever its size.

        Why always COPY: it is ~20x faster per row than ``CREATE``, and the alternatives lose data in Kuzu 0.11.3
        (measured): a multi-row ``UNWIND ... CREATE`` leaves all but one row out of the full-text index, and
        ``UNWIND ... CREATE`` into several vector-indexed tables in one transaction lost rows at commit. The price
        is that a transaction which ran a COPY checkpoints on commit (~0.35 s even for one row), so a small write
        costs a checkpoint; correctness first.
        """
        if data.num_rows == 0:
            return
        # Kuzu resolves ``FROM <name>`` against the calling frame's variables, hence the local name.
        frame = data  # noqa: F841
        self.copied.add(table)
        _drain(self._conn.execute(f"COPY {table} FROM frame"))
