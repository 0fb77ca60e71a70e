"""Stages of one search: independent store queries side by side on worker threads, and their timings.

Why threads help on 2 cores: Kuzu and torch/ONNX Runtime release the GIL, and at 100k rounds BM25 alone costs more
than embedding the query, so running them side by side takes that much off the latency (docs/benchmarks.md). Each
thread reads through its own connection (``ScopeDatabase.reader``). Tasks never wait on each other inside the pool
(only the searching thread waits), so a busy pool queues work but cannot deadlock.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

from graphrecall import telemetry
from graphrecall.models import Round
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase

T = TypeVar("T")

_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()
_worker = threading.local()


class StageRunner:
    """Runs one search's stages on the shared worker pool, or inline when ``parallel`` is off (same results).

    Use it as a context manager: leaving the block waits for every stage it started, also when the search fails
    half-way, so no worker can still be reading a database that the caller then hands back to the pool (and the
    pool may close).
    """

    def __init__(self, parallel: bool, timings: dict[str, float] | None) -> None:
        self.parallel = parallel
        self.timings = timings
        self._started: list[Future[Any]] = []

    def __enter__(self) -> StageRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        wait(self._started)

    def submit(self, name: str, fn: Callable[..., T], *args: Any) -> Future[T]:
        """``fn(*args)`` timed as stage ``name``; its error, if any, comes back from ``.result()``."""

        def timed() -> T:
            with stage(self.timings, name):
                return fn(*args)

        if self.parallel:
            # Under tracing the stage's span must be a child of the search's, which lives in this thread's context.
            job = (
                _executor().submit(contextvars.copy_context().run, timed)
                if telemetry.enabled()
                else _executor().submit(timed)
            )
            self._started.append(job)
            return job
        done: Future[T] = Future()
        try:
            done.set_result(timed())
        except BaseException as e:  # re-raised by .result(), as a worker's error would be
            done.set_exception(e)
        return done

    def fetch_rounds(self, db: ScopeDatabase, ids: Sequence[str]) -> dict[str, Round]:
        """Point lookups, split in two halves that run side by side."""
        if not ids:
            return {}
        half = (len(ids) + 1) // 2 if self.parallel and len(ids) > 8 else len(ids)
        rest = self.submit("fetch_rows_bg", q.fetch_rounds, db, ids[half:]) if ids[half:] else None
        with stage(self.timings, "fetch_rows"):
            out = q.fetch_rounds(db, ids[:half])
        if rest is not None:
            out.update(rest.result())
        return out


def on_search_worker() -> bool:
    """True on a thread of the search pool (where per-thread settings such as torch's thread count are ours)."""
    return bool(getattr(_worker, "search", False))


def _mark_worker() -> None:
    _worker.search = True


def _executor() -> ThreadPoolExecutor:
    """One small pool per process, created on first use: searches are short and the machine may have 2 cores."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(
                max_workers=4, thread_name_prefix="graphrecall-search", initializer=_mark_worker
            )
        return _EXECUTOR


def stage(timings: dict[str, float] | None, name: str) -> contextlib.AbstractContextManager[None]:
    """Adds the block's wall time (ms) to ``timings[name]``; free when ``timings`` is None. Under tracing the block
    is also a span, ``graphrecall.search.<name>`` (``graphrecall.telemetry``)."""
    if telemetry.enabled():
        return _traced(timings, name)
    return _timed(timings, name)


@contextmanager
def _traced(timings: dict[str, float] | None, name: str) -> Iterator[None]:
    with telemetry.span(f"graphrecall.search.{name}"), _timed(timings, name):
        yield


@contextmanager
def _timed(timings: dict[str, float] | None, name: str) -> Iterator[None]:
    if timings is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + (time.perf_counter() - t0) * 1000
