"""Retrieval quality with the real bundled model (all-MiniLM-L6-v2): paraphrases, rare keywords, replies, fusion.

One module-scoped Memory holds ~two dozen small sessions (one haystack, loaded once); every question is labelled
with the session that answers it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.dialogues import dialogue_sessions

from graphrecall import Memory, RetrievalConfig, Scope, Settings, testing
from graphrecall.retrieve.retriever import HybridRetriever
from graphrecall.store import rounds as q

SCOPE = Scope(org_id="acme", user_id="alice")

SESSIONS: dict[str, list[str]] = {
    "pet": ["I adopted a puppy called Biscuit last weekend!", "Congratulations, enjoy the puppy cuddles."],
    "router": ["My new router model XQ-4471 keeps dropping the wifi.", "Try updating its firmware first."],
    "back": [
        "My lower back hurts after sitting at my desk all day.",
        "I'd recommend McKenzie extension exercises and a standing break every hour.",
    ],
    "sister": ["My sister Maria just moved to Lisbon for a new job.", "Lisbon is lovely, she'll enjoy it."],
    "allergy": ["I found out I'm allergic to shellfish.", "Good to know, avoid shrimp and crab then."],
    "car": ["We finally sold the old Volvo and bought an electric Kia.", "Nice, EVs are cheap to run."],
    "book": ["I'm reading The Left Hand of Darkness by Le Guin.", "A classic of science fiction."],
    "gym": ["I signed up for a climbing gym membership downtown.", "Bouldering is a great workout."],
    "vacation": ["We spent two weeks hiking in the Dolomites in July.", "Sounds breathtaking."],
    "cooking": ["I baked sourdough bread for the first time.", "How did the crust turn out?"],
    "work": ["I got promoted to senior data engineer at my company.", "Well deserved, congratulations!"],
    "plant": ["My monstera has yellow leaves lately.", "That's often overwatering; let the soil dry out."],
    "coffee": ["I switched from espresso to pour-over coffee.", "A V60 brings out fruity notes."],
    "invoice": ["Invoice number INV-88213 from the plumber is still unpaid.", "I'll remind you next week."],
    "music": ["I started learning to play the cello.", "Practice scales every day."],
    "garden": ["I planted tomatoes and basil in raised beds.", "Companion planting, great choice."],
    "budget": [
        "I want to save more money each month.",
        "I suggest the 50/30/20 rule: needs, wants and savings.",
    ],
    "sleep": [
        "I keep waking up at 3am and can't fall back asleep.",
        "You could try cutting caffeine after noon and keeping the bedroom cool.",
    ],
    "movie": ["We watched Dune Part Two at the IMAX.", "The sound design is incredible."],
    "lang": ["I'm practising Japanese with Duolingo every morning.", "Ganbatte! Consistency matters most."],
    "wedding": ["My best friend Tom is getting married in Porto in October.", "How exciting!"],
    "laptop": ["My laptop's serial number is ZK9-330-PLM for the warranty claim.", "Keep the receipt too."],
    "run": ["I ran my first half marathon in 1:58.", "That's a great debut time."],
    "tea": ["Can you recommend a tea for the evening?", "Chamomile or rooibos: both are caffeine-free."],
    # Near-duplicates: the user side is alike, only a code or the reply tells them apart.
    "invoice2": [
        "Invoice number INV-55102 from the electrician is still unpaid.",
        "I'll remind you next week.",
    ],
    "invoice3": ["Invoice number INV-73390 from the roofer is still unpaid.", "I'll remind you next week."],
    "router2": ["My old router model RT-1190 keeps dropping the wifi.", "Try updating its firmware first."],
    "laptop2": ["My tablet's serial number is QW4-812-XNE for the warranty claim.", "Keep the receipt too."],
    "back2": [
        "My back is sore again after sitting all day.",
        "If it persists, please see a physiotherapist.",
    ],
    "budget2": ["I want to put more money aside every month.", "Cancel the subscriptions you never use."],
    "tea2": ["Can you recommend a drink for the morning?", "A strong black tea or an espresso."],
}

# (question, session that answers it)
PARAPHRASES = [
    ("What's the name of my dog?", "pet"),
    ("Which city did my sibling relocate to?", "sister"),
    ("What food am I not able to eat?", "allergy"),
    ("What kind of vehicle do we drive now?", "car"),
    ("Which novel am I currently reading?", "book"),
    ("What musical instrument am I learning?", "music"),
    ("Where did we go on our summer holiday?", "vacation"),
]
KEYWORDS = [
    ("XQ-4471", "router"),
    ("INV-88213", "invoice"),
    ("INV-55102", "invoice2"),
    ("ZK9-330-PLM", "laptop"),
    ("QW4-812-XNE", "laptop2"),
]
REPLIES = [
    ("What exercises did you suggest for my back?", "back"),
    ("What rule did you recommend for saving money?", "budget"),
    ("Which caffeine-free drinks did you suggest?", "tea"),
]
LABELLED = PARAPHRASES + KEYWORDS + REPLIES


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    root: Path = tmp_path_factory.mktemp("quality")
    with Memory.open(root, settings=Settings(root=root)) as m:  # the default, real embedder
        m.add_sessions(SCOPE, dialogue_sessions(SESSIONS))
        m.flush()  # into Kuzu: tests below search the store directly, past the write-ahead tail
        yield m


def top_sessions(mem: Memory, question: str, k: int = 3, config: RetrievalConfig | None = None) -> list[str]:
    if config is None:
        hits = mem.search(SCOPE, question, k)
    else:
        with testing.database(mem, SCOPE, create=False) as db:
            hits = HybridRetriever(mem.embedder, config).search(db, question, k)
    return [h.session_id for h in hits]


def mean_reciprocal_rank(mem: Memory, config: RetrievalConfig, labelled: list[tuple[str, str]]) -> float:
    total = 0.0
    for question, expected in labelled:
        ranked = top_sessions(mem, question, 10, config)
        total += 1.0 / (ranked.index(expected) + 1) if expected in ranked else 0.0
    return total / len(labelled)


def test_the_real_model_is_in_use(mem: Memory) -> None:
    assert mem.stats(SCOPE).embedder_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert mem.stats(SCOPE).dim == 384


@pytest.mark.parametrize(("question", "expected"), PARAPHRASES)
def test_paraphrased_questions_find_the_round_in_the_top_3(mem: Memory, question: str, expected: str) -> None:
    assert expected in top_sessions(mem, question)


@pytest.mark.parametrize(("question", "expected"), KEYWORDS)
def test_rare_codes_are_found_by_keyword(mem: Memory, question: str, expected: str) -> None:
    [hit, *_] = mem.search(SCOPE, f"Has {question} been dealt with?", 3)
    assert hit.session_id == expected
    assert hit.signals.get("bm25", 0.0) > 0
    bm25_only = RetrievalConfig(weights={"vector": 0.0, "bm25": 1.0, "bm25_user": 0.0})
    assert top_sessions(mem, question, 1, bm25_only) == [expected]


@pytest.mark.parametrize(("question", "expected"), REPLIES)
def test_questions_about_what_the_assistant_said_use_reply_vectors(
    mem: Memory, question: str, expected: str
) -> None:
    assert expected in top_sessions(mem, question)


def test_reply_vectors_tell_apart_rounds_whose_user_turns_are_alike(mem: Memory) -> None:
    vector_only = {"vector": 1.0, "bm25": 0.0, "bm25_user": 0.0}
    with_replies = mean_reciprocal_rank(mem, RetrievalConfig(weights=vector_only), REPLIES)
    without = mean_reciprocal_rank(
        mem, RetrievalConfig(weights=vector_only, use_reply_vectors=False), REPLIES
    )
    assert with_replies > without, (with_replies, without)


def test_fusion_beats_each_single_signal(mem: Memory) -> None:
    # This scope has ~35 rounds, so the defaults give the lexical lists less weight (``small_store_rounds``); the
    # fusion itself is compared with every list at its configured weight, and the defaults must not lose to either.
    fused = mean_reciprocal_rank(mem, RetrievalConfig(small_store_rounds=0), LABELLED)
    defaults = mean_reciprocal_rank(mem, RetrievalConfig(), LABELLED)
    # A list left out of ``weights`` keeps its default weight, so each single-signal run names every round list.
    vector_only = mean_reciprocal_rank(
        mem, RetrievalConfig(weights={"vector": 1.0, "bm25": 0.0, "bm25_user": 0.0}), LABELLED
    )
    bm25_only = mean_reciprocal_rank(
        mem, RetrievalConfig(weights={"vector": 0.0, "bm25": 1.0, "bm25_user": 1.0}), LABELLED
    )
    assert fused > vector_only, (fused, vector_only, bm25_only)
    assert fused > bm25_only, (fused, vector_only, bm25_only)
    assert defaults >= max(vector_only, bm25_only), (defaults, vector_only, bm25_only)


def _hits(mem: Memory, question: str, config: RetrievalConfig, **kw: object) -> list[tuple[str, float]]:
    with testing.database(mem, SCOPE, create=False) as db:
        hits = HybridRetriever(mem.embedder, config).search(db, question, 10, **kw)  # type: ignore[arg-type]
    return [(h.id, round(h.score, 12)) for h in hits]


def test_parallel_and_sequential_search_rank_alike(mem: Memory) -> None:
    for question, _ in LABELLED:
        assert _hits(mem, question, RetrievalConfig(parallel=True)) == _hits(
            mem, question, RetrievalConfig(parallel=False)
        ), question


def test_search_reports_the_time_of_each_stage(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stage is charged with its own time: a store query made 50 ms slower shows up under its stage (and
    under no other), and with the stages run one after another they add up to no more than the search took."""
    delay_ms = 50.0
    real = q.lexical_search

    def slow_lexical_search(*args: object) -> list[tuple[str, float]]:
        time.sleep(delay_ms / 1000)
        return real(*args)  # type: ignore[arg-type]

    question = "What exercises did you suggest for my back?"
    quick: dict[str, float] = {}
    _hits(mem, question, RetrievalConfig(parallel=False), timings=quick)
    monkeypatch.setattr("graphrecall.store.rounds.lexical_search", slow_lexical_search)
    slow: dict[str, float] = {}
    t0 = time.perf_counter()
    _hits(mem, question, RetrievalConfig(parallel=False), timings=slow)
    wall_ms = (time.perf_counter() - t0) * 1000
    assert {"embed_query", "bm25", "vec_user", "vec_reply", "fetch_rows"} <= slow.keys()
    assert slow["bm25"] >= delay_ms
    others = {name: ms for name, ms in slow.items() if name != "bm25"}
    assert sum(others.values()) < wall_ms - delay_ms
    assert sum(slow.values()) <= wall_ms
    assert slow.keys() == quick.keys()


