"""Relative-date resolution against the session date, done in Python.

Models are bad at calendar arithmetic ("last Tuesday" said on a Monday), so the extraction prompt asks for the
time *as said* (``when``) as well as the model's own ISO guess. ``resolve_span`` trusts its own arithmetic on the
expression first, then a well-formed ISO date from the model, and otherwise reports no time rather than a guess.
Every function is pure and anchored on the session date, never on the wall clock.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta

from graphrecall import timewords

Span = tuple[datetime, datetime]

MIN_YEAR, MAX_YEAR = 1900, 2200

_NUM_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
    "a few": 3, "few": 3, "several": 3,
}  # fmt: skip
_NUM = r"(\d+|a couple of|couple of|a few|few|several|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year|fortnight)s?"
_WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_WD = "|".join(_WEEKDAYS)
_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_MN = "|".join(sorted(_MONTHS, key=len, reverse=True))


def _day(d: datetime) -> Span:
    start = d.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1) - timedelta(microseconds=1)


def _month_span(year: int, month: int) -> Span:
    last = calendar.monthrange(year, month)[1]
    return datetime(year, month, 1), datetime(year, month, last, 23, 59, 59, 999999)


def _year_span(year: int) -> Span:
    return datetime(year, 1, 1), datetime(year, 12, 31, 23, 59, 59, 999999)


def shift_months(d: datetime, months: int) -> datetime:
    """``d`` moved by whole months, the day clamped to the target month's length (Jan 31 + 1 month = Feb 28/29)."""
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    return d.replace(year=year, month=month, day=min(d.day, calendar.monthrange(year, month)[1]))


def _offset(anchor: datetime, n: int, unit: str) -> datetime:
    if unit == "day":
        return anchor + timedelta(days=n)
    if unit == "week":
        return anchor + timedelta(weeks=n)
    if unit == "fortnight":
        return anchor + timedelta(weeks=2 * n)
    if unit == "month":
        return shift_months(anchor, n)
    return shift_months(anchor, 12 * n)


def _num(token: str) -> int:
    return int(token) if token.isdigit() else _NUM_WORDS[token]


def _week_monday(d: datetime) -> datetime:
    return _day(d - timedelta(days=d.weekday()))[0]


def _nearest_year(anchor: datetime, month: int, day: int | None, future: bool | None) -> int:
    """The year of a month (and day) named without one: the occurrence nearest the anchor, or the next/last one
    when the wording says so."""
    options = [anchor.year - 1, anchor.year, anchor.year + 1]

    def start(y: int) -> datetime:
        d = min(day or 1, calendar.monthrange(y, month)[1])
        return datetime(y, month, d)

    if future is True:
        return next(y for y in options if start(y) >= _day(anchor)[0])
    if future is False:
        return max(y for y in options if start(y) <= anchor)
    return min(options, key=lambda y: abs((start(y) - anchor).total_seconds()))


