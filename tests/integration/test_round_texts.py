"""A round's texts live once, in its messages (``schema.INDEX_ONLY``): Kuzu's ``Round`` has no text column, and
every way a round is read back (the lexical index's stored documents, Kuzu by id, a rebuilt index) gives the texts
ingest made (``rows.round_texts``)."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.index import index_dir
from graphrecall.ingest import build_rounds, message_rows, validate_messages
from graphrecall.store import rounds as q
from graphrecall.store.schema import MATCH_SCOPE, owned

SCOPE = Scope(org_id="acme", user_id="texts")
SESSIONS = {
    "plain": [("user", "I adopted a beagle called Biscuit."), ("assistant", "Lovely name!")],
    "replies": [  # a turn answered twice, with lines of its own
        ("user", "Plan my trip:\nday 1 Lisbon\nday 2 Porto"),
        ("assistant", "Day 1: Alfama."),
        ("assistant", "Day 2: the Ribeira."),
        ("user", "Thanks!"),
    ],
    "reply_first": [("assistant", "Welcome back."), ("system", "be brief"), ("user", "Hi again")],
}


def _sessions() -> list[dict[str, object]]:
    return [
        {"session_id": sid, "date": "2024-05-01", "messages": [{"role": r, "content": t} for r, t in msgs]}
        for sid, msgs in SESSIONS.items()
    ]


def _want() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for sid, msgs in SESSIONS.items():
        messages = validate_messages([{"role": r, "content": t} for r, t in msgs])
        rows = message_rows(sid, messages, start_idx=0, date=datetime(2024, 5, 1))
        out |= {r.id: (r.text, r.user_text) for r in build_rounds(sid, rows)}
    return out


@pytest.mark.parametrize("resident", [0, 64], ids=["bulk", "through-the-log"])
def test_every_read_of_a_round_gives_the_texts_ingest_made(tmp_path: Path, resident: int) -> None:
    root = tmp_path / "store"
    want = _want()
    assert len(want) == 5 and want["replies@0"][0].count("\n") == 4  # lines of the messages kept
    with Memory.open(
        root, embedder=HashingEmbedder(64), settings=Settings(root=root, resident_rounds=resident)
    ) as m:
        m.add_sessions(SCOPE, _sessions())
        m.flush()
        with testing.database(m, SCOPE, create=False) as db:
            columns = {r[1] for r in db.query("CALL table_info('Round') RETURN *")}
            assert not columns & {"text", "user_text"} and "terms" in columns
            tables = {r[1] for r in db.query("CALL show_tables() RETURN *")}
            assert "HAS_MESSAGE" not in tables  # a round's messages: its session's that it names
            from_index = db.indexes.rounds(list(want))
            from_kuzu = q.kuzu_rounds(db, list(want))
            path = db.path
    for rounds in (from_index, from_kuzu):
        assert {rid: (r.text, r.user_text) for rid, r in rounds.items()} == want
    shutil.rmtree(index_dir(path))  # rebuilt from Kuzu on the next open
    settings = Settings(root=root)
    with (
        Memory.open(root, embedder=HashingEmbedder(64), settings=settings) as m,
        testing.database(m, SCOPE, create=False) as db,
    ):
        assert "round_terms" in db.indexes.rebuilt
        rebuilt = db.indexes.rounds(list(want))
        assert db.query(f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN count(r)") == [[len(want)]]
    assert rebuilt == from_index
