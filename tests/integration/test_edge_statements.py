"""Small writes create their rows with ``CREATE`` and their edges one statement per edge (``WriteTxn._create``), large
ones ``COPY`` them: both must store the same graph, keyed and owned by the scope alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.store import database
from graphrecall.store.schema import MATCH_SCOPE, owned

SCOPE = Scope(org_id="acme", user_id="ana")
EDGES = (
    f"{MATCH_SCOPE}MATCH {owned('m', 'Message')}-[e]->(s:Session) RETURN m.id, s.id ORDER BY m.id, s.id",
    f"{MATCH_SCOPE}MATCH {owned('r', 'Round')}-[e]->(x) RETURN r.id, label(e), x.id ORDER BY r.id, label(e), x.id",
    f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} RETURN s.id ORDER BY s.id",
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


def test_created_rows_and_edges_are_those_a_copy_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = graph(tmp_path / "create")
    monkeypatch.setattr(database, "CREATE_MAX_ROWS", 0)  # every insert is a COPY
    copied = graph(tmp_path / "copy")
    assert created == copied
    # 2 messages per turn; a round: its session (its messages are those of the session it names: no edge to them)
    assert len(created[0]) == 24 and len(created[1]) == 12
    assert len(created[2]) == 12
