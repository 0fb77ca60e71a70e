"""What the Reader may do with one scope's memory: search, list what happened between two dates, current facts.

The Reader never touches ``Memory`` internals beyond this adapter, so it can run against any object with the same
four methods (a remote store, a test fake). Extracted memory (facts, events) is used when the scope has any and
the ``Memory`` supports it; otherwise everything degrades to raw conversation rounds, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from graphrecall.errors import NotFound
from graphrecall.models import Event, Fact, Hit, HitKind, Round, Scope, TimeRange

if TYPE_CHECKING:
    from graphrecall.memory import Memory


class MemoryAccess(Protocol):
    question_date: datetime | None

    @property
    def has_extracted(self) -> bool: ...

    def search(
        self,
        query: str,
        k: int,
        *,
        kinds: Sequence[HitKind] = ("round",),
        time_range: TimeRange | None = None,
    ) -> list[Hit]: ...

    def rounds_between(self, start: datetime, end: datetime, limit: int) -> list[Round]: ...

    def events_between(self, start: datetime, end: datetime, limit: int) -> list[Event]: ...

    def facts(self, as_of: datetime | None, limit: int) -> list[Fact]: ...


class ScopeAccess:
    """``MemoryAccess`` over a ``Memory`` and a scope, hiding what was said after ``question_date``."""

    def __init__(self, memory: Memory, scope: Scope, question_date: datetime | None) -> None:
        self.memory = memory
        self.scope = scope
        self.question_date = question_date
        self._extracted: bool | None = None

    @property
    def has_extracted(self) -> bool:
        """Whether this scope holds facts or events (and this Memory can read them); checked once."""
        if self._extracted is None:
            self._extracted = False
            if hasattr(self.memory, "facts") and self.memory.pool.exists(self.scope):
                from graphrecall.store import facts as fq

                try:
                    with self.memory.pool.acquire(self.scope, create=False) as db:
                        self._extracted = fq.has_extracted(db)
                except (NotFound, RuntimeError):
                    self._extracted = False
        return self._extracted

    def search(
        self,
        query: str,
        k: int,
        *,
        kinds: Sequence[HitKind] = ("round",),
        time_range: TimeRange | None = None,
    ) -> list[Hit]:
        if not self.has_extracted:
            kinds = ("round",)
        return self.memory.search(
            self.scope, query, k, question_date=self.question_date, time_range=time_range, kinds=tuple(kinds)
        )

    def rounds_between(self, start: datetime, end: datetime, limit: int) -> list[Round]:
        from graphrecall.store import rounds as q

        if self.question_date is not None:
            end = min(end, self.question_date)
        if end < start or not self.memory.pool.exists(self.scope):
            return []
        with self.memory.pool.acquire(self.scope, create=False) as db:
            ids = q.rounds_between(db, start, end, limit=limit)
            found = q.fetch_rounds(db, ids)
        return [found[i] for i in ids if i in found]

    def events_between(self, start: datetime, end: datetime, limit: int) -> list[Event]:
        if not self.has_extracted or not hasattr(self.memory, "events"):
            return []
        out = []
        for e in self.memory.events(self.scope, limit=10_000):
            when = e.time_start
            if when is not None and start <= when <= end:
                out.append(e)
        return out[:limit]

    def facts(self, as_of: datetime | None, limit: int) -> list[Fact]:
        if not self.has_extracted:
            return []
        when = as_of or self.question_date
        return list(self.memory.facts(self.scope, as_of=when, limit=limit))
