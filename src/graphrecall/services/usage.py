"""How a store is used, per scope: search latencies and the Reader's answers (abstained or not), kept for
``graphrecall report``.

Why not only the server's Prometheus metrics: those are per process and per route, and a report is asked of a store
(by the CLI, after the server ran). So each process keeps its observations in memory and adds them to
``<root>/usage.sqlite`` at most once a minute and when it closes: one small transaction per minute instead of one
per search. What a crash loses is at most the last minute's figures, never memory.

Latencies are kept per scope and hour (a bounded sample of ``SAMPLE`` values per hour, enough for a p95), so the
file grows with hours of use, not with searches.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from graphrecall.models import Scope

USAGE_FILE = "usage.sqlite"
SAMPLE = 200  # latencies kept per scope and hour
FLUSH_EVERY_S = 60.0


@dataclass
class _Hour:
    searches: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    answers: int = 0
    abstained: int = 0


@dataclass(frozen=True)
class UsageFigures:
    """A scope's use over a period: searches and their latency, answers and how many abstained."""

    searches: int
    p50_ms: float | None
    p95_ms: float | None
    answers: int
    abstained: int


class UsageLog:
    """Observations of one process, added to the store's usage file once a minute and at ``close``."""

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = root / USAGE_FILE
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: defaultdict[tuple[str, str, int], _Hour] = defaultdict(_Hour)
        self._flushed_at = clock()

    @contextmanager
    def search(self, scope: Scope) -> Iterator[None]:
        """Time one search (or context) of ``scope``; a failed one is not counted."""
        started = time.perf_counter()
        yield
        elapsed_ms = round((time.perf_counter() - started) * 1000, 3)

        def count(h: _Hour) -> None:
            h.searches += 1
            if len(h.latencies_ms) < SAMPLE:
                h.latencies_ms.append(elapsed_ms)

        self._add(scope, count)

    def answered(self, scope: Scope, *, abstained: bool) -> None:
        def count(h: _Hour) -> None:
            h.answers += 1
            h.abstained += int(abstained)

        self._add(scope, count)

    def _add(self, scope: Scope, update: Callable[[_Hour], object]) -> None:
        now = self._clock()
        with self._lock:
            update(self._pending[(scope.org_id, scope.user_id, int(now // 3600))])
            due = now - self._flushed_at >= FLUSH_EVERY_S
        if due:
            self.flush()

    def flush(self) -> None:
        """Add what this process observed to the usage file (merged with what other processes wrote)."""
        with self._lock:
            pending, self._pending = self._pending, defaultdict(_Hour)
            self._flushed_at = self._clock()
        if not pending:
            return
        if not self.path.parent.exists():
            return  # nothing was ever stored here: a search of an empty root leaves no file behind
        db = _connect(self.path)
        try:
            with db:
                for (org, user, hour), h in pending.items():
                    row = db.execute(
                        "SELECT searches, latencies, answers, abstained FROM usage WHERE org=? AND user=? AND hour=?",
                        (org, user, hour),
                    ).fetchone()
                    old = json.loads(row[1]) if row else []
                    merged = (old + h.latencies_ms)[-SAMPLE:]
                    db.execute(
                        "INSERT INTO usage (org, user, hour, searches, latencies, answers, abstained)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(org, user, hour) DO UPDATE SET"
                        " searches = searches + excluded.searches, latencies = excluded.latencies,"
                        " answers = answers + excluded.answers, abstained = abstained + excluded.abstained",
                        (org, user, hour, h.searches, json.dumps(merged), h.answers, h.abstained),
                    )
        finally:
            db.close()

    def figures(self, scope: Scope, *, since_s: float | None = None) -> UsageFigures:
        """``scope``'s figures (this process's unflushed ones included), over the last ``since_s`` seconds or all."""
        self.flush()
        if not self.path.exists():
            return UsageFigures(0, None, None, 0, 0)
        first_hour = 0 if since_s is None else int((self._clock() - since_s) // 3600)
        db = _connect(self.path)
        try:
            rows = db.execute(
                "SELECT searches, latencies, answers, abstained FROM usage WHERE org=? AND user=? AND hour>=?",
                (scope.org_id, scope.user_id, first_hour),
            ).fetchall()
        finally:
            db.close()
        latencies = sorted(x for r in rows for x in json.loads(r[1]))
        return UsageFigures(
            searches=sum(r[0] for r in rows),
            p50_ms=_quantile(latencies, 0.5),
            p95_ms=_quantile(latencies, 0.95),
            answers=sum(r[2] for r in rows),
            abstained=sum(r[3] for r in rows),
        )

    def forget(self, scope: Scope) -> None:
        """A scope erased: its figures go too."""
        with self._lock:
            for key in [k for k in self._pending if k[:2] == (scope.org_id, scope.user_id)]:
                del self._pending[key]
        if self.path.exists():
            db = _connect(self.path)
            try:
                with db:
                    db.execute("DELETE FROM usage WHERE org=? AND user=?", (scope.org_id, scope.user_id))
            finally:
                db.close()


def _quantile(sorted_values: list[float], q: float) -> float | None:
    """Linear interpolation between the two nearest ranks: the benchmarks' one definition (benchmarks/percentile.py,
    numpy's default), so a report's p95 and a benchmark's are the same statistic."""
    if not sorted_values:
        return None
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return round(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo), 3)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS usage (org TEXT NOT NULL, user TEXT NOT NULL, hour INTEGER NOT NULL,"
        " searches INTEGER NOT NULL, latencies TEXT NOT NULL, answers INTEGER NOT NULL, abstained INTEGER NOT NULL,"
        " PRIMARY KEY (org, user, hour))"
    )
    return db
