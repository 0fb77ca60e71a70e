"""Reading a scope's rounds out of Kuzu for a rebuild: the ``IndexSource`` the integrator hands to ``ScopeIndexes``.

Rows are read in pages ordered by id (``SKIP``/``LIMIT``), so a 100k-round rebuild never materializes the table in
one result; the mark is whatever the caller's write path stores (e.g. the last flushed log sequence number).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from graphrecall.index.vector import F32
from graphrecall.store.database import ScopeDatabase

# vector index name -> Round column
ROUND_VECTOR_COLUMNS = {"round_user": "embedding", "round_reply": "reply_embedding"}
PAGE = 5000


class RoundSource:
    """``IndexSource`` over the ``Round`` table of one open scope database."""

    def __init__(self, db: ScopeDatabase, mark: Callable[[], str | None] = lambda: None) -> None:
        self.db = db
        self._mark = mark

    def _pages(self, columns: str) -> Iterator[list[object]]:
        skip = 0
        while True:
            rows = self.db.query(
                f"MATCH (r:Round) RETURN r.id, {columns} ORDER BY r.id SKIP $s LIMIT $n",
                {"s": skip, "n": PAGE},
            )
            yield from rows
            if len(rows) < PAGE:
                return
            skip += PAGE

    def lexical_rows(self, name: str) -> Iterator[tuple[str, str]]:
        if name != "round":
            raise KeyError(f"no lexical source named {name!r}")
        for r in self._pages("r.terms"):
            yield str(r[0]), str(r[1] or "")

    def vector_rows(self, name: str) -> Iterator[tuple[str, F32]]:
        column = ROUND_VECTOR_COLUMNS[name]
        for r in self._pages(f"r.{column}"):
            yield str(r[0]), np.asarray(r[1], dtype=np.float32)

    def mark(self) -> str | None:
        return self._mark()
