"""AsyncMemory: the Memory API for asyncio, each call in a worker thread so the event loop keeps running."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from graphrecall import InvalidInput, NotFound, Scope, Settings
from graphrecall.aio import AsyncMemory
from graphrecall.embed import HashingEmbedder, TextKind, Vectors

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