def test_a_partial_weights_dict_changes_only_the_lists_it_names(mem: Memory) -> None:
    """``weights={"bm25": 0.5}`` ranks exactly as the defaults with bm25 at 0.5: the user-side list stays on and the
    other lists keep their default weights (before, a list left out weighed 1 and the user-side list was dropped)."""
    # At full size (this scope is small, and small-scope scaling used to give a missing list a weight again).
    partial = RetrievalConfig(weights={"bm25": 0.5}, small_store_rounds=0)
    spelled_out = RetrievalConfig(weights={**RetrievalConfig().weights, "bm25": 0.5}, small_store_rounds=0)
    for question, _ in LABELLED:
        with testing.database(mem, SCOPE, create=False) as db:
            a = HybridRetriever(mem.embedder, partial).search(db, question, 10)
            b = HybridRetriever(mem.embedder, spelled_out).search(db, question, 10)
        assert [(h.id, h.score, h.signals) for h in a] == [(h.id, h.score, h.signals) for h in b], question
    with testing.database(mem, SCOPE, create=False) as db:
        hits = HybridRetriever(mem.embedder, partial).search(db, "my back hurts", 10)
    assert any("bm25_user" in h.signals for h in hits)


def test_the_user_side_list_rescores_only_the_user_pool(mem: Memory) -> None:
    with testing.database(mem, SCOPE, create=False) as db:
        hits = HybridRetriever(mem.embedder, RetrievalConfig(user_pool=3)).search(db, "my back hurts", 10)
    assert 1 <= sum("bm25_user" in h.signals for h in hits) <= 3


