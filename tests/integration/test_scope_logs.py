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
        again = logs.get(b, create=False)  # opened again (a's log goes now): nothing waits in it
        assert again is not None and again.log.pending_count == 0
    finally:
        logs.close()
        pool.close()
