"""Dates at the boundary: parsing what callers send, and the one time cutoff every read applies.

Ground floor on purpose: the CLI, the HTTP and MCP servers, the facade and the Reader's tools all parse dates, and
every kind of stored item (rounds, facts, events, supersessions) is hidden after the same cutoff, so both live
below everything that uses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from graphrecall.errors import InvalidInput
from graphrecall.models import ensure_utc, utcnow

# Question dates are often only day-precise: LongMemEval dates evidence hours after the question, on the same day.
# Items recorded up to this long after the question date stay visible.
DEFAULT_SLACK_HOURS = 24.0
_ISO_SHAPED = re.compile(r"^\d{4}-\d{2}-\d{2}")


def parse_date(value: Any, *, where: str) -> datetime:
    """Accept a datetime, an ISO-8601 string, or LongMemEval's ``2023/05/20 (Sat) 07:47``."""
    if isinstance(value, datetime):
        return ensure_utc(value)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"date must be an ISO-8601 string, got {value!r}", where=where)
    text = value.strip()
    try:
        return ensure_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError as e:
        if _ISO_SHAPED.match(text):  # the right shape, an impossible value: say which part is wrong
            raise InvalidInput(f"date {value!r} is not a valid date: {e}", where=where) from None
    for fmt in ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y/%m/%d"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise InvalidInput(f"date {value!r} is not ISO-8601 (e.g. 2024-05-20T14:30:00)", where=where)


@dataclass(frozen=True)
class Cutoff:
    """The moment a question is asked, and what it may see.

    ``question_date`` anchors relative time ("last week", "how many days ago"); ``until`` is the last recorded
    time that is visible (``question_date`` plus the same-day slack). "Recorded" means when the user said it: a
    round's date, a fact's or an event's source session date, a supersession's superseding fact's date, never
    the wall-clock time at which extraction happened to run.
    """

    question_date: datetime
    until: datetime

    @classmethod
    def at(cls, question_date: datetime | str | None, *, slack_hours: float = DEFAULT_SLACK_HOURS) -> Cutoff:
        """The cutoff for a question asked at ``question_date``; ``None`` means the question is asked now."""
        when = utcnow() if question_date is None else parse_date(question_date, where="question_date")
        return cls(question_date=when, until=when + timedelta(hours=slack_hours))

    def admits(self, recorded: datetime | None) -> bool:
        """Whether an item recorded at ``recorded`` is visible (an undated item always is)."""
        return recorded is None or recorded <= self.until
