"""``AsyncMemory``: the ``Memory`` facade for asyncio code.

Why a wrapper and not a second implementation: Kuzu and the embedder are blocking C/C++/torch calls, and ``Memory``
is already thread-safe (one writer lock per database, per-thread read connections). Running each call in a worker
thread keeps the event loop responsive and keeps exactly one code path for every operation.

Why no copied signatures: each method below is ``Memory``'s own, wrapped (``_threaded``), so its parameters,
defaults and types are ``Memory``'s by construction, for type checkers as for ``inspect.signature``.
``tests/integration/test_async_memory.py`` checks that every operation of ``graphrecall.operations`` has its twin.

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
import functools
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from graphrecall.events import EventSink
from graphrecall.memory import Memory, ScopeLike, When
from graphrecall.recall import ScopeRecall

A = ParamSpec("A")
R = TypeVar("R")


class _Wrapper(Protocol):
    def _inner(self) -> Any: ...


Self = TypeVar("Self", bound=_Wrapper)


def _materialized(value: Any) -> Any:
    """A generator given to a call is consumed here, on the caller's thread: run in the worker, it would run the
    caller's code there."""
    return list(value) if isinstance(value, Iterator) else value


def _threaded(
    method: Callable[Concatenate[Any, A], R],
) -> Callable[Concatenate[Self, A], Coroutine[Any, Any, R]]:
    """An async method that runs the blocking ``method`` on the wrapped object in a worker thread."""

    @functools.wraps(method)
    async def call(self: Self, /, *args: A.args, **kwargs: A.kwargs) -> R:
        args = tuple(_materialized(a) for a in args)  # type: ignore[assignment]
        kwargs = {k: _materialized(v) for k, v in kwargs.items()}  # type: ignore[assignment]
        return await asyncio.to_thread(method, self._inner(), *args, **kwargs)

    return call


class AsyncScopeRecall:
    """One question's view of a scope (``Memory.recall``) for async callers: the same reads, awaited in a worker
    thread. ``view`` is the blocking ``ScopeRecall``, for a Reader run in a thread of your own."""

    def __init__(self, view: ScopeRecall) -> None:
        self.view = view

    def _inner(self) -> ScopeRecall:
        return self.view

    @property
    def question_date(self) -> datetime:
        return self.view.question_date

    search = _threaded(ScopeRecall.search)
    context = _threaded(ScopeRecall.context)
    profile = _threaded(ScopeRecall.profile)
    rounds = _threaded(ScopeRecall.rounds)
    rounds_between = _threaded(ScopeRecall.rounds_between)
    events_between = _threaded(ScopeRecall.events_between)
    facts = _threaded(ScopeRecall.facts)


class AsyncMemory:
    """Every method awaits the matching blocking ``Memory`` method in a worker thread (``asyncio.to_thread``).

    Construct it around an existing ``Memory`` (``AsyncMemory(memory)``) or with ``AsyncMemory.open(root, ...)``,
    which takes the same keyword arguments as ``Memory.open``. ``progress`` callbacks (``add_sessions``,
    ``extract``) run in the worker thread, not on the event loop."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def _inner(self) -> Memory:
        return self.memory

    @classmethod
    def open(cls, root: str | Path | None = None, **kwargs: Any) -> AsyncMemory:
        """Open a store root. Opening is cheap: databases open lazily per scope."""
        return cls(Memory.open(root, **kwargs))

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    close = _threaded(Memory.close)

    def subscribe(self, sink: EventSink) -> Callable[[], None]:
        """``Memory.subscribe``: the sink runs on the worker thread that made the change, not on the event loop
        (hand the event over with ``loop.call_soon_threadsafe`` to await anything)."""
        return self.memory.subscribe(sink)

    def recall(
        self, scope: ScopeLike, question_date: When = None, also: Sequence[str] = ()
    ) -> AsyncScopeRecall:
        """``Memory.recall`` for async callers: the view's reads are awaited (making the view itself blocks on
        nothing: it parses the date and holds it)."""
        return AsyncScopeRecall(self.memory.recall(scope, question_date, also))

    # ingest
    add_session = _threaded(Memory.add_session)
    add_messages = _threaded(Memory.add_messages)
    add_sessions = _threaded(Memory.add_sessions)
    import_sessions = _threaded(Memory.import_sessions)
    add_document = _threaded(Memory.add_document)
    flush = _threaded(Memory.flush)
    backfill_passages = _threaded(Memory.backfill_passages)
    # recall
    search = _threaded(Memory.search)
    context = _threaded(Memory.context)
    profile = _threaded(Memory.profile)
    answer = _threaded(Memory.answer)
    # history
    stats = _threaded(Memory.stats)
    sessions = _threaded(Memory.sessions)
    get_session = _threaded(Memory.get_session)
    export_sessions = _threaded(Memory.export_sessions)
    export_scope = _threaded(Memory.export_scope)
    import_scope = _threaded(Memory.import_scope)
    forget = _threaded(Memory.forget)
    erase = _threaded(Memory.erase)
    scopes = _threaded(Memory.scopes)
    stored = _threaded(Memory.stored)
    # extracted memory
    extract = _threaded(Memory.extract)
    extraction_jobs = _threaded(Memory.extraction_jobs)
    retry_extraction = _threaded(Memory.retry_extraction)
    wait_for_extraction = _threaded(Memory.wait_for_extraction)
    add_fact = _threaded(Memory.add_fact)
    feedback = _threaded(Memory.feedback)
    consolidate = _threaded(Memory.consolidate)
    maintain = _threaded(Memory.maintain)
    report = _threaded(Memory.report)
    dataset = _threaded(Memory.dataset)
    supersede = _threaded(Memory.supersede)
    facts = _threaded(Memory.facts)
    history = _threaded(Memory.history)
    entities = _threaded(Memory.entities)
    events = _threaded(Memory.events)

    # what an operator looks at
    list_scopes = _threaded(Memory.list_scopes)
    graph = _threaded(Memory.graph)
    extraction_queue = _threaded(Memory.extraction_queue)
