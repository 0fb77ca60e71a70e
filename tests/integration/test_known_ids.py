"""A database's in-memory Session and Message ids (``store.known``) equal what Kuzu committed, whoever wrote it.

Why it matters: the writer plans a chat turn against these ids plus the write log's tail; an id Kuzu holds that the
sets lack (and the tail no longer has) makes a turn be planned against nothing stored, which tore rounds
(``test_lost_turn_race.py``)."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from graphrecall.embed import HashingEmbedder
from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message
from graphrecall.store import erase
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.known import POINT_LOOKUPS_UP_TO, existing_ids
from graphrecall.store.rows import SessionRow
from graphrecall.store.wal import WriteEntry
from graphrecall.store.wal.apply import apply_entries

EMB = HashingEmbedder(64)


def entry(sid: str, seq: int) -> WriteEntry:
    msgs = [Message(role="user", content=f"hello from {sid}"), Message(role="assistant", content="hi")]
    rows = message_rows(sid, msgs, start_idx=0, date=datetime(2024, 2, 1))
    rounds = build_rounds(sid, rows)
    vecs = EMB.embed([r.user_text for r in rounds])
    e = WriteEntry.from_rows(
        sessions=[SessionRow(sid, datetime(2024, 2, 1))], messages=rows, rounds=rounds, user_vectors=vecs,
        reply_vectors=vecs, dim=EMB.dim,
    )  # fmt: skip
    return e.model_copy(update={"seq": seq})


def open_db(tmp_path: Path) -> ScopeDatabase:
    return ScopeDatabase.standalone(tmp_path / "a.kuzu", embedder_id=EMB.id, dim=EMB.dim)


def test_ids_written_after_the_load_are_known_whoever_wrote_them(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    try:
        assert db.known.stored("Session", ["s1"]) == set()  # loaded now, empty
        apply_entries(db, [entry("s1", 1)], durable=False)  # the write log's flusher
        assert db.known.holds("Session", "s1")
        assert db.known.stored("Message", ["s1#0", "s1#1", "s1#2"]) == {"s1#0", "s1#1"}
        erase.apply(db, erase.plan(db, sessions=["s1"]))
        assert not db.known.holds("Session", "s1")
        assert db.known.stored("Message", ["s1#0", "s1#1"]) == set()
    finally:
        db.close()


def test_a_load_does_not_wait_for_a_commit_in_flight_and_knows_it_once_committed(tmp_path: Path) -> None:
    """The load does not take the write lock (a scope moving into Kuzu holds it for the whole flush, and every turn
    of that scope waited for it): it answers with what is committed now, and the commit, once it lands, is known
    (reported to the sets, or replayed over the load's scans: store/known.py)."""
    db = open_db(tmp_path)
    inside = threading.Event()

    def write() -> None:
        with db.write_lock:
            inside.set()
            time.sleep(2.0)  # the load below runs meanwhile
            apply_entries(db, [entry("s1", 1)], durable=False)

    t = threading.Thread(target=write)
    try:
        t.start()
        assert inside.wait(10)
        started = time.monotonic()
        assert not db.known.holds("Session", "s1")  # not committed yet
        assert time.monotonic() - started < 1.5, "the load waited for the write lock"
        t.join()
        assert db.known.holds("Session", "s1")
        assert db.known.stored("Message", ["s1#0", "s1#1"]) == {"s1#0", "s1#1"}
    finally:
        t.join()
        db.close()


def test_ids_committed_before_the_load_are_read_from_kuzu(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    try:
        apply_entries(db, [entry("s1", 1)])
    finally:
        db.close()
    again = open_db(tmp_path)
    try:
        assert again.known.holds("Session", "s1")
        assert again.known.stored("Message", ["s1#0", "s1#1"]) == {"s1#0", "s1#1"}
    finally:
        again.close()


def test_existing_ids_asks_kuzu_the_same_by_lookups_and_by_scan(tmp_path: Path) -> None:
    db = open_db(tmp_path)
    try:
        apply_entries(db, [entry("s1", 1)])
        few = ["s1#1", "nope", "s1#0"]
        many = few + [
            f"other{i}" for i in range(POINT_LOOKUPS_UP_TO)
        ]  # past the point-lookup limit: one scan
        assert existing_ids(db, "Message", few) == existing_ids(db, "Message", many) == {"s1#0", "s1#1"}
        assert existing_ids(db, "Round", ["s1@0", "s1@1"]) == {"s1@0"}
        with pytest.raises(ValueError, match="not a table keyed by id"):
            existing_ids(db, "Meta", ["meta"])
    finally:
        db.close()
