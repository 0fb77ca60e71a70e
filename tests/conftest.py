"""Shared fixtures: a fast Memory on a temporary root (feature-hashing embedder), a scope, and chat builders.

Tests that judge retrieval *quality* build their own Memory with the bundled model (see
``tests/integration/test_retrieval_quality.py``); everything else uses ``HashingEmbedder(64)`` so the suite needs
no model weights and runs in seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder

settings.register_profile(
    "graphrecall",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile("graphrecall")


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may pick up a developer's store root, reranker or embedding cache from the environment."""
    for name in (
        "GRAPHRECALL_ROOT",
        "GRAPHRECALL_RERANKER",
        "GRAPHRECALL_EMBED_CACHE",
        "GRAPHRECALL_POOL_SIZE",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def scope() -> Scope:
    return Scope(org_id="acme", user_id="alice")


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def mem(store_root: Path) -> Iterator[Memory]:
    """A Memory with the 64-dimensional hashing embedder and no reranker."""
    with Memory.open(store_root, embedder=HashingEmbedder(64), settings=Settings(root=store_root)) as m:
        yield m
