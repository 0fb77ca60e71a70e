"""Shared fixtures: a fast Memory on a temporary root (feature-hashing embedder), a scope, and chat builders.

Tests that judge retrieval *quality* build their own Memory with the bundled model (see
``tests/integration/test_retrieval_quality.py``); everything else uses ``HashingEmbedder(64)`` so the suite needs
no model weights and runs in seconds.
"""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Exported ONNX models go to a directory of this test session, not the user's ~/.cache (subprocesses that the
    tests start inherit it): the first test that loads the real model exports it once, the rest reuse it."""
    old = os.environ.get("GRAPHRECALL_CACHE_DIR")
    os.environ["GRAPHRECALL_CACHE_DIR"] = str(tmp_path_factory.mktemp("graphrecall-cache"))
    yield
    if old is None:
        os.environ.pop("GRAPHRECALL_CACHE_DIR", None)
    else:
        os.environ["GRAPHRECALL_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may pick up a developer's store root, reranker, embedding cache, backend or LLM timeouts from the
    environment."""
    for name in (
        "GRAPHRECALL_ROOT",
        "GRAPHRECALL_RERANKER",
        "GRAPHRECALL_EMBED_CACHE",
        "GRAPHRECALL_EMBED_BACKEND",
        "GRAPHRECALL_POOL_SIZE",
        "GRAPHRECALL_RESIDENT_ROUNDS",
        "GRAPHRECALL_FLUSH_MAX_AGE_S",
        "GRAPHRECALL_COMPACT_FREE_FRACTION",
        "GRAPHRECALL_LLM_TIMEOUT_S",
        "GRAPHRECALL_LLM_MAX_RETRIES",
        "GRAPHRECALL_LLM_CONCURRENCY",
        "GRAPHRECALL_URL",
        "GRAPHRECALL_API_KEY",
        "GRAPHRECALL_ORG",
        "GRAPHRECALL_USER",
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


# -- process exit -------------------------------------------------------------------------------------------------
# Once every result is reported, the test process leaves with os._exit: no interpreter finalization. Why: one full
# run of this suite (2026-12-02, 1492 passed) then died with SIGSEGV while Python tore its modules down, destroying
# what Kuzu, torch and their threads had left in arbitrary order; a rerun of the same checkout with
# `python -X faulthandler` exited cleanly, and no test reproduces it alone. A crash after the summary is no test
# result, yet it turned a green run red. The exit status is pytest's own, so a failing test still fails the run.
_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if not _EXIT_STATUS or os.environ.get("GRAPHRECALL_TEST_FINALIZE") == "1":
        return  # not a whole run (e.g. a collection error), or finalization asked for (to hunt the crash)
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1])
