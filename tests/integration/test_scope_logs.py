"""``ScopeLogs`` closes least recently used write logs past its capacity, but never one in use.

Why: an evicted log is flushed and closed; a write that had read its tail and was about to append to it failed
("write log ... is closed", a write that was never acknowledged), and a concurrent ``Memory.flush`` failed the same
way (``test_lost_turn_race.py``, load "churn")."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from graphrecall.embed import HashingEmbedder
from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message, Scope
from graphrecall.store import rounds as q
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.pool import DatabasePool
from graphrecall.store.rows import SessionRow
from graphrecall.store.wal import WriteEntry

EMB = HashingEmbedder(64)


def entry(sid: str) -> WriteEntry:
    rows = message_rows(
        sid, [Message(role="user", content=f"hello {sid}")], start_idx=0, date=datetime(2024, 2, 1)
    )
    rounds = build_rounds(sid, rows)
    vecs = EMB.embed([r.user_text for r in rounds])
    return WriteEntry.from_rows(
        sessions=[SessionRow(sid, datetime(2024, 2, 1))], messages=rows, rounds=rounds, user_vectors=vecs,
        reply_vectors=vecs, dim=EMB.dim,
    )  # fmt: skip


def test_a_log_in_use_is_not_evicted_and_goes_once_it_is_free(tmp_path: Path) -> None:
    pool = DatabasePool(tmp_path, embedder_id=EMB.id, dim=EMB.dim, capacity=4)
    logs = ScopeLogs(pool, EMB.dim, capacity=1, resident_rounds=0, max_age_s=3600)
    a, b = Scope(org_id="o", user_id="a"), Scope(org_id="o", user_id="b")
    try:
        with logs.writing(a):
            mine = logs.get(a, create=True)
            logs.append(b, entry("b1"))  # b's log opens: one more than the capacity, a's is in use
            logs.append(a, entry("a1"))  # the write goes on into the log it planned against
            assert logs.get(a, create=False) is mine
        # Both free now: the least recently used one, b's, was evicted, which flushed it into Kuzu.
        assert logs.get(a, create=False) is mine and mine.log.pending_count == 1
        with pool.acquire(b, create=False) as db:
            assert [s.id for s in q.list_sessions(db)] == ["b1"]
        # Its log closed empty with b in Kuzu: the file went with it, and nothing reopens it.
        assert not logs.path(b).exists() and logs.get(b, create=False) is None
    finally:
        logs.close()
        pool.close()


def test_a_log_that_closes_empty_is_deleted_once_its_scope_is_in_kuzu_and_made_anew_by_the_next_write(
    tmp_path: Path,
) -> None:
    """An empty log is six SQLite pages (24 KB per user: 20% of a small user after maintenance), so a close that
    flushed every entry of a scope with a database deletes the file. A scope that lives in its log keeps it (the
    log is all it has; a log whose flush failed keeps its entries too: ``test_full_disk.py``), and the next write
    makes a new log whose entries reach Kuzu like the first one's."""
    pool = DatabasePool(tmp_path, embedder_id=EMB.id, dim=EMB.dim, capacity=4)
    a, b = Scope(org_id="o", user_id="a"), Scope(org_id="o", user_id="b")
    logs = ScopeLogs(pool, EMB.dim, capacity=4, resident_rounds=0, max_age_s=3600)
    resident = ScopeLogs(pool, EMB.dim, capacity=4, resident_rounds=100, max_age_s=3600)
    try:
        logs.append(a, entry("a1"))
        resident.append(b, entry("b1"))  # b stays in its log: fewer rounds than resident_rounds
        logs.close()
        resident.close()
        assert not logs.path(a).exists() and not pool.exists(b) and resident.path(b).exists()
        again = ScopeLogs(pool, EMB.dim, capacity=4, resident_rounds=0, max_age_s=3600)
        again.append(a, entry("a2"))
        assert again.path(a).exists()
        again.flush(a)
        with pool.acquire(a, create=False) as db:
            assert [s.id for s in q.list_sessions(db)] == ["a1", "a2"]
        again.close()
        assert not again.path(a).exists()
    finally:
        pool.close()