def resolve_expression(expression: str, anchor: datetime) -> Span | None:
    """The span a relative (or absolute) time expression denotes, said at ``anchor``; ``None`` when unknown.

    Points ("yesterday", "3 days ago") resolve to their whole day; periods ("last month", "next week") to the
    whole period. "next <weekday>" is the first such day after the anchor, "last <weekday>" the last one before.
    """
    e = " ".join(expression.lower().replace(",", " ").split())
    e = re.sub(r"\b(?:on|in|at|during|around|about|the)\b\s*", "", e).strip() if e else e
    if not e:
        return None
    iso = parse_iso(e)
    if iso is not None:
        return iso
    if re.fullmatch(r"(today|tonight|now|this (morning|afternoon|evening)|earlier today|right now)", e):
        return _day(anchor)
    if re.fullmatch(r"(yesterday|last night|yesterday (morning|afternoon|evening))", e):
        return _day(anchor - timedelta(days=1))
    if re.fullmatch(r"(tomorrow|tomorrow (morning|afternoon|evening|night))", e):
        return _day(anchor + timedelta(days=1))
    if e == "day before yesterday":
        return _day(anchor - timedelta(days=2))
    if e == "day after tomorrow":
        return _day(anchor + timedelta(days=2))
    if m := re.fullmatch(rf"{_NUM} {_UNIT} ago", e):
        return _day(_offset(anchor, -_num(m[1]), m[2]))
    if m := re.fullmatch(rf"(?:{_NUM} {_UNIT} from now|{_NUM} {_UNIT} later)", e):
        n, unit = (m[1], m[2]) if m[1] else (m[3], m[4])
        return _day(_offset(anchor, _num(n), unit))
    if m := re.fullmatch(rf"{_NUM} {_UNIT}", e):  # "in 3 days" after the preposition is stripped
        return _day(_offset(anchor, _num(m[1]), m[2]))
    if m := re.fullmatch(rf"(last|past|previous|this|next|coming|upcoming)? ?({_WD})", e):
        which, target = m[1] or "", _WEEKDAYS[m[2]]
        if which in ("last", "past", "previous"):
            back = (anchor.weekday() - target) % 7 or 7
            return _day(anchor - timedelta(days=back))
        if which in ("next", "coming", "upcoming"):
            ahead = (target - anchor.weekday()) % 7 or 7
            return _day(anchor + timedelta(days=ahead))
        if which == "this":
            return _day(_week_monday(anchor) + timedelta(days=target))
        return None  # a bare weekday is ambiguous between past and future
    if m := re.fullmatch(r"(last|past|previous|this|next|coming) (week|weekend|month|year)", e):
        which, unit = m[1], m[2]
        step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[which]
        if unit == "week":
            monday = _week_monday(anchor) + timedelta(weeks=step)
            return monday, monday + timedelta(days=7) - timedelta(microseconds=1)
        if unit == "weekend":
            sat = _week_monday(anchor) + timedelta(days=5, weeks=step)
            return sat, sat + timedelta(days=2) - timedelta(microseconds=1)
        if unit == "month":
            d = shift_months(anchor, step)
            return _month_span(d.year, d.month)
        return _year_span(anchor.year + step)
    if m := re.fullmatch(
        rf"(last|next|this)? ?({_MN})\.?(?: (\d{{1,2}})(?:st|nd|rd|th)?)?(?: (\d{{4}}))?", e
    ):
        return _month_day(anchor, m[1], _MONTHS[m[2]], m[3], m[4])
    if m := re.fullmatch(rf"(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MN})\.?(?: (\d{{4}}))?", e):
        return _month_day(anchor, None, _MONTHS[m[2]], m[1], m[3])
    if (m := re.fullmatch(r"(\d{4})", e)) and MIN_YEAR <= int(m[1]) <= MAX_YEAR:
        return _year_span(int(m[1]))
    return None


def _month_day(
    anchor: datetime, which: str | None, month: int, day: str | None, year: str | None
) -> Span | None:
    future = {"next": True, "last": False}.get(which or "")
    y = int(year) if year else _nearest_year(anchor, month, int(day) if day else None, future)
    if not MIN_YEAR <= y <= MAX_YEAR:
        return None
    if day is None:
        return _month_span(y, month)
    try:
        return _day(datetime(y, month, int(day)))
    except ValueError:
        return None


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_iso(value: str) -> Span | None:
    """An ISO-8601 date (the whole day) or datetime (that instant), within sane years; else ``None``."""
    text = value.strip()
    if not _ISO_DATE.match(text):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        from graphrecall.models import ensure_utc

        parsed = ensure_utc(parsed)
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        return None
    if len(text) == 10:
        return _day(parsed)
    return parsed, parsed


def resolve_span(
    when: str | None, start: str | None, end: str | None, anchor: datetime
) -> tuple[datetime | None, datetime | None, str]:
    """(start, end, how) for an extracted item: ``how`` is ``expression``, ``iso`` or ``none``.

    Our arithmetic on the expression wins over the model's date; the model's ISO dates are used only when they
    parse; an end before the start is dropped (a point in time), never silently swapped into a wrong range.
    """
    if when:
        span = resolve_expression(when, anchor)
        if span is None and (other := timewords.in_english(when)) is not None:
            span = resolve_expression(other[0], anchor)  # "две недели назад": as "2 weeks ago"
        if span is not None:
            return span[0], span[1], "expression"
    s = parse_iso(start) if start else None
    if s is None:
        return None, None, "none"
    e = parse_iso(end) if end else None
    if e is None or e[1] < s[0]:
        return s[0], s[1], "iso"
    return s[0], e[1], "iso"
