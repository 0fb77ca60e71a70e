"""Queries through Kuzu's own HNSW and full-text indexes (schema 1's, which stores no longer build): what
``benchmarks/perf/indexes.py`` compares the derived indexes with. Kept out of ``graphrecall.store`` because nothing
in the product queries these indexes any more (``docs/architecture.md``, "Indexes: derived, beside Kuzu")."""

from __future__ import annotations

import numpy as np

from graphrecall.embed.base import Vectors
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.schema import HNSW_SEARCH_EF


def kuzu_vector_search(
    db: ScopeDatabase, table: str, index: str, vec: Vectors, k: int
) -> list[tuple[str, float]]:
    """Top-k through a Kuzu HNSW index (schema 1; benchmarks compare it with the derived index)."""
    rows = db.query(
        f"CALL QUERY_VECTOR_INDEX('{table}', '{index}', $v, $k, efs := {max(HNSW_SEARCH_EF, k)}) "
        "RETURN node.id, distance ORDER BY distance",
        {"v": np.asarray(vec, dtype=np.float32).tolist(), "k": k},
    )
    return [(r[0], 1.0 - float(r[1])) for r in rows]


def kuzu_fts_search(db: ScopeDatabase, table: str, index: str, terms: str, k: int) -> list[tuple[str, float]]:
    """BM25 top-k through a Kuzu full-text index (schema 1; benchmarks compare it with the derived index)."""
    if not terms:
        return []
    rows = db.query(
        f"CALL QUERY_FTS_INDEX('{table}', '{index}', $q, conjunctive := false, top := $k) "
        "RETURN node.id, score ORDER BY score DESC",
        {"q": terms, "k": k},
    )
    return [(r[0], float(r[1])) for r in rows]
