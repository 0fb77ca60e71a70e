"""The derived indexes of one scope (``<user>.kuzu.idx/``, one per scope, whatever bucket holds its rows): what each covers, the marks that prove it caught up, and keeping them
in step with every committed write.

Why here: Kuzu is the store of record, so the indexes beside it (``graphrecall.index``: tantivy for BM25, an exact
scan or usearch for vectors) are maintained by the one place every write passes through, ``ScopeDatabase.write()``.
A ``COPY`` into an indexed table and an ``unindex`` of deleted ids are recorded on the transaction; the Kuzu commit
also bumps a per-table counter in the scope's ``Scope`` row (``schema.MARK_COLUMNS``); after the commit the changes are applied to
the indexes, each of which stores the counter it reached. On open, an index whose counter differs from Kuzu's (a
crash between the two commits), or that is missing or damaged, is rebuilt from Kuzu. So an index can lag Kuzu only
between a commit and the end of that same ``write()`` call, and never survives a restart stale.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import pyarrow as pa

from graphrecall.index import IndexSpace, ScopeIndexes
from graphrecall.index.lexical import Row
from graphrecall.index.vector import F32
from graphrecall.models import Round
from graphrecall.store.rows import round_texts_of
from graphrecall.store.schema import INDEX_ONLY, MARK_COLUMNS, MATCH_SCOPE, owned
from graphrecall.store.vectors import matrix


class Readable(Protocol):
    """What a rebuild reads through: ``ScopeDatabase.query``."""

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]: ...

    def arrow(self, cypher: str, params: dict[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True)
class Derived:
    """One derived index: its name (unique across kinds; the directory is ``lex-<name>`` or ``vec-<name>``), and
    for a lexical index the columns stored with each document (``payload``), returned by id without Kuzu."""

    name: str
    kind: Literal["lexical", "vector"]
    table: str
    column: str
    payload: tuple[str, ...] = ()


# What ``fetch_rounds`` needs to build a ``models.Round``: the retriever reads ~40 rounds per search, and 40 Kuzu
# point lookups cost ~20 ms even at 1k rounds, against ~2 ms from the lexical index's stored documents.
ROUND_PAYLOAD = ("session_id", "idx", "text", "user_text", "at", "message_ids")

DERIVED: tuple[Derived, ...] = (
    Derived("round_terms", "lexical", "Round", "terms", ROUND_PAYLOAD),
    Derived("round_user", "vector", "Round", "embedding"),
    Derived("round_reply", "vector", "Round", "reply_embedding"),
    Derived("round_passage", "vector", "Passage", "embedding"),
    Derived("fact_terms", "lexical", "Fact", "terms"),
    Derived("fact_vec", "vector", "Fact", "embedding"),
    Derived("event_terms", "lexical", "Event", "terms"),
    Derived("event_vec", "vector", "Event", "embedding"),
)
BY_NAME = {d.name: d for d in DERIVED}
INDEXED_TABLES = frozenset(d.table for d in DERIVED)
PAGE = 5000


@dataclass
class Change:
    """What one statement of a write transaction did to an indexed table: ids deleted, or rows COPYed in."""

    table: str
    deleted: list[str] = field(default_factory=list)
    added: pa.Table | None = None


def parse_marks(raw: str | None) -> dict[str, int]:
    """Marks kept as one JSON string: a schema 5 store's ``Meta`` row, a schema 6 bucket's ``Scope`` rows."""
    return {str(k): int(v) for k, v in json.loads(raw or "{}").items()}


RETURN_MARKS = ", ".join(f"s.{c}" for c in MARK_COLUMNS.values())
"""The ``RETURN`` list of a scope's marks (``MATCH (s:Scope ...)``), in ``MARK_COLUMNS`` order: ``marks_of``."""


def marks_of(values: Sequence[Any]) -> dict[str, int]:
    """A scope's marks from its ``MARK_COLUMNS`` values: a table never bumped (null or 0) has none, as in the JSON
    these columns replaced (a mark is never 0: it starts at 1)."""
    return {table: int(v) for table, v in zip(MARK_COLUMNS, values, strict=True) if v}


def mark_params(marks: Mapping[str, int], tables: Iterable[str] | None = None) -> dict[str, int]:
    """The ``MARK_COLUMNS`` values of ``marks`` (of ``tables`` only, when given), by column name."""
    return {MARK_COLUMNS[t]: int(marks.get(t, 0)) for t in (MARK_COLUMNS if tables is None else tables)}


def set_marks(params: Mapping[str, int]) -> str:
    """The ``SET`` clause that writes ``mark_params`` into the ``Scope`` row bound to ``s``."""
    return "SET " + ", ".join(f"s.{c} = ${c}" for c in params)


def dump_marks(marks: Mapping[str, int]) -> str:
    return json.dumps(dict(marks), sort_keys=True)


_IN_PAGE = "WHERE offset(ID(n)) >= $a AND offset(ID(n)) <= $b"


