"""The tail index: exact vector and BM25 search over unflushed rounds, newest version wins, trimming, snapshots."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message, Round
from graphrecall.store.rows import SessionRow
from graphrecall.store.wal import TailIndex, WriteEntry, WriteLog

DIM = 4
AXES = np.eye(DIM)


def entry(
    sid: str,
    turns: list[str],
    seq: int,
    *,
    user_axis: int = 0,
    reply_axis: int = 1,
    replaced: list[str] | None = None,
) -> WriteEntry:
    """A session's messages (user, assistant alternating) as one entry with a given seq (as the log would set)."""
    msgs = [Message(role="user" if j % 2 == 0 else "assistant", content=t) for j, t in enumerate(turns)]
    rows = message_rows(sid, msgs, start_idx=0, date=datetime(2024, 5, seq))
    rounds = build_rounds(sid, rows)
    e = WriteEntry.from_rows(
        sessions=[SessionRow(sid, datetime(2024, 5, seq))],
        messages=rows,
        rounds=rounds,
        user_vectors=np.tile(AXES[user_axis], (len(rounds), 1)),
        reply_vectors=np.tile(AXES[reply_axis], (len(rounds), 1)),
        replaced_round_ids=replaced or [],
        dim=DIM,
    )
    return e.model_copy(update={"seq": seq})


def test_vector_search_is_exact_cosine_on_the_chosen_side() -> None:
    tail = TailIndex(DIM)
    tail.add(entry("dog", ["I adopted a beagle", "lovely"], 1, user_axis=0, reply_axis=2))
    tail.add(entry("job", ["I started a new job", "good luck"], 2, user_axis=1, reply_axis=3))
    snap = tail.snapshot()
    assert snap.vector_search(AXES[0] * 5, 2) == [
        ("dog@0", pytest.approx(1.0)),
        ("job@0", pytest.approx(0.0)),
    ]
    assert snap.vector_search([0, 0.6, 0, 0.8], 1, side="reply")[0] == ("job@0", pytest.approx(0.8))
    with pytest.raises(ValueError, match="dim 3"):
        snap.vector_search([1, 0, 0], 1)


def test_bm25_uses_the_store_tokenization_or_semantics_and_stemming() -> None:
    tail = TailIndex(DIM)
    tail.add(entry("dog", ["We adopted a dog named Biscuit!", "Beagles are curious."], 1))
    tail.add(entry("move", ["We moved to Berlin.", "Welcome!"], 2))
    tail.add(entry("job", ["New job, adopting remote work.", "Nice."], 3))
    snap = tail.snapshot()
    hits = snap.bm25_search("Who is Biscuit?!", 5)
    assert [h for h, _ in hits] == ["dog@0"] and hits[0][1] > 0
    # "adopting" and "adopted" share a stem; OR semantics: either word is enough
    assert {h for h, _ in snap.bm25_search("adopting OR berlin", 5)} == {"dog@0", "move@0", "job@0"}
    assert snap.bm25_search("beagle", 5)[0][0] == "dog@0"  # the reply side is indexed too
    assert snap.bm25_search("what is the", 5) == []  # stopwords only
    assert snap.bm25_search("...", 5) == []


def test_the_tail_returns_rounds_as_models_for_building_hits() -> None:
    tail = TailIndex(DIM)
    tail.add(entry("s1", ["hello there", "hi", "and a second question", "answer"], 1))
    rounds = tail.snapshot().rounds()
    assert all(isinstance(r, Round) for r in rounds)
    assert [(r.id, r.message_ids) for r in rounds] == [("s1@0", ["s1#0", "s1#1"]), ("s1@1", ["s1#2", "s1#3"])]
    assert rounds[1].user_text == "and a second question" and rounds[1].at == datetime(2024, 5, 1)
    assert set(tail.snapshot().get(["s1@1", "nope"])) == {"s1@1"}
    assert [m.id for m in tail.messages("s1")] == ["s1#0", "s1#1", "s1#2", "s1#3"]
    assert tail.sessions() == [SessionRow("s1", datetime(2024, 5, 1))]


def test_a_round_written_again_keeps_its_newest_version_whatever_the_arrival_order() -> None:
    v1 = entry("s1", ["I live in Munich"], 1)
    v2 = entry("s1", ["I live in Munich", "Nice city, Bavaria!"], 2, replaced=["s1@0"])
    tail = TailIndex(DIM)
    tail.add(v2)
    tail.add(v1)  # late: must not overwrite
    (r,) = tail.snapshot().rounds()
    assert r.message_ids == ["s1#0", "s1#1"]
    assert [h for h, _ in tail.snapshot().bm25_search("Bavaria", 3)] == ["s1@0"]
    assert tail.snapshot().shadowed == {"s1@0"}  # Kuzu's copy of s1@0, if any, is stale


