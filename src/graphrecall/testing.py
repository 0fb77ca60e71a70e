"""The one seam through which tests and benchmarks reach below the facade.

``Memory`` keeps its pool, recall service and writer private; code that must look underneath (a test that checks
rows or index entries, a benchmark that times retrieval stages or pool behaviour) asks here, so every such reach is
explicit, greppable, and survives a refactor of the facade in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from graphrecall.memory import Memory, ScopeLike, as_scope
from graphrecall.retrieve.retriever import HybridRetriever
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.pool import DatabasePool
from graphrecall.writer import Writer


def pool(memory: Memory) -> DatabasePool:
    """The memory's pool of open scope databases (open counts, paths, eviction)."""
    return memory._s.access.pool


def logs(memory: Memory) -> ScopeLogs:
    """The memory's write logs (which scopes live in their log, their unflushed tails)."""
    return memory._s.access.logs


def retriever(memory: Memory) -> HybridRetriever:
    """The memory's round retriever (stage timings, exact-scan comparisons, config variants)."""
    return memory._s.recall.retriever


def writer(memory: Memory) -> Writer:
    """The memory's writer (the embedding texts and vectors ingest would produce)."""
    return memory._s.writer


@contextlib.contextmanager
def database(memory: Memory, scope: ScopeLike, *, create: bool = False) -> Iterator[ScopeDatabase]:
    """A scope's open database, held for the block (as a request would hold it)."""
    with memory._s.access.pool.acquire(as_scope(scope), create=create) as db:
        yield db


def set_clock(memory: Memory, clock: Callable[[], float]) -> None:
    """The clock maintenance and the usage log read (seconds since the epoch), for tests of idle times."""
    memory._s.maintenance.clock = clock
    memory._s.usage._clock = clock
