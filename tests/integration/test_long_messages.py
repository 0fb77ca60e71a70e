"""A long message is embedded in full, so what it says past the model's window is found: its vector pools its
passages', and each passage is a vector of the round too; with the real bundled model (all-MiniLM-L6-v2, 256-token
window).

Why both, measured here: one pooled vector carries a detail at a fraction of its weight, so a short round can
outrank the long one by meaning alone; the best passage does not dilute it (docs/architecture.md, ingest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.dialogues import dialogue_sessions

from graphrecall import Memory, RetrievalConfig, Scope, Settings, testing
from graphrecall.embed.passages import embed_in_full, embed_passages, passage_chars
from graphrecall.retrieve.retriever import HybridRetriever
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.store.vectors import decode

HALF = 2**-11  # half precision: 11 significant bits (store.vectors)
SCOPE = Scope(org_id="acme", user_id="long")

# A long first message about one thing (a conference trip), whose last lines say something else entirely.
TRIP = " ".join(
    f"On day {d} of the conference in Vienna I went to the morning keynote, took notes on the talks about "
    f"distributed databases, had lunch with colleagues from the Munich office and walked back to the hotel."
    for d in range(1, 13)
)
TAIL = "Also, my weekend project: I am restoring a 1967 wooden sailboat called Albatross in my uncle's barn."
LONG = f"{TRIP} {TAIL}"

SESSIONS = {
    "trip": [LONG, "Sounds like a full week."],
    "garden": ["I planted tomatoes and basil in raised beds.", "Companion planting, great choice."],
    "car": ["We sold the old Volvo and bought an electric Kia.", "EVs are cheap to run."],
    "gym": ["I signed up for a climbing gym downtown.", "Bouldering is a great workout."],
    "coffee": ["I switched from espresso to pour-over coffee.", "A V60 brings out fruity notes."],
    "cooking": ["I baked sourdough bread for the first time.", "How did the crust turn out?"],
    "farm": ["My uncle has a farm with a big barn and horses.", "Sounds idyllic."],  # the barn, not the boat
}


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    root: Path = tmp_path_factory.mktemp("long")
    with Memory.open(root, settings=Settings(root=root)) as m:  # the default, real embedder
        m.add_sessions(SCOPE, dialogue_sessions(SESSIONS))
        m.flush()  # into Kuzu: the retriever below reads the store, not the write-ahead tail
        yield m


def test_the_message_is_longer_than_the_window(mem: Memory) -> None:
    limit = passage_chars(mem.embedder)
    assert limit is not None and len(LONG) > 3 * limit and len(TRIP) > limit


def test_the_stored_user_vector_is_the_pooled_one(mem: Memory) -> None:
    with testing.database(mem, SCOPE, create=False) as db:
        [[stored]] = db.query(
            f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} WHERE r.session_id = 'trip' RETURN r.embedding"
        )
    [pooled] = embed_in_full(mem.embedder, [LONG])
    np.testing.assert_allclose(decode(stored), pooled, rtol=HALF, atol=1e-6)  # stored in half precision


def test_the_pooled_vector_is_closer_to_the_tail_than_the_window_alone(mem: Memory) -> None:
    [pooled] = embed_in_full(mem.embedder, [LONG])
    [windowed] = mem.embedder.embed([LONG])  # what reached the vector before: the first 256 tokens
    for question in (
        "What boat am I restoring?",
        "Tell me about my sailboat project",
        "wooden sailboat in the barn",
    ):
        [query] = mem.embedder.embed([question], kind="query")
        assert float(pooled @ query) > float(windowed @ query) + 0.04, question
    [trip] = mem.embedder.embed(["my conference trip to Vienna"], kind="query")
    assert float(pooled @ trip) > 0.3  # and it still says what most of the message is about
    assert np.isclose(np.linalg.norm(pooled), 1.0, atol=1e-5)


def test_each_passage_of_the_long_turn_is_stored_beside_its_round(mem: Memory) -> None:
    _, [parts] = embed_passages(mem.embedder, [LONG])
    assert parts is not None and len(parts) >= 4
    with testing.database(mem, SCOPE, create=False) as db:
        rows = db.query(
            f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')}-[:PASSAGE_OF]->(r:Round) RETURN r.session_id, p.id, p.idx, p.embedding "
            "ORDER BY p.idx"
        )
        assert db.indexes.count("round_passage") == len(parts)
    assert [r[0] for r in rows] == ["trip"] * len(parts)  # short turns have none
    assert [r[2] for r in rows] == list(range(len(parts)))
    np.testing.assert_allclose(np.asarray([decode(r[3]) for r in rows]), parts, rtol=HALF, atol=1e-6)


QUESTIONS = ("What boat am I restoring?", "Tell me about my sailboat project", "wooden sailboat in the barn")


VECTOR_ONLY = {
    "weights": {"vector": 1.0, "bm25": 0.0, "bm25_user": 0.0, "fact": 0.0, "event": 0.0, "entity": 0.0}
}


def _vector_only(mem: Memory, question: str, *, passages: bool, use_index: bool = True) -> list[str]:
    cfg = RetrievalConfig(**VECTOR_ONLY, passage_vectors=passages)
    with testing.database(mem, SCOPE) as db:
        hits = HybridRetriever(mem.embedder, cfg).search(db, question, 3, use_index=use_index)
    return [h.session_id for h in hits]


@pytest.mark.parametrize("use_index", [True, False], ids=["index", "kuzu-scan"])
@pytest.mark.parametrize("question", QUESTIONS)
def test_a_detail_deep_in_a_long_turn_ranks_it_first_by_meaning_alone(  # with the default passage penalty
    mem: Memory, question: str, use_index: bool
) -> None:
    assert _vector_only(mem, question, passages=True, use_index=use_index)[0] == "trip"


def test_without_its_passages_the_pooled_vector_loses_the_detail(mem: Memory) -> None:
    """The limit the passages remove (the module docstring): the pooled vector alone does not rank the trip first
    for every one of these questions."""
    assert any(_vector_only(mem, q, passages=False)[0] != "trip" for q in QUESTIONS)


def test_unflushed_long_turns_are_searched_by_their_passages_too(tmp_path: Path, mem: Memory) -> None:
    cfg = RetrievalConfig(**VECTOR_ONLY)
    with Memory.open(tmp_path, settings=Settings(root=tmp_path), embedder=mem.embedder, retrieval=cfg) as m:
        m.add_sessions(SCOPE, dialogue_sessions(SESSIONS))  # small: it stays in the write log's tail
        for question in QUESTIONS:
            assert m.search(SCOPE, question, k=3)[0].session_id == "trip", question
        logged = m.search(SCOPE, QUESTIONS[0], k=3)
        m.flush()
        stored = m.search(SCOPE, QUESTIONS[0], k=3)
    assert [(h.id, round(h.signals["vector"], 5)) for h in logged] == [
        (h.id, round(h.signals["vector"], 5)) for h in stored
    ]


def test_a_rewritten_or_erased_long_round_takes_its_passages_with_it(tmp_path: Path, mem: Memory) -> None:
    scope = Scope(org_id="acme", user_id="rewrite")
    with Memory.open(tmp_path, settings=Settings(root=tmp_path), embedder=mem.embedder) as m:
        m.add_session(scope, [{"role": "user", "content": LONG}], session_id="trip", date="2024-04-01")
        m.flush()
        # the reply joins the stored round: it is written again, with the same passages
        m.add_session(scope, [{"role": "assistant", "content": "What a week."}], session_id="trip")
        m.flush()
        with testing.database(m, scope, create=False) as db:
            [[n, rounds]] = db.query(
                f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')}-[:PASSAGE_OF]->(r:Round) RETURN count(p), count(DISTINCT r)"
            )
            assert n == db.indexes.count("round_passage") > 1 and rounds == 1
            assert db.query(f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')} RETURN count(p)") == [[n]]
        m.erase(scope, session_ids=["trip"])
        with testing.database(m, scope, create=False) as db:
            assert db.query(f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')} RETURN count(p)") == [[0]]
            assert db.indexes.count("round_passage") == 0


MEDIUM = (
    "Quick update on my week. Work was busy with the quarterly report and two long meetings. My sister visited on "
    "Saturday and we walked along the river. Oh, and I finally booked the flights to Lisbon for our anniversary in "
    "October. The weather turned cold again, so the garden has to wait until the weekend after next, when my "
    "neighbour lends me his tiller."
)


@pytest.mark.parametrize(("from_chars", "stored"), [(None, True), (len(MEDIUM), False)])
def test_a_turn_of_a_few_sentences_gets_passages_from_the_setting_on(
    tmp_path: Path, mem: Memory, from_chars: int | None, stored: bool
) -> None:
    limit = passage_chars(mem.embedder)
    assert (
        limit is not None and Settings().passage_from_chars < len(MEDIUM) < limit
    )  # the model reads it whole
    settings = (
        Settings(root=tmp_path)
        if from_chars is None
        else Settings(root=tmp_path, passage_from_chars=from_chars)
    )
    with Memory.open(tmp_path, settings=settings, embedder=mem.embedder) as m:
        m.add_session(SCOPE, [{"role": "user", "content": MEDIUM}], session_id="week", date="2024-04-01")
        m.flush()
        with testing.database(m, SCOPE) as db:
            [[n]] = db.query(f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')} RETURN count(p)")
            [[vec]] = db.query(f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN r.embedding")
    assert (n > 1) is stored and (n == 0) is not stored
    np.testing.assert_allclose(decode(vec), mem.embedder.embed([MEDIUM])[0], rtol=HALF, atol=1e-6)
