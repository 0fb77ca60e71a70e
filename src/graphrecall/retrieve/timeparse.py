"""Time expressions in a question, resolved to a date range relative to the question date (never the wall clock).

"last week", "two months ago", "in May", "on March 3rd", "yesterday", "the past 10 days", "last Saturday",
"2023-05-20"... and the same phrases in Russian, Chinese, German, Spanish and French (``timewords``). The range feeds the time signal of the retriever and the Reader's timeline tool. Unknown or vague
wording yields ``None`` rather than a guess.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta

from graphrecall import timewords
from graphrecall.models import TimeRange

_NUM_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "few": 3, "several": 3,
}  # fmt: skip
_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
_WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_NUM = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|couple of|few|several)"
_UNIT = r"(day|week|month|year|weekend)s?"


def _num(token: str) -> int:
    return int(token) if token.isdigit() else _NUM_WORDS[token]


def _day(d: datetime) -> tuple[datetime, datetime]:
    start = d.replace(hour=0, minute=0, second=0, microsecond=0)
    return start, start + timedelta(days=1) - timedelta(microseconds=1)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    last = calendar.monthrange(year, month)[1]
    return datetime(year, month, 1), datetime(year, month, last, 23, 59, 59)


def _shift_months(d: datetime, months: int) -> datetime:
    y, m = divmod(d.month - 1 + months, 12)
    year, month = d.year + y, m + 1
    return d.replace(year=year, month=month, day=min(d.day, calendar.monthrange(year, month)[1]))


def _span(unit: str, n: int, ref: datetime) -> timedelta:
    if unit == "day":
        return timedelta(days=n)
    if unit in ("week", "weekend"):
        return timedelta(weeks=n)
    if unit == "month":
        return ref - _shift_months(ref, -n)
    return timedelta(days=365 * n)


def parse_time_range(question: str, question_date: datetime | None) -> TimeRange | None:
    """The first recognisable time expression in ``question``, as an inclusive range; None when there is none."""
    if question_date is None:
        return None
    q = question.lower()
    ref = question_date
    try:
        found = _parse(q, ref)
        if found is None and (other := timewords.in_english(question)) is not None:
            phrase, said = other  # another language's phrase, read as the English one that means the same
            resolved = _parse(phrase, ref)
            found = None if resolved is None else (resolved[0], said)
    except (
        OverflowError,
        ValueError,
    ):  # "900000 days ago": a span beyond datetime's range is no usable range
        return None
    if found is None:
        return None
    (start, end), expr = found
    if end < start:
        start, end = end, start
    return TimeRange(start=start, end=end, expression=expr)


def _parse(q: str, ref: datetime) -> tuple[tuple[datetime, datetime], str] | None:
    m = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", q)
    if m:
        try:
            return _day(datetime(int(m[1]), int(m[2]), int(m[3]))), m[0]
        except ValueError:
            pass
    if m := re.search(r"\bday before yesterday\b", q):
        return _day(ref - timedelta(days=2)), m[0]
    if m := re.search(r"\byesterday\b", q):
        return _day(ref - timedelta(days=1)), m[0]
    if m := re.search(r"\btoday\b|\bthis morning\b|\btonight\b", q):
        return _day(ref), m[0]
    if m := re.search(rf"\b{_NUM} {_UNIT} ago\b", q):
        n, unit = _num(m[1]), m[2]
        center = ref - _span(unit, n, ref)
        pad = {"day": 1, "week": 4, "weekend": 4, "month": 16, "year": 183}[unit]
        return (center - timedelta(days=pad), center + timedelta(days=pad)), m[0]
    if m := re.search(rf"\b(?:in |over |during )?the (?:past|last|previous) {_NUM} {_UNIT}\b", q):
        n, unit = _num(m[1]), m[2]
        return (ref - _span(unit, n, ref), ref), m[0]
    if m := re.search(r"\blast weekend\b", q):
        days_since_sat = (ref.weekday() - 5) % 7 or 7
        sat = ref - timedelta(days=days_since_sat)
        return (_day(sat)[0], _day(sat + timedelta(days=1))[1]), m[0]
    if m := re.search(r"\b(last|this|past|previous) (week|month|year)\b", q):
        which, unit = m[1], m[2]
        if unit == "week":
            monday = _day(ref - timedelta(days=ref.weekday()))[0]
            if which == "this":
                return (monday, ref), m[0]
            if which == "past":
                return (ref - timedelta(days=7), ref), m[0]
            return (monday - timedelta(days=7), monday - timedelta(microseconds=1)), m[0]
        if unit == "month":
            if which == "this":
                return (_month(ref.year, ref.month)[0], ref), m[0]
            if which == "past":
                return (ref - timedelta(days=31), ref), m[0]
            prev = _shift_months(ref, -1)
            return _month(prev.year, prev.month), m[0]
        if which == "this":
            return (datetime(ref.year, 1, 1), ref), m[0]
        if which == "past":
            return (ref - timedelta(days=365), ref), m[0]
        return (datetime(ref.year - 1, 1, 1), datetime(ref.year - 1, 12, 31, 23, 59, 59)), m[0]
    if m := re.search(r"\blast (monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", q):
        back = (ref.weekday() - _WEEKDAYS[m[1]]) % 7 or 7
        return _day(ref - timedelta(days=back)), m[0]
    month_names = "|".join(sorted(_MONTHS, key=len, reverse=True))
    m = re.search(rf"\b(?:on )?({month_names})\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,? (\d{{4}}))?\b", q)
    if m:
        month, day = _MONTHS[m[1]], int(m[2])
        year = int(m[3]) if m[3] else _latest_year(ref, month, day)
        try:
            return _day(datetime(year, month, day)), m[0]
        except ValueError:
            pass
    m = re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({month_names})(?:,? (\d{{4}}))?\b", q)
    if m:
        month, day = _MONTHS[m[2]], int(m[1])
        year = int(m[3]) if m[3] else _latest_year(ref, month, day)
        try:
            return _day(datetime(year, month, day)), m[0]
        except ValueError:
            pass
    full_months = "|".join(m.lower() for m in calendar.month_name if m)
    m = re.search(rf"\b(?:in|during|since|of|from) ({full_months})(?:,? (\d{{4}}))?\b", q)
    if m:
        month = _MONTHS[m[1]]
        year = int(m[2]) if m[2] else (ref.year if month <= ref.month else ref.year - 1)
        start, end = _month(year, month)
        return (start, max(end, ref) if m[0].startswith("since") else end), m[0]
    m = re.search(r"\b(?:in|during|since) (\d{4})\b", q)
    if m and 1900 < int(m[1]) < 2200:
        y = int(m[1])
        end = datetime(y, 12, 31, 23, 59, 59)
        return (datetime(y, 1, 1), max(end, ref) if m[0].startswith("since") else end), m[0]
    return None


def _latest_year(ref: datetime, month: int, day: int) -> int:
    """A date without a year means its most recent occurrence on or before the question date."""
    try:
        candidate = datetime(ref.year, month, day)
    except ValueError:
        return ref.year - 1
    return ref.year if candidate <= ref else ref.year - 1
