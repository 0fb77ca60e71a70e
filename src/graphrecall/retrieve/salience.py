"""Salience: how present a fact should be in the user's memory now, from when it was last seen and how often.

Why: after months, a fact said once long ago ("I tried a sourdough recipe") and a fact restated every week ("I am
vegetarian") are both current, and nothing in a search tells them apart when both match. People weigh such facts
by recency and repetition; salience puts a number on both, for retrieval to use as a weak prior
(``RetrievalConfig.salience_weight``, off by default) and for anyone ranking facts by importance.

The score is the product of two factors in [0, 1]:

- **recency** ``0.5 ** (days since last seen / half_life_days)``: halves every half-life, 1 when seen now (a
  ``last_seen`` after ``now`` counts as now); a fact without any date counts as seen now;
- **strength** ``r / (r + reinforcement_half)``: grows with the reinforcement count ``r`` but ever more slowly
  (the tenth restatement adds less than the second), half-way at ``reinforcement_half``, never reaching 1.

So salience is non-increasing in time since last seen, non-decreasing in reinforcement, and always in [0, 1)
(``tests/unit/test_salience.py`` checks all three with hypothesis). Decay only ranks: it never deletes or hides a
fact (forgetting is ``Memory.erase``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

DEFAULT_HALF_LIFE_DAYS = 90.0
DEFAULT_REINFORCEMENT_HALF = 2.0


class Salient(Protocol):
    """What salience reads from a fact (``models.Fact`` has all three)."""

    @property
    def last_seen(self) -> datetime | None: ...

    @property
    def recorded_at(self) -> datetime | None: ...

    @property
    def reinforcement(self) -> int: ...


@dataclass(frozen=True)
class SalienceFacts:
    """The three inputs as plain values, for callers that read them from the store rather than a ``Fact``."""

    last_seen: datetime | None
    recorded_at: datetime | None
    reinforcement: int = 1


def recency(last_seen: datetime | None, now: datetime, half_life_days: float) -> float:
    """``0.5 ** (age / half_life)`` with the age in days, clamped at 0 (a future date counts as now)."""
    if half_life_days <= 0:
        raise ValueError(f"half_life_days must be positive, got {half_life_days}")
    if last_seen is None:
        return 1.0
    age_days = max(0.0, (now - last_seen).total_seconds() / 86_400.0)
    return float(0.5 ** (age_days / half_life_days))


def strength(reinforcement: int, reinforcement_half: float) -> float:
    """``r / (r + half)`` for ``r = max(1, reinforcement)``: concave, increasing, below 1."""
    if reinforcement_half <= 0:
        raise ValueError(f"reinforcement_half must be positive, got {reinforcement_half}")
    r = float(max(1, reinforcement))
    return r / (r + reinforcement_half)


def salience(
    fact: Salient,
    now: datetime,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    reinforcement_half: float = DEFAULT_REINFORCEMENT_HALF,
) -> float:
    """The fact's salience at ``now``: recency of ``last_seen`` (else ``recorded_at``) times the strength of its
    reinforcement count. Pure; naive datetimes are UTC, as everywhere in graphrecall."""
    seen = fact.last_seen if fact.last_seen is not None else fact.recorded_at
    return recency(seen, now, half_life_days) * strength(fact.reinforcement, reinforcement_half)
