"""A database per scope, as graphrecall wrote them before buckets (``<root>/<org>/<user>.kuzu``, schemas 1 to 5):
opened only to be moved into the scope's bucket (``store.move``).

Why it is kept: a store written by earlier code upgrades in place. Such a file is opened here, brought to schema 5
by the upgrades it always had (each idempotent, so a crash half-way is finished by the next open), read whole and
copied into its bucket in one transaction; the pool then deletes it. Nothing here writes rows a user asked for.

The upgrades, as they were: schema 1 -> 2 drops Kuzu's full-text indexes (the derived indexes replaced them) and
adds ``Meta.index_marks``; 2 -> 3 adds ``Fact.reinforcement`` (each fact's distinct source sessions); 3 -> 4 the empty
``Passage`` table and ``PASSAGE_OF``; 4 -> 5 ``Message.lang`` (every message's language detected from its text).
Schema 1's HNSW indexes stay in the old file and go with it: the bucket has none.
"""

from __future__ import annotations

import contextlib
import importlib.util  # noqa: F401  (kuzu's pyarrow scan path needs importlib.util imported)
import logging
from pathlib import Path
from typing import Any

import kuzu

from graphrecall.embed.spec import spec_of
from graphrecall.errors import EmbedderMismatch, SchemaMismatch, StoreBusy
from graphrecall.store import schema, statements
from graphrecall.store.derived import parse_marks
from graphrecall.store.recovery import recover
from graphrecall.store.statements import execute
from graphrecall.store.vectors import from_half, is_half
from graphrecall.text import message_language

log = logging.getLogger(__name__)

LEGACY_SUFFIXES = (".kuzu", ".kuzu.wal", ".kuzu.lock", ".kuzu.shadow", ".kuzu.fts-rebuild")
"""What a database per scope is on disk (its derived indexes, ``.kuzu.idx``, stay: a bucket keeps them)."""

# What opening a store of each older schema does to it (said in the move's log line).
UPGRADE_WORK = {
    1: "dropped Kuzu's full-text indexes, added Fact.reinforcement, the Passage table and Message.lang",
    2: "added Fact.reinforcement, the Passage table (`graphrecall backfill-passages` fills it) and Message.lang",
    3: "added the Passage table (long rounds stored before keep their pooled vector only until "
    "`graphrecall backfill-passages` or Memory.backfill_passages embeds their passages) and Message.lang",
    4: "added Message.lang (each message's language, detected from its text)",
}
# Messages read per query while an upgrade detects their languages (``_upgrade_from_4``).
LANG_BACKFILL_PAGE = 2_000


def legacy_path(root: Path, org_id: str, user_id: str) -> Path:
    return Path(root) / org_id / f"{user_id}.kuzu"