def test_a_deleted_round_shadows_the_store_copy_until_flushed() -> None:
    tail = TailIndex(DIM)
    tail.add(entry("s2", ["other"], 1, replaced=["s1@3"]))
    assert tail.snapshot().shadowed == {"s1@3", "s2@0"}
    tail.trim(1)
    assert tail.snapshot().shadowed == frozenset()


def test_trim_forgets_flushed_entries_and_a_late_add_of_a_flushed_seq_is_ignored() -> None:
    tail = TailIndex(DIM)
    for i in range(1, 5):
        tail.add(entry(f"s{i}", [f"turn {i}"], i))
    tail.trim(2)
    assert [r.id for r in tail.snapshot().rounds()] == ["s3@0", "s4@0"]
    assert tail.message_ids() == {"s3#0", "s4#0"} and {s.id for s in tail.sessions()} == {"s3", "s4"}
    tail.add(entry("s2", ["turn 2"], 2))  # its append raced with the flush that already took it
    assert len(tail) == 2


def test_a_snapshot_does_not_change_under_a_search() -> None:
    tail = TailIndex(DIM)
    tail.add(entry("s1", ["alpha"], 1))
    snap = tail.snapshot()
    tail.add(entry("s2", ["alpha"], 2))
    tail.trim(1)
    assert [r.id for r in snap.rounds()] == ["s1@0"] and len(snap) == 1
    assert [r.id for r in tail.snapshot().rounds()] == ["s2@0"]


def test_the_tail_rebuilt_from_the_log_equals_the_one_built_by_appends(tmp_path: Path) -> None:
    live = TailIndex(DIM)
    with WriteLog(tmp_path / "u.log.sqlite") as log:
        for i in range(1, 4):
            live.add(log.append(entry(f"s{i}", [f"turn {i} about Biscuit"], i).model_copy(update={"seq": 0})))
        rebuilt = TailIndex(DIM, log.pending())
    assert rebuilt.snapshot().rounds() == live.snapshot().rounds()
    assert rebuilt.snapshot().bm25_search("Biscuit", 5) == live.snapshot().bm25_search("Biscuit", 5)


def test_entries_must_come_from_the_log_and_match_the_dimension() -> None:
    tail = TailIndex(DIM)
    with pytest.raises(ValueError, match="seq"):
        tail.add(entry("s1", ["x"], 1).model_copy(update={"seq": 0}))
    with pytest.raises(ValueError, match="dim 4; this tail holds dim 8"):
        TailIndex(8).add(entry("s1", ["x"], 1))


def test_a_long_user_turn_scores_the_best_of_its_vector_and_its_passages() -> None:
    tail = TailIndex(DIM)
    plain = entry("dog", ["I adopted a beagle", "lovely"], 1, user_axis=0)
    long = entry("trip", ["A long story about a trip", "nice"], 2, user_axis=1)
    long = WriteEntry.from_rows(
        sessions=[SessionRow("trip", datetime(2024, 5, 2))],
        messages=[],
        rounds=long.rounds,
        user_vectors=long.user_matrix(),
        reply_vectors=long.reply_matrix(),
        passages=[np.stack([AXES[1], AXES[2] * 0.6 + AXES[3] * 0.8])],
        dim=DIM,
    ).model_copy(update={"seq": 2})
    tail.add(plain)
    tail.add(long)
    snap = tail.snapshot()
    # the query is nearest the trip's second passage (0.8), not its pooled vector (0.0) nor the dog (0.6); vectors
    # are kept in half precision (store.vectors): 0.6 and 0.8 are not exact there, so the passage scores 0.6399
    query = [0.6, 0, 0, 0.8]
    assert snap.vector_search(query, 2) == [
        ("trip@0", pytest.approx(0.64, abs=2e-4)),
        ("dog@0", pytest.approx(0.6)),
    ]
    assert snap.vector_search(query, 2, passages=False)[0] == ("dog@0", pytest.approx(0.6))
    # a passage counts less its penalty; the round's own vector never does
    assert snap.vector_search(query, 2, passage_penalty=0.1) == [
        ("dog@0", pytest.approx(0.6)),
        ("trip@0", pytest.approx(0.54, abs=2e-4)),
    ]
    assert snap.vectors(["trip@0"])["trip@0"] == pytest.approx(AXES[1])  # the round's own vector
