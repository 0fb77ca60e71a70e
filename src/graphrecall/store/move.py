"""A scope's rows copied whole into a bucket, in one transaction: from a database per scope of earlier code (the
upgrade, ``move_legacy``) or from another bucket (``graphrecall reembed``'s swap, ``copy_scope``).

Why one transaction: the scope's ``Scope`` row is created in it, so the bucket holds either the whole scope or none
of it; a process killed half-way leaves the source as it was, and the next open copies again. Except for one Kuzu
0.11.3 defect: a process killed while the commit of a transaction that ran a ``COPY`` is being checkpointed (such a
commit checkpoints at once) reopens with part of that transaction (measured with Kuzu alone: a kill 20-40 ms into an
80 ms commit of 10 ``CREATE``s and a 200,000-row ``COPY`` kept the 10 rows and none of the 200,000; in killed
``graphrecall reembed`` runs, once the sessions without the messages and rounds, twice the messages and rounds
without the edges to their sessions; docs/architecture.md). So a bucket that holds the scope may hold it torn.
Whoever resumes a copy compares the rows per table and edges per relationship with the source (``torn``), which is
kept until the copy is known whole, and a torn copy is dropped and made again (its keys get a new prefix, so what
Kuzu kept of the first one cannot collide).

The source is read a page of rows at a time and each page is a ``COPY`` (the only bulk insert Kuzu has); keys get
the new prefix, ids and every column stay as they are, and the derived indexes' marks come along, so a scope's
``<user>.kuzu.idx/`` built over the source is still valid over the copy (the ids it holds did not change).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from graphrecall.store import schema
from graphrecall.store.database import BucketDatabase, Member, insert_edges, insert_rows
from graphrecall.store.legacy import LEGACY_SUFFIXES, UPGRADE_WORK, LegacyDatabase
from graphrecall.store.statements import execute
from graphrecall.store.vectors import is_half, to_half

log = logging.getLogger(__name__)

PAGE = 20_000  # rows per COPY: a page of 384-d rounds is ~60 MB of arrow


class Source(Protocol):
    """What a scope is copied from."""

    def arrow(self, cypher: str, params: dict[str, Any] | None = None) -> Any: ...

    def nodes(self, table: str, alias: str = "n") -> str:
        """The ``MATCH`` clause that binds the scope's rows of ``table`` to ``alias`` (a pattern may follow)."""
        ...

    def column(self, table: str, name: str, alias: str = "n") -> str:
        """The ``RETURN`` item of column ``name`` of ``table`` (a constant for a column the source lacks)."""
        ...


class LegacySource:
    """A database per scope: every row is the scope's."""

    def __init__(self, db: LegacyDatabase) -> None:
        self.db = db

    def arrow(self, cypher: str, params: dict[str, Any] | None = None) -> Any:
        return self.db.arrow(cypher, params)

    def nodes(self, table: str, alias: str = "n") -> str:
        return f"MATCH ({alias}:{table})"

    def column(self, table: str, name: str, alias: str = "n") -> str:
        if name in schema.NEW_IN_BUCKETS.get(table, ()):
            return f"CAST(NULL AS {schema.NEW_COLUMN_TYPES[name]}) AS {name}"  # not in a schema-5 table
        return f"{alias}.{name} AS {name}"


class BucketSource:
    """A scope of another bucket."""

    def __init__(self, bucket: BucketDatabase, user_id: str) -> None:
        self.bucket, self.user_id = bucket, user_id

    def arrow(self, cypher: str, params: dict[str, Any] | None = None) -> Any:
        bound = dict(params or {})
        bound["scope"] = self.user_id
        conn = self.bucket.reader()
        result = execute(conn, cypher, bound)
        assert not isinstance(result, list)
        try:
            return result.get_as_arrow(chunk_size=100_000)
        finally:
            result.close()

    def nodes(self, table: str, alias: str = "n") -> str:
        return f"{schema.MATCH_SCOPE}MATCH {schema.owned(alias, table)}"

    def column(self, table: str, name: str, alias: str = "n") -> str:
        return f"{alias}.{name} AS {name}"


