"""Context assembly: chosen by relevance within the token budget, shown chronologically and grouped by session."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.models import Hit
from graphrecall.retrieve.context import FIRST_SESSIONS, Packing, build_context, estimate_tokens


def hit(rid: str, session: str, day: int, text: str = "", score: float = 1.0) -> Hit:
    return Hit(
        id=rid,
        text=text or f"user: something about {rid}",
        score=score,
        session_id=session,
        date=datetime(2024, 5, day, 12, 0),
        message_ids=[f"{session}#0"],
    )


def test_hits_are_shown_oldest_first_whatever_their_relevance_order() -> None:
    hits = [hit("new@0", "new", 20), hit("old@0", "old", 2), hit("mid@0", "mid", 10)]
    ctx = build_context("q", hits, 2000)
    positions = [ctx.text.index(f"[{h}]") for h in ("old@0", "mid@0", "new@0")]
    assert positions == sorted(positions)
    assert [h.id for h in ctx.hits] == ["new@0", "old@0", "mid@0"]  # hits keep relevance order


def test_hits_of_one_session_share_one_dated_heading() -> None:
    hits = [hit("a@1", "a", 3), hit("b@0", "b", 4), hit("a@0", "a", 3)]
    ctx = build_context("q", hits, 2000)
    assert ctx.text.count("### Session a — 2024-05-03 (Fri) 12:00") == 1
    assert ctx.text.count("### Session b") == 1
    section_a = ctx.text.split("### Session a")[1].split("### Session b")[0]
    assert "[a@0]" in section_a
    assert "[a@1]" in section_a


def test_question_date_heads_the_context() -> None:
    ctx = build_context("q", [hit("a@0", "a", 3)], 2000, question_date=datetime(2024, 5, 15, 14, 30))
    assert ctx.text.startswith("Question date: 2024-05-15 (Wed) 14:30\n")
    assert not build_context("q", [hit("a@0", "a", 3)], 2000).text.startswith("Question date")


def test_when_everything_fits_nothing_is_truncated() -> None:
    hits = [hit(f"s{i}@0", f"s{i}", i + 1) for i in range(3)]
    ctx = build_context("q", hits, 2000)
    assert not ctx.truncated
    assert len(ctx.hits) == 3
    assert ctx.token_count == estimate_tokens(ctx.text)
    assert ctx.token_budget == 2000


def test_hits_that_do_not_fit_are_dropped_best_first_and_flagged() -> None:
    hits = [hit(f"s{i}@0", f"s{i}", i + 1, text="word " * 40) for i in range(10)]
    ctx = build_context("q", hits, 200)
    assert ctx.truncated
    assert 0 < len(ctx.hits) < 10
    assert [h.id for h in ctx.hits] == [h.id for h in hits[: len(ctx.hits)]]
    assert ctx.token_count <= 200


def test_an_over_long_hit_is_cut_rather_than_dropped() -> None:
    ctx = build_context("q", [hit("a@0", "a", 1, text="x" * 10_000)], 1000)
    assert [h.id for h in ctx.hits] == ["a@0"]
    assert ctx.truncated
    assert "…" in ctx.text
    assert ctx.token_count <= 1000


def test_a_budget_below_one_token_is_refused() -> None:
    with pytest.raises(ValueError, match="token_budget"):
        build_context("q", [], 0)


texts = st.text(min_size=1, max_size=600)
hits_strategy = st.lists(
    st.builds(
        lambda i, s, d, t: Hit(
            id=f"{s}@{i}",
            text=t,
            score=1.0,
            session_id=s,
            date=None if d is None else datetime(2024, 1, 1) + timedelta(hours=d),
        ),
        st.integers(0, 50),
        st.text(alphabet="abcxyz-_0123456789", min_size=1, max_size=40),
        st.one_of(st.none(), st.integers(0, 10_000)),
        texts,
    ),
    max_size=25,
    unique_by=lambda h: h.id,
)


@given(
    hits=hits_strategy,
    budget=st.integers(min_value=1, max_value=3000),
    question_date=st.one_of(st.none(), st.datetimes(min_value=datetime(2000, 1, 1))),
    packing=st.sampled_from(["evidence", "whole"]),
    query=st.sampled_from(["q", "camera lens", "what did I say about x"]),
)
def test_the_budget_is_never_exceeded(
    hits: list[Hit], budget: int, question_date: datetime | None, packing: Packing, query: str
) -> None:
    ctx = build_context(query, hits, budget, question_date=question_date, packing=packing)
    assert ctx.token_count <= budget
    assert ctx.token_count == estimate_tokens(ctx.text)
    assert {h.id for h in ctx.hits} <= {h.id for h in hits}
    for h in ctx.hits:
        assert f"[{h.id}]" in ctx.text
    if len(ctx.hits) < len(hits):
        assert ctx.truncated


# -- evidence packing ------------------------------------------------------------------------------------------------
ADVICE = "Here is some general advice that goes on for a while without saying much. " * 30


def long_round(rid: str, session: str, day: int, said: str, answer: str = "") -> Hit:
    return hit(rid, session, day, text=f"user: {said}\nassistant: {ADVICE}{answer}{ADVICE}")


def test_evidence_from_ten_sessions_fits_where_whole_rounds_do_not() -> None:
    hits = [
        long_round(f"s{i}@0", f"s{i}", i + 1, f"I bought camera lens number {i} today.") for i in range(10)
    ]
    question = "How many camera lenses have I bought?"
    whole = build_context(question, hits, 2000, packing="whole")
    packed = build_context(question, hits, 2000)
    assert len({h.session_id for h in whole.hits}) < 5
    assert {h.session_id for h in packed.hits} == {f"s{i}" for i in range(10)}
    for i in range(10):  # each user turn whole
        assert f"I bought camera lens number {i} today." in packed.text
    assert packed.token_count <= 2000


def test_a_long_reply_is_cut_to_the_sentences_that_bear_on_the_question() -> None:
    answer = "The Narita Express to Tokyo Station costs 3,000 yen. "
    hits = [long_round(f"s{i}@0", f"s{i}", i + 1, "Any tips for Tokyo?", answer) for i in range(6)]
    ctx = build_context("How much does the Narita Express cost?", hits, 2000)
    assert ctx.text.count(answer.strip()) == 6
    assert set(ctx.excerpted) == {h.id for h in hits}
    assert ctx.text.count(", excerpt)") == 6 and ctx.truncated


def test_one_sessions_many_rounds_do_not_push_out_a_second_session() -> None:
    same = [long_round(f"a@{i}", "a", 1, f"Round {i} about gardening.") for i in range(12)]
    other = long_round("b@0", "b", 2, "I planted tomatoes.")
    ctx = build_context("gardening tomatoes", [*same, other], 1500)
    assert "b@0" in {h.id for h in ctx.hits}


def test_budget_left_over_shows_the_best_hits_whole() -> None:
    hits = [long_round("best@0", "s1", 1, "I adopted a cat."), hit("small@0", "s2", 2)]
    ctx = build_context("cat", hits, 4000)
    assert hits[0].text in ctx.text and ctx.excerpted == []
    assert not ctx.truncated


def test_when_everything_fits_both_packings_show_the_same() -> None:
    hits = [hit(f"s{i}@0", f"s{i}", i + 1, text=f"user: short {i}\nassistant: ok") for i in range(5)]
    assert build_context("q", hits, 2000).text == build_context("q", hits, 2000, packing="whole").text


def test_a_gold_sessions_second_round_is_not_pushed_out_by_weak_sessions() -> None:
    ranked = [long_round(f"s{i}@0", f"s{i}", i + 1, f"Trip {i} to the coast.") for i in range(FIRST_SESSIONS)]
    second = long_round("s0@1", "s0", 1, "The second part of trip 0.")
    weak = [long_round(f"w{i}@0", f"w{i}", 20, f"Unrelated chat {i}.") for i in range(24)]
    ctx = build_context("coast trips", [*ranked, second, *weak], 2000)
    shown = [h.id for h in ctx.hits]
    assert "s0@1" in shown and {h.id for h in ranked} <= set(shown)
    assert len(shown) < len(ranked) + 1 + len(weak)  # the budget is spent before the weakest sessions
