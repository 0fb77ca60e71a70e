"""Server start-up: the embedding model is loaded and the start-up heap frozen out of garbage collection before the
server says it is ready, so neither lands on a request (server/warmup.py)."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from pathlib import Path

import httpx

from graphrecall import Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.embed.base import TextKind, Vectors
from graphrecall.server import create_app
from graphrecall.server.testing import serve_in_thread


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[tuple[list[str], str]] = []

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        self.calls.append((list(texts), kind))
        return super().embed(texts, kind=kind)


def test_the_model_is_loaded_and_the_heap_frozen_before_the_first_request(tmp_path: Path) -> None:
    embedder = Counting()
    gc.unfreeze()
    try:
        with (
            Memory.open(tmp_path, embedder=embedder) as mem,
            serve_in_thread(create_app(mem, auth=None, insecure_local=True)) as url,
        ):
            assert embedder.calls == [(["warm up"], "query")]  # before any request was sent
            assert gc.get_freeze_count() > 0
            assert httpx.get(f"{url}/readyz").status_code == 200
    finally:
        gc.unfreeze()


def test_warm_false_leaves_both_to_the_first_request(tmp_path: Path) -> None:
    embedder = Counting()
    gc.unfreeze()
    with (
        Memory.open(tmp_path, embedder=embedder) as mem,
        serve_in_thread(create_app(mem, auth=None, insecure_local=True, warm=False)) as url,
    ):
        assert embedder.calls == [] and gc.get_freeze_count() == 0
        assert httpx.get(f"{url}/readyz").status_code == 200