class LegacyDatabase:
    """One old scope database, upgraded to schema 5 on open; read-only afterwards. Close it with ``close``."""

    def __init__(
        self, path: Path, *, embedder_id: str, dim: int, buffer_pool_size: int, max_db_size: int
    ) -> None:
        self.path = path
        recover(path)
        try:
            self._db = kuzu.Database(str(path), buffer_pool_size=buffer_pool_size, max_db_size=max_db_size)
        except RuntimeError as e:
            if "lock" in str(e).lower():
                raise StoreBusy(f"database {path} is held by another process: {e}") from e
            raise
        self._conn = kuzu.Connection(self._db)
        try:
            self.upgraded_from, self.marks = self._ensure_schema(embedder_id, dim)
        except BaseException:
            self.close()
            raise

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        return _run(self._conn, cypher, params)

    def arrow(self, cypher: str, params: dict[str, Any] | None = None) -> Any:
        """A query's result as a pyarrow table (columns named as the query returns them)."""
        result = execute(self._conn, cypher, params)
        assert not isinstance(result, list)
        try:
            return result.get_as_arrow(chunk_size=100_000)
        finally:
            result.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            statements.close(self._conn)
        self._db.close()

    # -- schema ------------------------------------------------------------------------------------------------
    def _ensure_schema(self, embedder_id: str, dim: int) -> tuple[int, dict[str, int]]:
        """(the schema version upgraded from, or 0; the index marks)."""
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
            upgraded, version = upgraded or 4, 5
        elif version != schema.LEGACY_SCHEMA_VERSION:
            raise SchemaMismatch(
                f"database {self.path} has schema version {version}; this graphrecall reads versions 1 to "
                f"{schema.LEGACY_SCHEMA_VERSION} of a database per scope (a newer graphrecall wrote it?)"
            )
        marks = parse_marks(self.query("MATCH (m:Meta {key: 'meta'}) RETURN m.index_marks")[0][0])
        return upgraded, marks

    def _upgrade_from_1(self) -> None:
        columns = {r[1] for r in self.query("CALL table_info('Meta') RETURN *")}
        if "index_marks" not in columns:
            self.query("ALTER TABLE Meta ADD index_marks STRING DEFAULT '{}'")
        existing = {(r[0], r[1]) for r in self.query("CALL show_indexes() RETURN table_name, index_name")}
        for table, name, _ in schema.FTS_INDEXES:
            if (table, name) in existing:
                self.query(f"CALL DROP_FTS_INDEX('{table}', '{name}')")
        self.query("MATCH (m:Meta {key: 'meta'}) SET m.schema_version = 2")
        self.query("CHECKPOINT")
        Path(str(self.path) + ".fts-rebuild").unlink(missing_ok=True)  # schema 1's repair marker

    def _upgrade_from_2(self) -> None:
        columns = {r[1] for r in self.query("CALL table_info('Fact') RETURN *")}
        if "reinforcement" not in columns:
            self.query("ALTER TABLE Fact ADD reinforcement INT64 DEFAULT 1")
        self.query(
            "MATCH (f:Fact)-[:FACT_FROM]->(m:Message) WITH f, count(DISTINCT m.session_id) AS n "
            "SET f.reinforcement = CASE WHEN n > 1 THEN n ELSE 1 END"
        )
        self.query("MATCH (m:Meta {key: 'meta'}) SET m.schema_version = 3")
        self.query("CHECKPOINT")

    def _upgrade_from_3(self, dim: int) -> None:
        tables = {row[1] for row in self.query("CALL show_tables() RETURN *")}
        if "Passage" not in tables:
            self.query(schema.PASSAGE_TABLE.format(vec=f"FLOAT[{dim}]"))
        if "PASSAGE_OF" not in tables:
            self.query(schema.PASSAGE_REL)
        self.query("MATCH (m:Meta {key: 'meta'}) SET m.schema_version = 4")
        self.query("CHECKPOINT")

    def _upgrade_from_4(self) -> None:
        columns = {r[1] for r in self.query("CALL table_info('Message') RETURN *")}
        if "lang" not in columns:
            self.query("ALTER TABLE Message ADD lang STRING DEFAULT ''")
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
        self.query("BEGIN TRANSACTION")
        try:
            for start in range(0, len(found), LANG_BACKFILL_PAGE):
                self.query(
                    "UNWIND $rows AS r MATCH (m:Message {id: r.id}) SET m.lang = r.lang",
                    {"rows": found[start : start + LANG_BACKFILL_PAGE]},
                )
            self.query(
                "MATCH (m:Meta {key: 'meta'}) SET m.schema_version = $v", {"v": schema.LEGACY_SCHEMA_VERSION}
            )
        except BaseException:
            with contextlib.suppress(RuntimeError):
                self.query("ROLLBACK")
            raise
        self.query("COMMIT")
        self.query("CHECKPOINT")