def _match(table: str) -> str:
    """The pattern that binds the scope's rows of ``table`` to ``n``."""
    return f"{MATCH_SCOPE}MATCH {owned('n', table)}"


class KuzuSource:
    """``IndexSource`` over one scope of its bucket: rows read in pages ordered by id (a 100k-round rebuild never
    materializes a table in one result), marks as Kuzu last committed them."""

    def __init__(self, db: Readable, marks: Mapping[str, int], dim: int) -> None:
        self.db = db
        self.marks = marks
        self.dim = dim

    def _ranges(self, table: str) -> Iterator[dict[str, int]]:
        """The scope's rows of ``table`` as ranges of internal offsets of ``PAGE`` rows each (``$a``, ``$b``). Why
        offsets: ``ORDER BY id SKIP/LIMIT`` sorts the whole table on every page, which at 100k rounds exhausts a
        64 MiB buffer pool (measured); a range of offsets is a filter on what the scope's ``OWNS`` edges reach, and
        reads only the page's values. The scope's offsets are read first (they are spread over the bucket's
        table), so a page holds ``PAGE`` rows."""
        offsets = sorted(int(r[0]) for r in self.db.query(f"{_match(table)} RETURN offset(ID(n))"))
        for start in range(0, len(offsets), PAGE):
            yield {"a": offsets[start], "b": offsets[min(len(offsets), start + PAGE) - 1]}

    def lexical_rows(self, name: str) -> Iterator[Row]:
        spec = BY_NAME[name]
        index_only = INDEX_ONLY.get(spec.table, ())
        stored = [c for c in spec.payload if c not in index_only]
        columns = ", ".join(f"n.{c}" for c in (spec.column, *stored))
        for page in self._ranges(spec.table):
            rows = self.db.query(f"{_match(spec.table)} {_IN_PAGE} RETURN n.id, {columns}", page)
            texts = self._round_texts(page) if spec.table == "Round" and index_only else {}
            for r in rows:
                if not spec.payload:
                    yield str(r[0]), str(r[1] or "")
                    continue
                values = dict(zip(stored, r[2:], strict=True))
                if texts:
                    values["text"], values["user_text"] = round_texts_of(values["message_ids"] or [], texts)
                yield str(r[0]), str(r[1] or ""), encode_payload({c: values[c] for c in spec.payload})

    def _round_texts(self, page: dict[str, int]) -> dict[str, tuple[str, str]]:
        """Message id -> (role, text) of the messages of a page of rounds' sessions: a round's texts are its
        messages' (those its ``message_ids`` name)."""
        rows = self.db.query(
            f"{_match('Round')} {_IN_PAGE} MATCH (n)-[:ROUND_IN]->(s:Session) WITH DISTINCT s "
            "MATCH (s)<-[:MSG_IN]-(m:Message) RETURN m.id, m.role, m.text",
            page,
        )
        return {str(r[0]): (str(r[1]), str(r[2] or "")) for r in rows}

    def vector_rows(self, name: str) -> Iterator[tuple[str, F32]]:
        """Read as arrow a page at a time: a vector as a Python list costs a Python number per component."""
        spec = BY_NAME[name]
        for page in self._ranges(spec.table):
            frame = self.db.arrow(
                f"{_match(spec.table)} {_IN_PAGE} AND n.{spec.column} IS NOT NULL "
                f"RETURN n.id AS id, n.{spec.column} AS v",
                page,
            )
            if frame.num_rows:
                mat = matrix(frame.column("v"), self.dim)
                yield from zip((str(i) for i in frame.column("id").to_pylist()), mat, strict=True)

    def mark(self, name: str) -> str | None:
        return str(self.marks.get(BY_NAME[name].table, 0))