def _pages(source: Source, table: str, columns: str) -> Iterator[pa.Table]:
    """The scope's rows of ``table``, ``PAGE`` internal offsets at a time (no sort of the whole table)."""
    pattern = source.nodes(table)
    offsets = sorted(source.arrow(f"{pattern} RETURN offset(ID(n)) AS o").column("o").to_pylist())
    for start in range(0, len(offsets), PAGE):
        yield source.arrow(
            f"{pattern} WHERE offset(ID(n)) >= $a AND offset(ID(n)) <= $b RETURN {columns}",
            {"a": offsets[start], "b": offsets[min(len(offsets), start + PAGE) - 1]},
        )


def bucket_layout(table: str, page: pa.Table, dim: int) -> pa.Table:
    """A page of rows as a bucket stores them: a vector a database per scope kept as ``FLOAT[dim]`` becomes half
    precision where the bucket keeps it so (``store.vectors``); a page from another bucket is already so."""
    for column in page.column_names:
        if is_half(table, column) and not pa.types.is_int16(page.schema.field(column).type.value_type):
            page = page.set_column(page.column_names.index(column), column, to_half(page.column(column), dim))
    return page


def copy_rows(bucket: BucketDatabase, user_id: str, prefix: str, source: Source) -> int:
    """Inside the bucket's open transaction: every row and edge of ``source`` as the scope's (keys with ``prefix``,
    the rows of ``schema.ANCHORED`` tables owned by the ``Scope`` row ``user_id``). Returns the rows copied."""
    conn = bucket.writer
    copied = 0
    for table in schema.SCOPE_TABLES:
        names = schema.column_names(table)
        columns = ", ".join(source.column(table, c) for c in names)
        for page in _pages(source, table, columns):
            if page.num_rows == 0:
                continue
            page = bucket_layout(table, page, bucket.dim)
            keyed = page.add_column(0, "key", pa.array([prefix + i for i in page.column("id").to_pylist()]))
            if table in schema.ANCHORED:  # with their OWNS edges, never copied (database.WriteTxn.copy)
                insert_rows(conn, table, keyed, user_id)
            else:
                frame = keyed  # noqa: F841  (COPY reads it by name)
                conn.execute(f"COPY {table} FROM frame")
            copied += page.num_rows
    for rel in schema.rel_names():
        src, dst = schema.rel_ends(rel) or ("", "")
        props = schema.rel_props(rel)
        extra = "".join(f", r.{p} AS {p}" for p in props)
        edges = source.arrow(
            f"{source.nodes(src, 'a')}-[r:{rel}]->(b:{dst}) RETURN a.id AS a, b.id AS b{extra}"
        )
        if edges.num_rows == 0:
            continue
        cols: dict[str, Any] = {
            "from": [prefix + i for i in edges.column("a").to_pylist()],
            "to": [prefix + i for i in edges.column("b").to_pylist()],
        }
        for p in props:
            cols[p] = edges.column(p)
        insert_edges(conn, rel, pa.table(cols))  # one by one: a rolled-back COPY of edges loses others' edges
    return copied


def counts(source: Source) -> dict[str, int]:
    """The scope's rows per table and edges per relationship, as ``copy_rows`` reads them from ``source``."""
    got: dict[str, int] = {}
    for table in schema.SCOPE_TABLES:
        got[table] = _count(source, f"{source.nodes(table)} RETURN count(n) AS c")
    for rel in schema.rel_names():
        src, dst = schema.rel_ends(rel) or ("", "")
        got[rel] = _count(source, f"{source.nodes(src, 'a')}-[r:{rel}]->(b:{dst}) RETURN count(r) AS c")
    return got


def _count(source: Source, cypher: str) -> int:
    column = source.arrow(cypher).column("c")
    return int(column[0].as_py()) if len(column) else 0


