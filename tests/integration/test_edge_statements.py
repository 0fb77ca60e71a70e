"""Small writes create their edges with one UNWIND statement per table in a small scope and one statement per edge
in a large one (``WriteTxn._create``): both must store the same graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.store import database

SCOPE = Scope(org_id="acme", user_id="ana")
EDGES = (
    "MATCH (m:Message)-[e]->(s:Session) RETURN m.id, s.id ORDER BY m.id, s.id",
    "MATCH (r:Round)-[e]->(x) RETURN r.id, label(e), x.id ORDER BY r.id, label(e), x.id",
)


def graph(root: Path) -> list[list[list[object]]]:
    with Memory.open(
        root, embedder=HashingEmbedder(64), settings=Settings(root=root, resident_rounds=0)
    ) as mem:
        for i in range(12):  # chat turns through the write log: small CREATE transactions when flushed
            mem.add_session(
                SCOPE,
                [
                    {"role": "user", "content": f"turn {i}: the blue kettle number {i}"},
                    {"role": "assistant", "content": f"noted kettle {i}"},
                ],
                session_id=f"s{i}",
                date=f"2024-05-{1 + i:02d}",
            )
            if i % 5 == 4:
                mem.flush()  # several flushes: edges to nodes written by earlier transactions too
        mem.flush()
        with testing.database(mem, SCOPE) as db:
            return [db.query(q) for q in EDGES]


def test_one_unwind_per_table_stores_what_one_statement_per_edge_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unwound = graph(tmp_path / "unwind")
    monkeypatch.setattr(database, "UNWIND_EDGES_MAX_ROUNDS", 0)  # every scope counts as large
    one_by_one = graph(tmp_path / "each")
    assert unwound == one_by_one
    assert (
        len(unwound[0]) == 24 and len(unwound[1]) == 12 * 3
    )  # 2 messages per turn; a round: 2 messages, 1 session