def _run(conn: kuzu.Connection, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    result = execute(conn, cypher, params)
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


def write_legacy(path: Path, source: Any, *, embedder_id: str, dim: int, marks: dict[str, int]) -> None:
    """A database per scope at ``path`` (schema 5, as the last code before buckets wrote it) holding every row of
    ``source`` (a ``store.move.Source``): how tests make stores of the earlier layout with rows of their own (the
    frozen fixtures under ``tests/data/stores`` were written by that code itself)."""
    import pyarrow as pa

    from graphrecall.models import utcnow
    from graphrecall.store.derived import dump_marks

    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    try:
        for stmt in [*schema.legacy_node_tables(dim), *schema.LEGACY_REL_TABLES]:
            _run(conn, stmt)
        _run(
            conn,
            "CREATE (:Meta {key: 'meta', schema_version: $v, embedder_id: $e, dim: $d, created_at: $t, index_marks: $m})",
            {
                "v": schema.LEGACY_SCHEMA_VERSION,
                "e": embedder_id,
                "d": dim,
                "t": utcnow(),
                "m": dump_marks(marks),
            },
        )
        for table in schema.SCOPE_TABLES:
            new = schema.NEW_IN_BUCKETS.get(table, ())
            columns = ", ".join(f"n.{c} AS {c}" for c in schema.column_names(table) if c not in new)
            frame = source.arrow(f"{source.nodes(table)} RETURN {columns}")
            for c in frame.column_names:  # a bucket's half-precision vectors, as float32 (``store.vectors``)
                if is_half(table, c) and frame.num_rows:
                    frame = frame.set_column(frame.column_names.index(c), c, from_half(frame.column(c), dim))
            if table == "Round" and frame.num_rows:  # a bucket's rounds keep their texts in their messages
                frame = _with_round_texts(frame, source)
            if frame.num_rows:
                conn.execute(f"COPY {table} FROM frame")
        for rel in schema.rel_names():
            src, dst = schema.rel_ends(rel) or ("", "")
            extra = "".join(f", r.{p} AS {p}" for p in schema.rel_props(rel))
            edges = source.arrow(
                f"{source.nodes(src, 'a')}-[r:{rel}]->(b:{dst}) RETURN a.id AS a, b.id AS b{extra}"
            )
            if edges.num_rows:
                frame = pa.table({"from": edges.column("a"), "to": edges.column("b"), **{
                    p: edges.column(p) for p in schema.rel_props(rel)}})  # fmt: skip
                conn.execute(f"COPY {rel} FROM frame")
        rounds = source.arrow(f"{source.nodes('Round')} RETURN n.id AS id, n.message_ids AS m").to_pylist()
        if rounds:  # a database per scope had an edge from each round to each of its messages
            frame = pa.table({"from": [r["id"] for r in rounds for _ in r["m"] or []],
                              "to": [m for r in rounds for m in r["m"] or []]})  # fmt: skip
            conn.execute("COPY HAS_MESSAGE FROM frame")
        _run(conn, "CHECKPOINT")
    finally:
        statements.close(conn)
        db.close()


def _with_round_texts(frame: Any, source: Any) -> Any:
    """A bucket's rounds with the ``text`` and ``user_text`` columns of a database per scope, made from their
    messages (``rows.round_texts``), in the legacy column order."""
    import pyarrow as pa

    from graphrecall.store.rows import round_texts_of

    rows = source.arrow(
        f"{source.nodes('Message', 'm')} RETURN m.id AS id, m.role AS role, m.text AS text"
    ).to_pylist()
    messages = {r["id"]: (r["role"], r["text"] or "") for r in rows}
    texts = [round_texts_of(ids or [], messages) for ids in frame.column("message_ids").to_pylist()]
    columns = {c: frame.column(c) for c in frame.column_names}
    columns["text"] = pa.array([t for t, _ in texts], pa.string())
    columns["user_text"] = pa.array([u for _, u in texts], pa.string())
    return pa.table({c: columns[c] for c in schema.column_names("Round", legacy=True)})
