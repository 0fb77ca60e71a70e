"""Compaction: a bucket rewritten into a fresh Kuzu file, which then takes the old file's place.

Why. Kuzu 0.11.3 reuses little of what it frees: a checkpoint writes changed column chunks and edge lists anew, an
erased user's rows keep their slots, edge headers grow to a whole node group, so a bucket's file grows with the
operations it served rather than the data it holds (``store.freespace`` measures it; docs/benchmarks.md
"Compaction": a scope's bucket grew from 9.2 to 61 MB over 100 rounds of import, erase, consolidate and add_fact that
wrote 1.3 MB, and a bulk ingest of 2,000 rounds left 26 MB that a rewrite holds in 18.6). A fresh file written by
``COPY`` holds the rows and little else.

What is copied: every row of every table, the bucket's own ``Scope`` row (its schema, embedder and ``next_prefix``,
so no prefix is handed out twice) and every scope's (its prefix and its derived indexes' marks) with the rest,
verbatim, keys included. So each scope's rows keep their keys and ids, its derived indexes (keyed by id, their marks
in its ``Scope`` row) stay valid as they are and are not rebuilt, and nothing outside the bucket file changes.

How. Every table is read a page of internal offsets at a time and ``COPY``'d into a database created empty in the
work folder (``store.compact_swap``), edges too. A page of node rows is one whole Kuzu node group: each ``COPY``
then writes its node group once, where pages of 20,000 rows grew one node group by five out-of-place rewrites and
left 2.4 KB of free pages per round in the rewrite of a 100,000-round bucket (that scope after a maintenance
pass: 8,472 -> 6,108 bytes per round; docs/benchmarks.md, "Bytes per round in a bucket"). Such a ``COPY`` needs
more than the 256 MiB pool a bucket is served with (it failed from ~44,000 rounds), so the rewrite opens its
database with ``REWRITE_BUFFER_POOL_BYTES``: memory that only a compaction of a large bucket touches, and only
while it runs. A ``COPY`` of edges is unsafe only into a table whose checkpointed edges a rollback could take with
it (docs/architecture.md), and a failed rewrite is thrown away whole. Then every table's rows and edges are counted
on both sides; the rewrite replaces the file only if they agree. The swap is journaled (``store.compact_swap``): a
process killed at any moment leaves the old bucket or the new one, whole.

The caller makes sure nobody uses the bucket meanwhile (``DatabasePool.compact``: requests for its scopes wait), and
``compact`` closes it: the pool opens the new file for the next request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kuzu

from graphrecall.store import compact_swap, freespace, nodegroups, schema, statements
from graphrecall.store.database import DEFAULT_MAX_DB_SIZE, BucketDatabase
from graphrecall.store.database import _drain as drain
from graphrecall.store.statements import execute

log = logging.getLogger(__name__)

NODE_GROUP_ROWS = 1 << 17  # Kuzu 0.11.3's node group (2^17 rows)
PAGE = NODE_GROUP_ROWS  # node rows per COPY: one whole node group each (module docstring, "How")
REWRITE_BUFFER_POOL_BYTES = 1 << 30  # the rewrite's pool (100k rounds: peak RSS 1.8 -> 2.2 GB)
EDGE_PAGE = 200_000  # source rows whose edges go in one COPY (an edge is two keys, few properties)

OnStep = Callable[[str], None]
"""Told each step of a compaction as it is done: ``page`` after each ``COPY``, ``copied`` (the rewrite checked and
closed), ``closed`` (the old bucket closed), ``journal`` (the commit point), ``renamed``. For the crash tests."""


@dataclass(frozen=True)
class Compacted:
    """What a compaction did."""

    path: Path
    bytes_before: int
    bytes_after: int
    rows: int  # node rows copied, every table's
    edges: int
    seconds: float


def compact(bucket: BucketDatabase, *, on_step: OnStep | None = None) -> Compacted:
    """Rewrite the open ``bucket``, which nobody else uses, into a fresh file and put it in place (module
    docstring). The bucket is closed when this returns or raises; on an error the old file is the bucket still."""
    step = on_step or (lambda _: None)
    t0 = time.perf_counter()
    path = bucket.path
    try:
        with compact_swap.claimed(path) as work:
            with bucket.write_lock:
                bucket.checkpoint()  # the old file alone holds every commit (and closes cleanly)
                before = path.stat().st_size
                done = rewrite(bucket, compact_swap.new_file(path), step)
                step("copied")
                bucket.close()
            step("closed")
            about = {"bucket": path.name, "bytes_before": before, "counts": done.counts, "work": work.name}
            compact_swap.commit(path, about, on_journal=lambda: step("journal"))
            step("renamed")
    finally:
        bucket.close()
    freespace.record_rewrite(path, done.counts, done.table_bytes)
    result = Compacted(
        path=path,
        bytes_before=before,
        bytes_after=path.stat().st_size,
        rows=sum(n for t, n in done.counts.items() if ":" not in t),
        edges=sum(n for t, n in done.counts.items() if ":" in t),
        seconds=time.perf_counter() - t0,
    )
    log.info(
        "compacted bucket %s: %.1f MB -> %.1f MB in %.2f s (%d rows, %d edges copied)",
        path,
        result.bytes_before / 1e6,
        result.bytes_after / 1e6,
        result.seconds,
        result.rows,
        result.edges,
    )
    return result


@dataclass(frozen=True)
class Rewrite:
    counts: dict[str, int]  # rows by table, edges by ``REL:From:To`` (``freespace.counts``)
    table_bytes: dict[str, int]  # column pages of each node table in the rewrite


def rewrite(source: BucketDatabase, dest: Path, step: OnStep | None = None) -> Rewrite:
    """Every row and edge of ``source`` copied into a new database at ``dest``, then counted on both sides
    (``RuntimeError`` when a table differs). ``dest`` is closed on return."""
    tick = step or (lambda _: None)
    _check_schema(source)
    windows = _Windows(source)
    db = kuzu.Database(str(dest), buffer_pool_size=REWRITE_BUFFER_POOL_BYTES, max_db_size=DEFAULT_MAX_DB_SIZE)
    conn = kuzu.Connection(db)
    try:
        for stmt in schema.bucket_tables(source.dim):
            drain(conn.execute(stmt))
        for table in ("Scope", *schema.SCOPE_TABLES):
            ret = ", ".join(f"n.{c} AS {c}" for c in _columns(table))
            for lo, hi in windows(table, PAGE):
                frame = _arrow(source, f"MATCH (n:{table}) {_WITHIN.format(a='n')} RETURN {ret}", lo, hi)
                _copy(conn, table, frame, "")
                tick("page")
        for rel, src, dst in schema.edge_tables():
            props = "".join(f", r.{p} AS {p}" for p in schema.rel_props(rel)) if rel != "OWNS" else ""
            pair = f" (from='{src}', to='{dst}')" if rel == "OWNS" else ""
            for lo, hi in windows(src, EDGE_PAGE):
                frame = _arrow(
                    source,
                    f"MATCH (a:{src})-[r:{rel}]->(b:{dst}) {_WITHIN.format(a='a')} "
                    f"RETURN a.key AS from_key, b.key AS to_key{props}",
                    lo,
                    hi,
                )
                _copy(conn, rel, frame, pair)
                tick("page")
        # The rewrite's tables end wherever their live rows do: one may end with a lone row in its last scan
        # batch, which Kuzu 0.11.3 misreads in IN filters once checkpointed (store.nodegroups).
        drain(conn.execute("BEGIN TRANSACTION"))
        nodegroups.pad(lambda q, p: drain(execute(conn, q, p)), nodegroups.NODE_TABLES)
        drain(conn.execute("COMMIT"))
        drain(conn.execute("CHECKPOINT"))
        counts = freespace.counts(lambda q: drain(conn.execute(q)))
        sizes = freespace.table_bytes(lambda q: drain(conn.execute(q)))
    finally:
        statements.close(conn)
        db.close()
    old = freespace.counts(source.query)
    wrong = {t: (n, counts.get(t)) for t, n in old.items() if counts.get(t) != n}
    if wrong:
        raise RuntimeError(
            f"bucket {source.path}: the rewrite differs from it (table: (rows, copied)): {wrong}"
        )
    return Rewrite(counts=counts, table_bytes=sizes)


def _columns(table: str) -> list[str]:
    return schema.scope_columns() if table == "Scope" else ["key", *schema.column_names(table)]


def _check_schema(source: BucketDatabase) -> None:
    """Refuse a bucket holding a table or a column that the rewrite would not copy (a schema this code does not
    write: the rewrite would lose it), rather than trust that the schema version says it all."""
    found = {str(r[0]) for r in source.query("CALL show_tables() RETURN name")}
    known = {"Scope", *schema.SCOPE_TABLES, *schema.rel_names(), "OWNS"}
    if found != known:
        raise RuntimeError(
            f"bucket {source.path}: tables {sorted(found ^ known)} are not what a rewrite copies"
        )
    for table in ("Scope", *schema.SCOPE_TABLES):
        dead = schema.DEAD_COLUMNS.get(table, ())
        have = [
            c for r in source.query(f"CALL table_info('{table}') RETURN name") if (c := str(r[0])) not in dead
        ]
        if have != _columns(table):
            raise RuntimeError(
                f"bucket {source.path}: {table} has columns {have}, a rewrite copies {_columns(table)}"
            )
    for rel in schema.rel_names():
        have = [str(r[0]) for r in source.query(f"CALL table_info('{rel}') RETURN name")]
        if have != schema.rel_props(rel):
            raise RuntimeError(
                f"bucket {source.path}: {rel} has properties {have}, a rewrite copies those of the schema"
            )


_WITHIN = "WHERE offset(ID({a})) >= $lo AND offset(ID({a})) <= $hi"


class _Windows:
    """Ranges of internal offsets that cover a table's rows, ``size`` rows each (no sort of the whole table in
    Kuzu); each table's offsets are read once."""

    def __init__(self, source: BucketDatabase) -> None:
        self.source = source
        self._offsets: dict[str, list[int]] = {}

    def __call__(self, table: str, size: int) -> Iterator[tuple[int, int]]:
        if table not in self._offsets:
            frame = _arrow(self.source, f"MATCH (n:{table}) RETURN offset(ID(n)) AS o")
            self._offsets[table] = sorted(frame.column("o").to_pylist())
        offsets = self._offsets[table]
        for start in range(0, len(offsets), size):
            yield offsets[start], offsets[min(len(offsets), start + size) - 1]


def _arrow(source: BucketDatabase, cypher: str, lo: int | None = None, hi: int | None = None) -> Any:
    params = {} if lo is None else {"lo": lo, "hi": hi}
    with source.gate.shared():
        result = execute(source.reader(), cypher, params)
        assert not isinstance(result, list)
        try:
            return result.get_as_arrow(chunk_size=100_000)
        finally:
            result.close()


def _copy(conn: kuzu.Connection, table: str, frame: Any, options: str) -> None:
    if frame.num_rows:
        # Kuzu resolves ``FROM <name>`` against the calling frame's variables, hence the local name.
        drain(conn.execute(f"COPY {table} FROM frame{options}"))
