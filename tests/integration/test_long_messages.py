"""A long message is embedded in full (its passages pooled), so what it says past the model's window reaches its
vector; with the real bundled model (all-MiniLM-L6-v2, 256-token window).

A known limit, measured here: one pooled vector carries a detail at a quarter of its weight, so a short round that
shares a word with the question can still outrank it by meaning alone (docs/architecture.md, the ingest paragraph on long user turns)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.dialogues import dialogue_sessions

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed.passages import embed_in_full, passage_chars

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
        [[stored]] = db.query("MATCH (r:Round) WHERE r.session_id = 'trip' RETURN r.embedding")
    [pooled] = embed_in_full(mem.embedder, [LONG])
    np.testing.assert_allclose(np.asarray(stored, dtype=np.float32), pooled, atol=1e-5)


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
