"""Question analysis: calendar ranges relative to the question date, event-relative anchors, sub-questions."""

from __future__ import annotations

from datetime import datetime

from graphrecall.read.analysis import analyze, parse_event_anchor

QD = datetime(2024, 4, 20, 12, 0)


def test_calendar_expressions_resolve_against_the_question_date() -> None:
    a = analyze("What did I buy last week?", QD)
    assert a.time_range is not None
    assert (a.time_range.start.date().isoformat(), a.time_range.end.date().isoformat()) == (
        "2024-04-08",
        "2024-04-14",
    )
    assert a.anchor is None


def test_event_relative_expressions_become_anchors_not_calendar_ranges() -> None:
    a = analyze("What did I cook two weeks before my trip to Lisbon?", QD)
    assert a.anchor is not None and a.time_range is None
    assert (a.anchor.offset_days, a.anchor.anchor) == (-14, "my trip to Lisbon")
    assert a.queries == [a.question]  # the Reader adds the anchor's own search when it resolves it


def test_an_anchor_resolves_around_the_anchor_date_plus_offset() -> None:
    anchor = parse_event_anchor("Where did I eat 3 days after the wedding?")
    assert anchor is not None and (anchor.offset_days, anchor.anchor) == (3, "the wedding")
    tr = anchor.resolve(datetime(2024, 6, 1, 15, 0))
    assert tr.start <= datetime(2024, 6, 4, 15, 0) <= tr.end
    assert tr.end - tr.start < (datetime(2024, 6, 8) - datetime(2024, 6, 1))


def test_anchor_wording_stops_before_the_rest_of_the_question() -> None:
    anchor = parse_event_anchor("A month before my sister's graduation, what did I order?")
    assert anchor is not None and anchor.anchor == "my sister's graduation" and anchor.offset_days == -30
    tail = parse_event_anchor("What was I reading two days after the marathon did I finish it?")
    assert tail is not None and tail.anchor == "the marathon"


def test_gap_questions_are_not_anchors() -> None:
    assert parse_event_anchor("How many days before the meeting did I attend the workshop?") is None


def test_compound_questions_add_their_parts_as_queries() -> None:
    a = analyze("Which did I buy first, the red kettle or the blue toaster?", QD)
    assert a.queries[0] == a.question and len(a.queries) == 3