def torn(bucket: BucketDatabase, user_id: str, source: Source) -> dict[str, tuple[int, int]]:
    """What the bucket's copy of the scope ``user_id`` lacks, or holds too much of, against ``source``: ``{table:
    (in the bucket, in the source)}``, empty when the copy is whole (module docstring: a kill during the checkpoint
    of the copy's commit can keep the ``Scope`` row and lose the rows a ``COPY`` wrote)."""
    have, want = counts(BucketSource(bucket, user_id)), counts(source)
    return {t: (have.get(t, 0), n) for t, n in want.items() if have.get(t, 0) != n}


def drop_torn(bucket: BucketDatabase, user_id: str, source: Source, what: str) -> bool:
    """Drop the bucket's copy of ``user_id`` if it is torn (``torn``), with a warning naming ``what`` was copied;
    returns whether it was. The caller then copies again."""
    missing = torn(bucket, user_id, source)
    if not missing:
        return False
    log.warning(
        "bucket %s: the copy of %s that a killed process committed is not whole (rows in the bucket vs the source: "
        "%s; Kuzu 0.11.3 loses a COPY whose commit's checkpoint was cut off); it is dropped and copied again",
        bucket.path,
        what,
        ", ".join(f"{t} {have}/{want}" for t, (have, want) in sorted(missing.items())),
    )
    bucket.drop_scope(user_id)
    return True


def copy_scope(bucket: BucketDatabase, user_id: str, source: Source, marks: dict[str, int]) -> Member:
    """The scope ``user_id`` created in ``bucket`` with every row of ``source``, in one durable transaction; the
    bucket must not hold it yet."""
    with bucket.write_lock:
        if bucket.member(user_id) is not None:
            raise RuntimeError(f"bucket {bucket.path} already holds {user_id!r}")
        bucket.writer.execute("BEGIN TRANSACTION")
        try:
            prefix = bucket.create_scope_row(user_id, marks)
            copy_rows(bucket, user_id, prefix, source)
        except BaseException:
            bucket.rollback()
            raise
        bucket.commit()
        bucket.checkpoint()
        member = Member(prefix=prefix, marks=dict(marks))
        bucket.adopt(user_id, member)
        return member


def move_legacy(
    bucket: BucketDatabase, user_id: str, legacy: Path, *, buffer_pool_size: int, max_db_size: int
) -> None:
    """Move the database per scope at ``legacy`` (``<root>/<org>/<user>.kuzu``, any schema from 1) into its bucket,
    then delete it (its derived indexes stay: same ids, same marks). A move that committed before the process died
    left the bucket holding the scope: the old file is then only deleted, once the copy is known whole (``torn``;
    a torn one is made again). One log line says what was done."""
    t0 = time.perf_counter()
    old = LegacyDatabase(
        legacy,
        embedder_id=bucket.embedder_id,
        dim=bucket.dim,
        buffer_pool_size=buffer_pool_size,
        max_db_size=max_db_size,
    )
    try:
        source = LegacySource(old)
        if bucket.member(user_id) is not None:
            drop_torn(bucket, user_id, source, f"the store {legacy}")
        moved = bucket.member(user_id) is None
        if moved:
            rows = counts(source)
            copy_scope(bucket, user_id, source, old.marks)
            upgraded = old.upgraded_from
    finally:
        old.close()
    if moved:
        how = f" (upgraded from schema {upgraded}: {UPGRADE_WORK[upgraded]})" if upgraded else ""
        log.warning(
            "moved the store %s into its bucket %s in %.2f s%s: %d sessions, %d rounds, %d facts; the old file is "
            "deleted",
            legacy,
            bucket.path,
            time.perf_counter() - t0,
            how,
            rows["Session"],
            rows["Round"],
            rows["Fact"],
        )
    for suffix in LEGACY_SUFFIXES:
        Path(str(legacy).removesuffix(".kuzu") + suffix).unlink(missing_ok=True)
