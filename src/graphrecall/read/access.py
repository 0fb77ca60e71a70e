"""What the Reader may do with one scope's memory: search, read a round by id, list what happened between two
dates, current facts.

A protocol, not an implementation: the Reader depends on these members only, so it runs against the recall
service (``graphrecall.recall.ScopeRecall``, which hides everything recorded after the question's cutoff), a remote
store or a test fake, and never imports the facade or the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from graphrecall.models import Event, Fact, Hit, HitKind, Round, TimeRange


class MemoryAccess(Protocol):
    @property
    def question_date(self) -> datetime:
        """When the question is asked: relative time is anchored on it."""
        ...

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

    def rounds(self, ids: Sequence[str]) -> list[Round]:
        """Rounds by id, in the order asked; ids unknown (or past the cutoff) are left out."""
        ...

    def events_between(self, start: datetime, end: datetime, limit: int) -> list[Event]: ...

    def facts(self, as_of: datetime | None, limit: int) -> list[Fact]: ...
