"""Relative dates are resolved against the session date in Python (2024-03-11 is a Monday)."""

from __future__ import annotations

from datetime import datetime

import pytest

from graphrecall.extract.dates import parse_iso, resolve_expression, resolve_span, shift_months

MON = datetime(2024, 3, 11, 15, 30)


@pytest.mark.parametrize(
    ("expr", "start", "end"),
    [
        ("yesterday", "2024-03-10", "2024-03-10"),
        ("today", "2024-03-11", "2024-03-11"),
        ("tomorrow", "2024-03-12", "2024-03-12"),
        ("last Tuesday", "2024-03-05", "2024-03-05"),
        ("last Monday", "2024-03-04", "2024-03-04"),
        ("next Friday", "2024-03-15", "2024-03-15"),
        ("this Saturday", "2024-03-16", "2024-03-16"),
        ("last weekend", "2024-03-09", "2024-03-10"),
        ("this weekend", "2024-03-16", "2024-03-17"),
        ("3 days ago", "2024-03-08", "2024-03-08"),
        ("a couple of days ago", "2024-03-09", "2024-03-09"),
        ("two weeks ago", "2024-02-26", "2024-02-26"),
        ("in two weeks", "2024-03-25", "2024-03-25"),
        ("a month ago", "2024-02-11", "2024-02-11"),
        ("last week", "2024-03-04", "2024-03-10"),
        ("last month", "2024-02-01", "2024-02-29"),
        ("next month", "2024-04-01", "2024-04-30"),
        ("last year", "2023-01-01", "2023-12-31"),
        ("on March 3rd", "2024-03-03", "2024-03-03"),
        ("the 5th of May", "2024-05-05", "2024-05-05"),
        ("in December", "2023-12-01", "2023-12-31"),
        ("2023-07-14", "2023-07-14", "2023-07-14"),
        ("in 2019", "2019-01-01", "2019-12-31"),
    ],
)
def test_expressions(expr: str, start: str, end: str) -> None:
    span = resolve_expression(expr, MON)
    assert span is not None
    assert (span[0].date().isoformat(), span[1].date().isoformat()) == (start, end)
    assert span[0] <= span[1]


@pytest.mark.parametrize(
    "expr", ["", "Tuesday", "at some point", "soon", "the other day", "3000-01-01", "2024-13-45"]
)
def test_unknown_or_ambiguous_wording_resolves_to_nothing(expr: str) -> None:
    assert resolve_expression(expr, MON) is None


def test_month_arithmetic_clamps_the_day() -> None:
    assert shift_months(datetime(2024, 1, 31), 1) == datetime(2024, 2, 29)
    assert shift_months(datetime(2024, 3, 31), -13) == datetime(2023, 2, 28)


def test_span_prefers_our_arithmetic_then_a_valid_iso_date_then_nothing() -> None:
    assert resolve_span("last Tuesday", "2024-01-01", None, MON)[:1] == (datetime(2024, 3, 5),)
    assert resolve_span("whenever", "2024-01-01", "2024-01-03", MON)[2] == "iso"
    s, e, how = resolve_span(None, "2024-01-05", "2024-01-01", MON)  # end before start: a point
    assert (s, how) == (datetime(2024, 1, 5), "iso") and e is not None and e.date() == s.date()
    assert resolve_span(None, "next week", None, MON) == (None, None, "none")
    assert parse_iso("2024-03-05T10:00:00+02:00") == (datetime(2024, 3, 5, 8), datetime(2024, 3, 5, 8))
