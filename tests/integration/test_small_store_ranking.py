"""Small scopes with the real model: words without content never decide a ranking, and the README demo's questions
are each answered by their first hit.

In a scope of a few sessions, BM25's IDF cannot tell "now" from "Denver": both are in one or two rounds. These tests
pin what a person checks first: the first hit answers the question.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from graphrecall import Memory, RetrievalConfig, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.formats import read_sessions
from graphrecall.retrieve.retriever import HybridRetriever

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO = Scope(org_id="demo", user_id="alex")
DEMO_DATE = "2024-07-01T09:00:00"
SIX = Scope(org_id="acme", user_id="sam")

# The issue's report, rebuilt: six sessions where "now" appears in sessions about something else. ("Where do I
# work?" against a lunch question that must "work for the kids" still ranks the lunch first: MiniLM puts the two
# within one rank and BM25's "work" breaks the tie, see docs/benchmarks.md "Small stores".)
SIX_SESSIONS: list[tuple[str, str, str]] = [
    ("dog", "Pepper finally sleeps on our bed now, no more crate.", "That's a big step for a rescue dog."),
    (
        "flat",
        "We signed the lease! Our flat is on Rue Oberkampf in Paris.",
        "Congratulations on the new flat.",
    ),
    ("tofu", "Mapo tofu is now my favourite dinner, I make it twice a week.", "It's a great weeknight dish."),
    ("job", "I started as a nurse at Saint-Louis hospital on Monday.", "Good luck with the new job!"),
    ("food", "Any quick lunches? They have to work for the kids too.", "Try grain bowls and omelettes."),
    ("bike", "Bought a second-hand road bike for the commute.", "Check the chain and brakes first."),
]


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    root = tmp_path_factory.mktemp("smallstore")
    with Memory.open(root, settings=Settings(root=root)) as m:  # the default, real embedder
        m.add_sessions(DEMO, read_sessions(EXAMPLES / "chat_history.json"))
        m.add_sessions(
            SIX,
            [
                {
                    "session_id": sid,
                    "date": datetime(2024, 5, 1, 20) + timedelta(days=3 * i),
                    "messages": [{"role": "user", "content": u}, {"role": "assistant", "content": a}],
                }
                for i, (sid, u, a) in enumerate(SIX_SESSIONS)
            ],
        )
        yield m


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Where do I live now?", "Denver"),
        ("What is my dog's name?", "Biscuit"),
        ("What did I plan for my trip?", "Japan"),
        ("What diet am I following?", "vegetarian"),
        ("Where do I work now?", "Terra Analytics"),
    ],
)
def test_each_demo_question_is_answered_by_its_first_hit(mem: Memory, question: str, answer: str) -> None:
    from examples.demo import QUESTION_DATE, QUESTIONS  # the demo's own questions, so they cannot drift apart

    assert question in QUESTIONS and QUESTION_DATE == DEMO_DATE
    first = mem.search(DEMO, question, k=3, question_date=DEMO_DATE)[0]
    assert answer in first.text, (question, first.session_id, first.text)


@pytest.mark.parametrize(
    ("question", "session"), [("Where do I live now?", "flat"), ("Where do I live?", "flat")]
)
def test_a_shared_function_word_does_not_outrank_the_answer(mem: Memory, question: str, session: str) -> None:
    hits = mem.search(SIX, question, k=3, question_date="2024-06-01")
    assert hits[0].session_id == session, [(h.session_id, h.signals) for h in hits]
    assert all(
        "now" not in h.text.lower() or "bm25" not in h.signals for h in hits if h.session_id != session
    )


def test_the_old_ranking_is_one_setting_away(mem: Memory) -> None:
    """``query_stopwords=False, small_store_rounds=0`` ranks as before: then "now" is a query term again, and the
    sessions that share nothing with the question but "now" get a BM25 score."""
    old = HybridRetriever(mem.embedder, RetrievalConfig(query_stopwords=False, small_store_rounds=0))
    mem.flush()  # the old retriever reads Kuzu only
    with testing.database(mem, SIX) as db:
        before = old.search(db, "Where do I live now?", 6)
    now_only = {h.session_id for h in before if "bm25" in h.signals} - {"flat"}
    assert now_only == {"dog", "tofu"}
    after = mem.search(SIX, "Where do I live now?", k=6)
    assert not [h.session_id for h in after if "bm25" in h.signals and h.session_id in now_only]


def test_the_opt_in_recency_list_lifts_the_latest_mention_for_a_question_about_now(tmp_path: Path) -> None:
    sessions = [
        ("s1", "2024-01-10", "I work at Lakeshore Bank as a backend engineer, work work work."),
        ("s2", "2024-03-03", "Big news: I signed with Terra Analytics, starting Monday."),
    ]
    ranked = {}
    for weight in (0.0, 5.0):
        root = tmp_path / f"w{weight}"
        cfg = RetrievalConfig(recency_weight=weight)
        with Memory.open(
            root, embedder=HashingEmbedder(64), settings=Settings(root=root, retrieval=cfg)
        ) as m:
            for sid, date, text in sessions:
                m.add_session(("acme", "ana"), [{"role": "user", "content": text}], session_id=sid, date=date)
            ranked[weight] = [h.session_id for h in m.search(("acme", "ana"), "Where do I work now?", k=2)]
            assert (
                m.search(("acme", "ana"), "Where did I work?", k=2)[0].session_id == "s1"
            )  # no "now": no list
    assert ranked[0.0][0] == "s1" and ranked[5.0][0] == "s2"
