"""Time expressions resolve relative to the question date, never to the wall clock.

All examples are asked on Wednesday 2024-05-15 at 14:30.
"""

from __future__ import annotations

import datetime as dt
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.retrieve import timeparse
from graphrecall.retrieve.timeparse import parse_time_range

ASKED = datetime(2024, 5, 15, 14, 30)  # a Wednesday
END_OF_DAY = timedelta(days=1) - timedelta(microseconds=1)


def rng(question: str, asked: datetime = ASKED) -> tuple[datetime, datetime]:
    tr = parse_time_range(question, asked)
    assert tr is not None, f"no time range found in {question!r}"
    return tr.start, tr.end


def whole_day(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    start = datetime(y, m, d)
    return start, start + END_OF_DAY


def covers(question: str, inside: list[datetime], outside: list[datetime]) -> None:
    start, end = rng(question)
    for d in inside:
        assert start <= d <= end, f"{question!r} -> {start}..{end} should contain {d}"
    for d in outside:
        assert not start <= d <= end, f"{question!r} -> {start}..{end} should not contain {d}"


def test_yesterday_and_today_are_whole_days() -> None:
    assert rng("What did I cook yesterday?") == whole_day(2024, 5, 14)
    assert rng("what did I eat today") == whole_day(2024, 5, 15)
    assert rng("what did I say the day before yesterday") == whole_day(2024, 5, 13)
    assert rng("what happened yesterday") == whole_day(2024, 5, 14)


def test_n_days_weeks_months_ago_are_windows_around_that_point() -> None:
    covers("What did I buy 3 days ago?", [datetime(2024, 5, 12, 9)], [ASKED, datetime(2024, 5, 9)])
    covers("what did I do two weeks ago", [datetime(2024, 5, 1)], [ASKED, datetime(2024, 4, 10)])
    covers("where was I three months ago", [datetime(2024, 2, 15)], [ASKED, datetime(2023, 11, 1)])
    covers("a year ago I moved", [datetime(2023, 5, 15)], [ASKED, datetime(2022, 5, 15)])


def test_last_week_is_the_previous_monday_to_sunday() -> None:
    start, end = rng("Which restaurant did I try last week?")
    assert start == datetime(2024, 5, 6)
    assert end == datetime(2024, 5, 12) + END_OF_DAY


def test_last_month_and_last_year_are_the_previous_calendar_periods() -> None:
    assert rng("what did I read last month") == (datetime(2024, 4, 1), datetime(2024, 4, 30, 23, 59, 59))
    assert rng("my trips last year") == (datetime(2023, 1, 1), datetime(2023, 12, 31, 23, 59, 59))
    march = datetime(2024, 3, 31, 12)
    assert rng("last month", march) == (datetime(2024, 2, 1), datetime(2024, 2, 29, 23, 59, 59))
    january = datetime(2024, 1, 10)
    assert rng("last month", january) == (datetime(2023, 12, 1), datetime(2023, 12, 31, 23, 59, 59))


def test_this_month_runs_from_its_first_day_to_the_question() -> None:
    assert rng("how many books this month?") == (datetime(2024, 5, 1), ASKED)


def test_the_past_n_days_ends_at_the_question() -> None:
    assert rng("in the past 10 days, what did I watch?") == (ASKED - timedelta(days=10), ASKED)
    assert rng("over the last two weeks") == (ASKED - timedelta(weeks=2), ASKED)


def test_last_weekday_is_the_most_recent_one_before_today() -> None:
    assert rng("what did I do last Saturday?") == whole_day(2024, 5, 11)
    assert rng("last monday") == whole_day(2024, 5, 13)
    assert rng("last wednesday") == whole_day(2024, 5, 8)  # asked on a Wednesday: a week back, not today


def test_last_weekend_is_saturday_and_sunday() -> None:
    assert rng("what did I do last weekend") == (datetime(2024, 5, 11), datetime(2024, 5, 12) + END_OF_DAY)


def test_a_month_name_means_its_latest_occurrence_unless_a_year_is_given() -> None:
    assert rng("what did I do in March?") == (datetime(2024, 3, 1), datetime(2024, 3, 31, 23, 59, 59))
    assert rng("in August") == (datetime(2023, 8, 1), datetime(2023, 8, 31, 23, 59, 59))
    assert rng("in March 2022") == (datetime(2022, 3, 1), datetime(2022, 3, 31, 23, 59, 59))


def test_a_day_and_month_in_either_order() -> None:
    assert rng("what happened on March 3rd?") == whole_day(2024, 3, 3)
    assert rng("on June 3") == whole_day(2023, 6, 3)  # June 3 2024 is after the question
    assert rng("on 3 March") == whole_day(2024, 3, 3)
    assert rng("the 3rd of March") == whole_day(2024, 3, 3)
    assert rng("on Feb 29, 2020") == whole_day(2020, 2, 29)


def test_a_year_and_an_iso_date() -> None:
    assert rng("what did I buy in 2022") == (datetime(2022, 1, 1), datetime(2022, 12, 31, 23, 59, 59))
    assert rng("on 2024-02-29 I") == whole_day(2024, 2, 29)


def test_since_a_month_runs_to_the_question() -> None:
    assert rng("what have I learned since March?") == (datetime(2024, 3, 1), ASKED)
    assert rng("since 2023") == (datetime(2023, 1, 1), ASKED)


@pytest.mark.parametrize(
    "question",
    [
        "What's the name of my dog?",
        "Where do I work?",
        "how many plants do I have",
        "",
        "in 1850",
        "on Feb 30",
    ],
)
def test_questions_without_a_usable_time_expression_give_none(question: str) -> None:
    assert parse_time_range(question, ASKED) is None


def test_without_a_question_date_nothing_is_resolved() -> None:
    assert parse_time_range("what did I do yesterday", None) is None


def test_the_expression_is_reported() -> None:
    tr = parse_time_range("What did I do last weekend with Sam?", ASKED)
    assert tr is not None
    assert tr.expression == "last weekend"


class _NoClock(dt.datetime):
    """A datetime whose clock raises: any wall-clock read inside the parser fails the test."""

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _NoClock:
        raise AssertionError("the wall clock was read")

    @classmethod
    def today(cls) -> _NoClock:
        raise AssertionError("the wall clock was read")

    @classmethod
    def utcnow(cls) -> _NoClock:
        raise AssertionError("the wall clock was read")


EXPRESSIONS = [
    "yesterday", "today", "3 days ago", "a week ago", "two months ago", "5 years ago", "last week", "this week",
    "past week", "last month", "this month", "past month", "last year", "this year", "the past 10 days",
    "the last 3 weeks", "last saturday", "last sunday", "last weekend", "in may", "in december 2021",
    "on march 3rd", "3rd of june", "in 2021", "since march", "since 2020", "2023-02-28", "on feb 29",
    "900000 days ago", "the past 99999 years", "in the past 100000000000 days",
]  # fmt: skip
questions = st.one_of(
    st.text(max_size=40),
    st.tuples(st.text(max_size=10), st.sampled_from(EXPRESSIONS), st.text(max_size=10)).map(" ".join),
)
asked_dates = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31))


@given(question=questions, asked=asked_dates)
def test_ranges_are_ordered_deterministic_and_clock_free(question: str, asked: datetime) -> None:
    first = parse_time_range(question, asked)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(timeparse, "datetime", _NoClock)
        second = parse_time_range(question, asked)
    assert first == second
    if first is not None:
        assert first.start <= first.end


@given(days=st.integers(min_value=-4000, max_value=4000))
def test_relative_expressions_move_with_the_question_date(days: int) -> None:
    asked = ASKED + timedelta(days=days)
    assert rng("what did I do yesterday", asked) == whole_day(*(asked - timedelta(days=1)).timetuple()[:3])
    start, end = rng("the past 10 days", asked)
    assert (start, end) == (asked - timedelta(days=10), asked)
