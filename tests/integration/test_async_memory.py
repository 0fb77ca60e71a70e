"""AsyncMemory: the Memory API for asyncio, each call in a worker thread so the event loop keeps running."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from graphrecall import InvalidInput, Memory, NotFound, Scope, Settings
from graphrecall.aio import AsyncMemory
from graphrecall.embed import HashingEmbedder, TextKind, Vectors
from graphrecall.operations import OPERATIONS

SCOPE = Scope(org_id="acme", user_id="alice")


def chat(*turns: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]


class SlowEmbedder(HashingEmbedder):
    """Blocks like a real model does, so a call made on the event loop thread would freeze it."""

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        time.sleep(0.3)
        return super().embed(texts, kind=kind)


def open_async(root: Path, embedder: HashingEmbedder | None = None) -> AsyncMemory:
    return AsyncMemory.open(root, embedder=embedder or HashingEmbedder(64), settings=Settings(root=root))


async def test_the_whole_api_round_trips(tmp_path: Path) -> None:
    async with open_async(tmp_path) as mem:
        added = await mem.add_session(
            SCOPE, chat("I adopted a puppy called Biscuit", "Lovely!"), session_id="s1", date="2024-05-01"
        )
        assert added.sessions_added == 1
        await mem.add_messages(SCOPE, chat("what should I feed Biscuit?"), session_id="s1")
        await mem.add_sessions(
            SCOPE, [{"session_id": "s2", "date": "2024-05-02", "messages": chat("garden")}]
        )
        hits = await mem.search(SCOPE, "puppy Biscuit", 3)
        assert hits[0].session_id == "s1"
        ctx = await mem.context(SCOPE, "puppy Biscuit", 500, question_date="2024-06-01")
        assert ctx.token_count <= 500
        assert ctx.text.startswith("Question date: 2024-06-01")
        stats = await mem.stats(SCOPE)
        assert (stats.sessions, stats.messages) == (2, 4)
        assert [s.id for s in await mem.sessions(SCOPE)] == ["s1", "s2"]
        assert len((await mem.get_session(SCOPE, "s1")).messages) == 3
        assert [s.id for s in await mem.export_sessions(SCOPE)] == ["s1", "s2"]
        assert await mem.scopes() == [SCOPE]
        assert await mem.forget(SCOPE) is True
        assert await mem.scopes() == []
    assert mem.memory._closed


async def test_errors_surface_unchanged(tmp_path: Path) -> None:
    async with open_async(tmp_path) as mem:
        with pytest.raises(InvalidInput) as info:
            await mem.add_session(SCOPE, [{"role": "robot", "content": "x"}], session_id="s1")
        assert info.value.where == "messages[0].role"
        with pytest.raises(NotFound):
            await mem.get_session(SCOPE, "nope")
        assert await mem.search(SCOPE, "anything") == []


async def test_concurrent_calls_all_land(tmp_path: Path) -> None:
    async with open_async(tmp_path) as mem:
        results = await asyncio.gather(
            *(mem.add_session(SCOPE, chat(f"note number {i}"), session_id=f"s{i}") for i in range(8))
        )
        assert [r.sessions_added for r in results] == [1] * 8
        assert {s.id for s in await mem.sessions(SCOPE)} == {f"s{i}" for i in range(8)}


async def test_blocking_work_does_not_freeze_the_event_loop(tmp_path: Path) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    async with open_async(tmp_path, SlowEmbedder(64)) as mem:
        task = asyncio.create_task(ticker())
        await mem.add_session(SCOPE, chat("slow to embed"), session_id="s1")
        task.cancel()
    assert ticks >= 5, "the event loop did not run while the embedder was busy"


async def test_wrapping_an_existing_memory(tmp_path: Path) -> None:
    from graphrecall import Memory

    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=Settings(root=tmp_path)) as sync:
        mem = AsyncMemory(sync)
        await mem.add_session(SCOPE, chat("hello"), session_id="s1")
        assert sync.stats(SCOPE).sessions == 1


# -- the async twin of every public Memory method --------------------------------------------------------------------
def public_methods(cls: type) -> dict[str, object]:
    """Public callables defined on ``cls`` (and its bases other than object), found generically so that a method
    added to Memory later is covered without editing this test."""
    return {
        name: value
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and callable(value) and not isinstance(value, type)
    }


def parameters(cls: type, name: str) -> list[tuple[str, str, object, str]]:
    """(name, kind, default, annotation) of each parameter but the first (self/cls): what a caller sees."""
    raw = inspect.getattr_static(cls, name)
    fn = raw.__func__ if isinstance(raw, classmethod | staticmethod) else raw
    sig = inspect.signature(fn)
    return [
        (p.name, p.kind.name, p.default, " ".join(str(p.annotation).split()))
        for p in list(sig.parameters.values())[1:]
    ]


def test_memory_has_public_methods_to_compare() -> None:
    # Guards the generic comparison below against comparing nothing.
    assert {"add_session", "search", "context", "answer", "facts", "extract"} <= set(public_methods(Memory))


@pytest.mark.parametrize("name", sorted(public_methods(Memory)))
def test_every_memory_method_has_an_async_twin_with_the_same_parameters(name: str) -> None:
    twin = getattr(AsyncMemory, name, None)
    assert twin is not None, f"AsyncMemory lacks {name}(): add its async twin in src/graphrecall/aio.py"
    sync = inspect.getattr_static(Memory, name)
    if isinstance(sync, classmethod | staticmethod):
        # Constructors (open) stay synchronous: they return the async facade without blocking I/O.
        assert isinstance(inspect.getattr_static(AsyncMemory, name), type(sync))
    elif name in ("recall", "subscribe"):
        # Making a view blocks on nothing (it holds a parsed date); its reads are awaited (below). Subscribing
        # only adds a callable to a list.
        assert not inspect.iscoroutinefunction(twin)
    else:
        assert inspect.iscoroutinefunction(twin), f"AsyncMemory.{name} must be async"
    assert parameters(Memory, name) == parameters(AsyncMemory, name), (
        f"AsyncMemory.{name} takes other parameters than Memory.{name}"
    )


def test_every_operation_of_the_table_is_a_memory_method() -> None:
    assert set(OPERATIONS) <= set(public_methods(Memory))


async def test_the_async_recall_view_awaits_its_reads_instead_of_blocking(tmp_path: Path) -> None:
    async with open_async(tmp_path) as mem:
        await mem.add_session(
            SCOPE, chat("I adopted a puppy called Biscuit"), session_id="s1", date="2024-05-01"
        )
        view = mem.recall(SCOPE, "2024-06-01")
        assert view.question_date.isoformat() == "2024-06-01T00:00:00"
        for read in ("search", "context", "profile", "rounds", "rounds_between", "events_between", "facts"):
            assert inspect.iscoroutinefunction(getattr(view, read)), read
        hits = await view.search("puppy", 3)
        assert [h.session_id for h in hits] == ["s1"]
        assert (await view.context("puppy", 300, k=5)).hits


async def test_extracted_memory_reads_through_the_async_facade(tmp_path: Path) -> None:
    async with open_async(tmp_path) as mem:
        await mem.add_session(SCOPE, chat("I moved to Lisbon", "Nice"), session_id="s1", date="2024-05-01")
        assert await mem.facts(SCOPE) == []
        assert await mem.entities(SCOPE) == []
        assert await mem.events(SCOPE) == []
        with pytest.raises(NotFound):
            await mem.history(SCOPE, "f-missing")
        hits = await mem.search(SCOPE, "Lisbon", 3, kinds=("round", "fact"))
        assert [h.session_id for h in hits] == ["s1"]