class DerivedIndexes:
    """The open derived indexes of one scope database, searched by the retriever and kept in step by ``apply``."""

    def __init__(self, indexes: ScopeIndexes, dim: int) -> None:
        """Open with ``open``."""
        self.indexes = indexes
        self.dim = dim

    @classmethod
    def open(
        cls,
        db: Readable,
        db_path: Path,
        marks: Mapping[str, int],
        *,
        embedder_id: str,
        dim: int,
        fresh: bool,
    ) -> DerivedIndexes:
        vector = [d.name for d in DERIVED if d.kind == "vector"]
        ix = ScopeIndexes.open(
            db_path,
            embedder_id=embedder_id,
            dim=dim,
            source=KuzuSource(db, marks, dim),
            lexical=[d.name for d in DERIVED if d.kind == "lexical"],
            vector=vector,
            half=vector,  # every one: ``store.vectors``
            fresh=fresh,
        )
        return cls(ix, dim)

    @property
    def rebuilt(self) -> list[str]:
        return self.indexes.rebuilt

    def lexical_search(self, name: str, terms: str, k: int) -> list[tuple[str, float]]:
        """BM25 top-k (OR semantics) for a ``graphrecall.text.query_terms`` string."""
        if not terms:
            return []
        return self.indexes.lexical[name].search(terms.split(), k)

    def vector_search(self, name: str, vec: object, k: int) -> list[tuple[str, float]]:
        """Cosine top-k, best first."""
        return self.indexes.vector[name].search(np.asarray(vec, dtype=np.float32).reshape(-1), k)

    def vectors(self, name: str, ids: Sequence[str]) -> dict[str, F32]:
        """Stored vectors by id from the vector index ``name`` (ids it lacks are left out)."""
        return self.indexes.vector[name].vectors(ids)

    def rounds(self, ids: Sequence[str]) -> dict[str, Round]:
        """Rounds by id from the round index's stored documents (ids it lacks are left out)."""
        return {
            rid: round_from_payload(rid, payload)
            for rid, payload in self.indexes.lexical["round_terms"].payloads(ids).items()
        }

    def count(self, name: str) -> int:
        spec = BY_NAME[name]
        return (self.indexes.lexical if spec.kind == "lexical" else self.indexes.vector)[name].count()

    def apply(self, changes: Sequence[Change], marks: Mapping[str, int]) -> None:
        """Bring every index of a changed table up to ``marks`` (what Kuzu just committed)."""
        for table in dict.fromkeys(c.table for c in changes):
            final = _final_rows(c for c in changes if c.table == table)
            deleted = [rid for rid, row in final.items() if row is None]
            added = {rid: row for rid, row in final.items() if row is not None}
            mark = str(marks[table])
            ids = list(added)
            for spec in (d for d in DERIVED if d.table == table):
                if spec.kind == "lexical":
                    rows: list[Row] = [
                        (rid, _text(added[rid], spec.column), _payload(added[rid], spec.payload))
                        if spec.payload
                        else (rid, _text(added[rid], spec.column))
                        for rid in ids
                    ]
                    self.indexes.lexical[spec.name].apply(deleted, rows, mark=mark)
                else:
                    vx = self.indexes.vector[spec.name]
                    if ids:
                        if deleted:
                            vx.delete(deleted)
                        vx.add(ids, _vectors(added, ids, spec.column, self.dim), mark=mark)
                    else:
                        vx.delete(deleted, mark=mark)

    def compact(
        self, db: Readable, marks: Mapping[str, int], bound: float, *, dry_run: bool = False
    ) -> list[IndexSpace]:
        """Rewrite the indexes whose dead share passed ``bound`` (``ScopeIndexes.compact``); ``marks``: the
        store's, which the caller keeps from moving (it holds the write lock)."""
        return self.indexes.compact(KuzuSource(db, marks, self.dim), bound, dry_run=dry_run)

    def close(self) -> None:
        self.indexes.close()


def _final_rows(changes: Iterator[Change]) -> dict[str, tuple[pa.Table, int] | None]:
    """Each id's last state in the transaction: its (table, row) when added last, None when deleted last."""
    final: dict[str, tuple[pa.Table, int] | None] = {}
    for c in changes:
        for rid in c.deleted:
            final[rid] = None
        if c.added is not None:
            for i, rid in enumerate(c.added.column("id").to_pylist()):
                final.pop(rid, None)  # re-insert keeps the transaction's order
                final[rid] = (c.added, i)
    return final


def _text(row: tuple[pa.Table, int], column: str) -> str:
    table, i = row
    value = table.column(column)[i].as_py()
    return str(value or "")


def _payload(row: tuple[pa.Table, int], columns: Sequence[str]) -> bytes:
    table, i = row
    return encode_payload({c: table.column(c)[i].as_py() for c in columns})


def encode_payload(values: Mapping[str, Any]) -> bytes:
    return json.dumps(
        {k: v.isoformat() if isinstance(v, datetime) else v for k, v in values.items()}, separators=(",", ":")
    ).encode()


def round_from_payload(rid: str, payload: bytes) -> Round:
    d = json.loads(payload)
    return Round(
        id=rid,
        session_id=d["session_id"],
        idx=d["idx"],
        text=d["text"],
        user_text=d["user_text"] or "",
        at=datetime.fromisoformat(d["at"]),
        message_ids=d["message_ids"],
    )


def _vectors(added: Mapping[str, tuple[pa.Table, int]], ids: Sequence[str], column: str, dim: int) -> F32:
    """The vectors of the added rows as written to Kuzu (half precision's bits decoded: ``store.vectors``)."""
    out = np.empty((len(ids), dim), dtype=np.float32)
    cache: dict[int, F32] = {}
    for j, rid in enumerate(ids):
        table, i = added[rid]
        mat = cache.get(id(table))
        if mat is None:
            try:
                mat = matrix(table.column(column), dim)
            except ValueError as e:
                raise ValueError(f"column {column}: {e}") from e
            cache[id(table)] = mat
        out[j] = mat[i]
    return out
