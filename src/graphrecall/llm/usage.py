"""Token and cost accounting shared by every provider.

Benchmarks and operators need to know what a run cost, per purpose (extraction vs. reading vs. entity
resolution), not just in total. Every provider reports each successful call to a ``UsageTracker``; the
tracker is a plain object guarded by a lock, so it is safe from threads and from concurrent asyncio tasks (no
``await`` happens while the lock is held).
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from pydantic import BaseModel

#: USD per 1M tokens as (input, output). Matched by longest prefix, so dated snapshots such as
#: ``gpt-4o-mini-2024-07-18`` or ``claude-3-5-haiku-latest`` find their family. Unknown or local models
#: cost 0. Prices drift; pass ``prices=`` to ``UsageTracker`` to override.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-3.5-turbo": (0.50, 1.50),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
}


def price_for(model: str, prices: Mapping[str, tuple[float, float]] | None = None) -> tuple[float, float]:
    """Return (input, output) USD per 1M tokens for ``model``: exact match, else longest prefix, else zero."""
    table = PRICES if prices is None else prices
    if model in table:
        return table[model]
    best = max((k for k in table if model.startswith(k)), key=len, default=None)
    return table[best] if best is not None else (0.0, 0.0)


def cost_usd(
    model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, tuple[float, float]] | None = None
) -> float:
    price_in, price_out = price_for(model, prices)
    return (input_tokens * price_in + output_tokens * price_out) / 1_000_000


class Usage(BaseModel):
    """Token counts and cost of one call or of many added together (``a + b``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
            cost_usd=self.cost_usd + other.cost_usd,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class CallRecord:
    """One successful model call as the tracker saw it."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    purpose: str
    at: float
    """Wall-clock time (``time.time()``) when the call finished."""


_purpose: contextvars.ContextVar[str] = contextvars.ContextVar("graphrecall_llm_purpose", default="")


@contextmanager
def usage_purpose(label: str) -> Iterator[None]:
    """Label every call made inside this block (in this task or thread) with ``label``.

    A context variable rather than a parameter so that code deep inside extraction or reading is attributed
    correctly without threading a label through every function. An explicit ``purpose=`` argument wins.
    """
    token = _purpose.set(label)
    try:
        yield
    finally:
        _purpose.reset(token)


def current_purpose() -> str:
    return _purpose.get()


KEEP_RECORDS = 10_000
"""Call records a tracker keeps (the newest); its totals count every call. Why a bound: a server's tracker lives as
long as the process, and one record per extraction or reader call grew without end (~3 per extracted session)."""


class UsageTracker:
    """Accumulates per-call records and totals; shareable between several LLM instances.

    Totals (``total``, ``by_purpose``, ``by_model``) cover every call since the tracker was made or ``reset``; the
    records themselves only the newest ``keep``. A caller that wants the calls of one piece of work takes
    ``calls`` before it and ``since(mark)`` after."""

    def __init__(
        self, prices: Mapping[str, tuple[float, float]] | None = None, *, keep: int = KEEP_RECORDS
    ) -> None:
        self._prices = dict(PRICES if prices is None else prices)
        self._lock = threading.Lock()
        self._records: deque[CallRecord] = deque(maxlen=keep)
        self._calls = 0
        self._by_purpose: dict[str, Usage] = {}
        self._by_model: dict[str, Usage] = {}

    def record(
        self,
        *,
        model: str,
        input_tokens: int,
        output_tokens: int,
        latency_s: float,
        purpose: str | None = None,
    ) -> CallRecord:
        """Add one call; the cost is computed here from the price table so providers need not know prices."""
        rec = CallRecord(
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd(model, input_tokens, output_tokens, self._prices),
            latency_s=latency_s,
            purpose=current_purpose() if purpose is None else purpose,
            at=time.time(),
        )
        one = _sum([rec])
        with self._lock:
            self._records.append(rec)
            self._calls += 1
            self._by_purpose[rec.purpose] = self._by_purpose.get(rec.purpose, Usage()) + one
            self._by_model[rec.model] = self._by_model.get(rec.model, Usage()) + one
        return rec

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float:
        return cost_usd(model, input_tokens, output_tokens, self._prices)

    @property
    def calls(self) -> int:
        """Calls recorded since the tracker was made or reset: a mark for ``since``."""
        with self._lock:
            return self._calls

    def since(self, mark: int) -> list[CallRecord]:
        """The records of the calls after the first ``mark`` (a ``calls`` taken earlier), oldest first; those
        older than the newest ``keep`` are no longer there."""
        with self._lock:
            newer = max(0, self._calls - mark)
            # From the newest end: a piece of work's few calls, not a copy of every kept record.
            return list(itertools.islice(reversed(self._records), newer))[::-1]

    @property
    def records(self) -> list[CallRecord]:
        """A snapshot copy of the newest records (at most ``keep``): callers may iterate it while other tasks
        keep recording."""
        with self._lock:
            return list(self._records)

    @property
    def total(self) -> Usage:
        with self._lock:
            return sum(self._by_model.values(), Usage())

    def by_purpose(self) -> dict[str, Usage]:
        with self._lock:
            return dict(self._by_purpose)

    def by_model(self) -> dict[str, Usage]:
        with self._lock:
            return dict(self._by_model)

    def reset(self) -> None:
        with self._lock:
            self._records.clear()
            self._calls = 0
            self._by_purpose.clear()
            self._by_model.clear()


def _sum(records: list[CallRecord]) -> Usage:
    return Usage(
        input_tokens=sum(r.input_tokens for r in records),
        output_tokens=sum(r.output_tokens for r in records),
        calls=len(records),
        cost_usd=sum(r.cost_usd for r in records),
    )
