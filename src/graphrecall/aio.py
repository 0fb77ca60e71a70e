"""``AsyncMemory``: the ``Memory`` facade for asyncio code.

Why a wrapper and not a second implementation: Kuzu and the embedder are blocking C/C++/torch calls, and ``Memory``
is already thread-safe (one writer lock per database, per-thread read connections). Running each call in a worker
thread keeps the event loop responsive and keeps exactly one code path for ingest and retrieval.

Example::

    import asyncio
    from graphrecall.aio import AsyncMemory
    from graphrecall.embed import HashingEmbedder

    async def main(root: str) -> None:
        async with AsyncMemory.open(root, embedder=HashingEmbedder(64)) as mem:
            await mem.add_session(
                ("acme", "alice"),
                [{"role": "user", "content": "I adopted a puppy called Biscuit"}],
                session_id="s1",
                date="2024-05-20T10:00:00",
            )
            hits = await mem.search(("acme", "alice"), "puppy Biscuit", k=3)
            print(hits[0].session_id)  # s1

    asyncio.run(main("/tmp/graphrecall-demo"))
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from graphrecall.llm import LLM
from graphrecall.memory import Memory, Progress, ScopeLike
from graphrecall.models import (
    AddedFact,
    Consolidation,
    Context,
    Entity,
    Erasure,
    Event,
    ExtractionJob,
    ExtractionResult,
    Fact,
    FactKind,
    Hit,
    HitKind,
    ImportResult,
    IngestResult,
    Message,
    Profile,
    Scope,
    ScopeExport,
    ScopeStats,
    Session,
    SessionInput,
    TimeRange,
)
from graphrecall.params import BATCH_SESSIONS
from graphrecall.read.models import Answer
from graphrecall.recall import ScopeRecall


class AsyncMemory:
    """Every method awaits the matching blocking ``Memory`` method in a worker thread (``asyncio.to_thread``).

    Construct it around an existing ``Memory`` (``AsyncMemory(memory)``) or with ``AsyncMemory.open(root, ...)``,
    which takes the same keyword arguments as ``Memory.open``. ``progress`` callbacks (``add_sessions``,
    ``extract``) run in the worker thread, not on the event loop.

    Every public method of ``Memory`` has its twin here with the same parameters and defaults
    (tests/integration/test_async_memory.py compares the signatures, so a method added to ``Memory`` without one
    fails that test).
    """

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @classmethod
    def open(cls, root: str | Path | None = None, **kwargs: Any) -> AsyncMemory:
        """Open (creating if needed) a store root. Opening is cheap: databases open lazily per scope."""
        return cls(Memory.open(root, **kwargs))

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await asyncio.to_thread(self.memory.close)

    # -- ingest ------------------------------------------------------------------------------------------------
    async def add_session(
        self,
        scope: ScopeLike,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        session_id: str,
        date: datetime | str | None = None,
        extract: bool = False,
    ) -> IngestResult:
        return await asyncio.to_thread(
            self.memory.add_session, scope, messages, session_id=session_id, date=date, extract=extract
        )

    async def add_sessions(
        self,
        scope: ScopeLike,
        sessions: Iterable[SessionInput | Mapping[str, Any]],
        *,
        batch_sessions: int = BATCH_SESSIONS,
        progress: Progress | None = None,
    ) -> IngestResult:
        # Materialize here: a lazy iterable consumed in another thread would run the caller's generator there.
        items = list(sessions)
        return await asyncio.to_thread(
            self.memory.add_sessions, scope, items, batch_sessions=batch_sessions, progress=progress
        )

    async def add_messages(
        self,
        scope: ScopeLike,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        session_id: str = "default",
        date: datetime | str | None = None,
    ) -> IngestResult:
        return await asyncio.to_thread(
            self.memory.add_messages, scope, messages, session_id=session_id, date=date
        )

    # -- recall ------------------------------------------------------------------------------------------------
    async def search(
        self,
        scope: ScopeLike,
        query: str,
        k: int = 10,
        *,
        question_date: datetime | str | None = None,
        time_range: TimeRange | None = None,
        as_of: datetime | None = None,
        kinds: Sequence[HitKind] = ("round",),
    ) -> list[Hit]:
        return await asyncio.to_thread(
            self.memory.search,
            scope,
            query,
            k,
            question_date=question_date,
            time_range=time_range,
            as_of=as_of,
            kinds=kinds,
        )

    async def context(
        self,
        scope: ScopeLike,
        query: str,
        token_budget: int = 2000,
        *,
        k: int = 30,
        question_date: datetime | str | None = None,
        include_profile: bool = False,
    ) -> Context:
        return await asyncio.to_thread(
            self.memory.context,
            scope,
            query,
            token_budget,
            k=k,
            question_date=question_date,
            include_profile=include_profile,
        )

    async def profile(
        self, scope: ScopeLike, as_of: datetime | str | None = None, token_budget: int | None = None
    ) -> Profile:
        return await asyncio.to_thread(self.memory.profile, scope, as_of, token_budget)

    # -- administration ----------------------------------------------------------------------------------------
    async def stats(self, scope: ScopeLike) -> ScopeStats:
        return await asyncio.to_thread(self.memory.stats, scope)

    async def sessions(self, scope: ScopeLike, *, limit: int = 1000, offset: int = 0) -> list[Session]:
        return await asyncio.to_thread(self.memory.sessions, scope, limit=limit, offset=offset)

    async def get_session(self, scope: ScopeLike, session_id: str) -> Session:
        return await asyncio.to_thread(self.memory.get_session, scope, session_id)

    async def export_sessions(self, scope: ScopeLike) -> list[Session]:
        return await asyncio.to_thread(self.memory.export_sessions, scope)

    async def export_scope(self, scope: ScopeLike) -> ScopeExport:
        return await asyncio.to_thread(self.memory.export_scope, scope)

    async def import_scope(self, scope: ScopeLike, doc: ScopeExport | Mapping[str, Any]) -> ImportResult:
        return await asyncio.to_thread(self.memory.import_scope, scope, doc)

    async def forget(self, scope: ScopeLike) -> bool:
        return await asyncio.to_thread(self.memory.forget, scope)

    async def backfill_passages(self, scope: ScopeLike) -> int:
        return await asyncio.to_thread(self.memory.backfill_passages, scope)

    async def erase(
        self,
        scope: ScopeLike,
        *,
        session_ids: Sequence[str] = (),
        fact_ids: Sequence[str] = (),
        before: datetime | str | None = None,
        matching: str | None = None,
        dry_run: bool = False,
    ) -> Erasure:
        return await asyncio.to_thread(
            self.memory.erase,
            scope,
            session_ids=session_ids,
            fact_ids=fact_ids,
            before=before,
            matching=matching,
            dry_run=dry_run,
        )

    async def consolidate(
        self,
        scope: ScopeLike,
        *,
        dry_run: bool = False,
        summaries: bool = False,
        llm: LLM | None = None,
    ) -> Consolidation:
        return await asyncio.to_thread(
            self.memory.consolidate, scope, dry_run=dry_run, summaries=summaries, llm=llm
        )

    async def scopes(self) -> list[Scope]:
        return await asyncio.to_thread(self.memory.scopes)

    # -- extracted memory --------------------------------------------------------------------------------------
    async def extract(
        self,
        scope: ScopeLike,
        session_id: str | None = None,
        *,
        progress: Progress | None = None,
    ) -> ExtractionResult:
        return await asyncio.to_thread(self.memory.extract, scope, session_id, progress=progress)

    async def facts(
        self,
        scope: ScopeLike,
        *,
        as_of: datetime | str | None = None,
        include_superseded: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Fact]:
        return await asyncio.to_thread(
            self.memory.facts,
            scope,
            as_of=as_of,
            include_superseded=include_superseded,
            limit=limit,
            offset=offset,
        )

    async def add_fact(
        self,
        scope: ScopeLike,
        text: str,
        *,
        kind: FactKind | str = FactKind.other,
        entities: Sequence[str] = (),
        valid_from: datetime | str | None = None,
        source: str | None = None,
    ) -> AddedFact:
        return await asyncio.to_thread(
            self.memory.add_fact,
            scope,
            text,
            kind=kind,
            entities=list(entities),
            valid_from=valid_from,
            source=source,
        )

    async def recall(self, scope: ScopeLike, question_date: datetime | str | None = None) -> ScopeRecall:
        return await asyncio.to_thread(self.memory.recall, scope, question_date)

    async def extraction_jobs(self, scope: ScopeLike | None = None) -> list[ExtractionJob]:
        return await asyncio.to_thread(self.memory.extraction_jobs, scope)

    async def retry_extraction(self, scope: ScopeLike) -> int:
        return await asyncio.to_thread(self.memory.retry_extraction, scope)

    async def wait_for_extraction(self, timeout: float | None = None) -> bool:
        return await asyncio.to_thread(self.memory.wait_for_extraction, timeout)

    async def flush(self) -> None:
        await asyncio.to_thread(self.memory.flush)

    async def history(self, scope: ScopeLike, fact_id: str) -> list[Fact]:
        return await asyncio.to_thread(self.memory.history, scope, fact_id)

    async def supersede(self, scope: ScopeLike, old_id: str, new_id: str, *, reason: str = "manual") -> Fact:
        return await asyncio.to_thread(self.memory.supersede, scope, old_id, new_id, reason=reason)

    async def entities(self, scope: ScopeLike) -> list[Entity]:
        return await asyncio.to_thread(self.memory.entities, scope)

    async def events(self, scope: ScopeLike, *, limit: int = 1000, offset: int = 0) -> list[Event]:
        return await asyncio.to_thread(self.memory.events, scope, limit=limit, offset=offset)

    # -- answering ---------------------------------------------------------------------------------------------
    async def answer(
        self,
        scope: ScopeLike,
        question: str,
        question_date: datetime | str | None = None,
        mode: Literal["auto", "recall", "synthesis"] = "auto",
        llm: LLM | None = None,
        *,
        max_tool_steps: int = 4,
        tools: Literal["auto", "native", "text", "none"] = "auto",
        token_budget: int | None = None,
    ) -> Answer:
        """The Reader's answer; the LLM calls block, so they run in a worker thread like everything else."""
        return await asyncio.to_thread(
            self.memory.answer,
            scope,
            question,
            question_date,
            mode,
            llm,
            max_tool_steps=max_tool_steps,
            tools=tools,
            token_budget=token_budget,
        )
