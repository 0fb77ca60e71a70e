"""Question analysis: type and mode (classifier), a time range (relative to the question date), sub-questions
(decomposer), and relative-to-event expressions such as "two weeks before my trip".

A calendar expression ("last week", "in May") resolves against the question date alone
(``graphrecall.retrieve.timeparse``). An event-relative one cannot: "two weeks before my trip" needs the date of
the trip, which only retrieval can find. ``EventAnchor`` records the offset and the anchor's wording; the Reader
searches for the anchor, takes the date of the best hit and calls ``EventAnchor.resolve``. Limitation: the anchor
date is the date of the conversation in which the event was mentioned (or an extracted event's time when
extraction ran), which can differ from when the event happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from graphrecall.models import TimeRange
from graphrecall.read.classify import QuestionPlan, classify
from graphrecall.read.decompose import Decomposition, decompose
from graphrecall.retrieve.timeparse import parse_time_range

_NUM_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
}  # fmt: skip
_NUM = r"(\d+|a couple of|a few|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_ANCHOR = re.compile(
    rf"\b{_NUM} (day|week|month|year)s? (before|after|prior to) (?P<anchor>(?:my|the|our|i|we) [^,?.!;]+)",
    re.IGNORECASE,
)
_ANCHOR_TAIL = re.compile(r"\s+(?:did|do|have|was|were|what|which|when|how)\b.*$", re.IGNORECASE)
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True)
class EventAnchor:
    """``offset_days`` before (negative) or after (positive) the event described by ``anchor``."""

    offset_days: int
    anchor: str
    expression: str

    def resolve(self, anchor_date: datetime) -> TimeRange:
        """The range around ``anchor_date + offset``: a tolerance of a quarter of the offset (at least one day),
        because "two weeks before" is rarely exactly fourteen days."""
        center = anchor_date + timedelta(days=self.offset_days)
        pad = timedelta(days=max(1, abs(self.offset_days) // 4))
        start, end = sorted((center - pad, center + pad))
        return TimeRange(start=start, end=end, expression=self.expression)


def parse_event_anchor(question: str) -> EventAnchor | None:
    """ "two weeks before my trip to Paris" -> EventAnchor(-14, "my trip to Paris", ...); None when absent."""
    m = _ANCHOR.search(" ".join(question.split()))
    if m is None:
        return None
    n = int(m[1]) if m[1].isdigit() else _NUM_WORDS[m[1].lower()]
    sign = 1 if m[3].lower() == "after" else -1
    anchor = _ANCHOR_TAIL.sub("", m["anchor"]).strip()
    if not anchor:
        return None
    return EventAnchor(offset_days=sign * n * _UNIT_DAYS[m[2].lower()], anchor=anchor, expression=m[0])


@dataclass(frozen=True)
class QuestionAnalysis:
    """Everything the Reader decides before retrieving."""

    question: str
    question_date: datetime | None
    plan: QuestionPlan
    time_range: TimeRange | None
    decomposition: Decomposition
    anchor: EventAnchor | None = None
    queries: list[str] = field(default_factory=list)


def analyze(
    question: str, question_date: datetime | None, plan: QuestionPlan | None = None
) -> QuestionAnalysis:
    """Classify (unless ``plan`` is given), parse the time range and anchor, and decompose."""
    plan = plan or classify(question)
    anchor = parse_event_anchor(question)
    time_range = None if anchor is not None else parse_time_range(question, question_date)
    parts = decompose(question)
    return QuestionAnalysis(
        question=question,
        question_date=question_date,
        plan=plan,
        time_range=time_range,
        decomposition=parts,
        anchor=anchor,
        queries=[question, *parts.sub_questions],
    )