@pytest.mark.parametrize("parallel", [True, False])
def test_a_failing_store_query_fails_the_search_with_its_own_error(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    def broken(*_: object) -> list[tuple[str, float]]:
        raise RuntimeError("fts index unavailable")

    monkeypatch.setattr("graphrecall.store.rounds.lexical_search", broken)
    with pytest.raises(RuntimeError, match="fts index unavailable"):
        _hits(mem, "my back hurts", RetrievalConfig(parallel=parallel))


def test_a_failed_search_returns_only_after_its_running_stages_have_finished(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Otherwise a worker could still be reading the database after the caller handed it back to the pool."""
    finished: list[str] = []
    real_fts = q.lexical_search

    def slow_fts(*args: object) -> list[tuple[str, float]]:
        time.sleep(0.5)
        out = real_fts(*args)  # type: ignore[arg-type]
        finished.append("fts")
        return out

    def broken_hnsw(*_: object) -> list[tuple[str, float]]:
        raise RuntimeError("hnsw index unavailable")

    monkeypatch.setattr("graphrecall.store.rounds.lexical_search", slow_fts)
    monkeypatch.setattr("graphrecall.store.rounds.vector_search", broken_hnsw)
    with pytest.raises(RuntimeError, match="hnsw index unavailable"):
        _hits(mem, "my back hurts", RetrievalConfig(parallel=True))
    assert finished == ["fts"]


def test_the_user_list_is_skipped_for_questions_about_someone_else(mem: Memory) -> None:
    def user_list_used(question: str, user_side: str) -> bool:
        with testing.database(mem, SCOPE, create=False) as db:
            config = RetrievalConfig.model_validate({"user_side": user_side})
            hits = HybridRetriever(mem.embedder, config).search(db, question, 10)
        return any("bm25_user" in h.signals for h in hits)

    assert user_list_used("Where did my sister move to?", "unless_about_others")
    assert user_list_used("Lisbon", "unless_about_others")  # a keyword query is about no one
    assert not user_list_used("Where did Maria move to?", "unless_about_others")
    assert user_list_used("Where did Maria move to?", "always")


def test_a_question_about_someone_else_does_not_penalize_replies(mem: Memory) -> None:
    """Its evidence may be in either half of a round: the reply's similarity counts in full."""

    def vector_signal(user_side: str) -> float:
        config = RetrievalConfig.model_validate({"user_side": user_side, "reply_penalty": 0.5})
        with testing.database(mem, SCOPE, create=False) as db:
            hits = HybridRetriever(mem.embedder, config).search(
                db, "Which extension exercises did Tom do?", 10
            )
        return next(h.signals["vector"] for h in hits if h.session_id == "back")

    assert vector_signal("unless_about_others") > vector_signal("always") + 0.1
