"""Retries, timeouts and concurrency limits shared by the HTTP providers.

The SDKs' own retry loops are switched off (``max_retries=0``) so that every provider behaves the same way:
bounded attempts, exponential backoff with jitter on 429/5xx/connection errors, a per-attempt timeout, and an
``asyncio.Semaphore`` that caps in-flight requests per provider instance (extraction fans out one call per
session; without a cap a large import would hammer the API and trip its rate limits).

A request that timed out is not sent again here (``RetryPolicy.retry_timeouts`` is off): a server without an
answer after ``timeout`` seconds is most likely still computing it (a one-slot llama.cpp server at 2.5 tokens/s
is; llama-cpp-python finishes a request even after the client left), so a copy sent now would queue behind the
original and the model would do the work twice or three times while every copy times out in turn. The caller
decides when to try again (the extraction queue does, later); a provider that can tell when its server is idle
again passes ``prepare`` to wait for that before an attempt.

SDK clients and semaphores are bound to the event loop they were first used on, and this library is called
both from async servers and from sync code (via a background loop), so both are kept per loop (``LoopLocal``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Generic, TypeVar

from graphrecall import telemetry
from graphrecall.retry import RetryPolicy, parse_retry_after

from .errors import LLMError, LLMRateLimited, LLMTimeout

__all__ = ["Limiter", "LoopLocal", "RetryPolicy", "call_with_retries", "parse_retry_after", "status_error"]

log = logging.getLogger("graphrecall.llm")

R = TypeVar("R")
V = TypeVar("V")


class LoopLocal(Generic[V]):
    """One value per running event loop, created on demand and dropped with its loop."""

    def __init__(self, factory: Callable[[], V]) -> None:
        self._factory = factory
        self._values: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, V] = weakref.WeakKeyDictionary()

    def get(self) -> V:
        loop = asyncio.get_running_loop()
        value = self._values.get(loop)
        if value is None:
            value = self._factory()
            self._values[loop] = value
        return value


class Limiter:
    """``async with limiter:`` allows at most ``concurrency`` bodies at once (per event loop)."""

    def __init__(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.concurrency = concurrency
        self._sems: LoopLocal[asyncio.Semaphore] = LoopLocal(lambda: asyncio.Semaphore(concurrency))

    async def __aenter__(self) -> None:
        await self._sems.get().acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._sems.get().release()


async def call_with_retries(
    op: Callable[[], Awaitable[R]],
    *,
    policy: RetryPolicy,
    limiter: Limiter,
    translate: Callable[[Exception], LLMError | None],
    what: str,
    retry_if: Callable[[LLMError], bool] | None = None,
    prepare: Callable[[], Awaitable[None]] | None = None,
) -> R:
    """Run ``op`` until it succeeds, a non-retryable error occurs, or ``policy.max_retries`` is used up.

    ``translate`` maps SDK exceptions to ``LLMError`` (``None`` lets an unknown exception through untouched,
    since it is a bug, not a transient failure). ``retry_if`` overrides the error's own ``retryable`` flag,
    e.g. to stop retrying a 500 that is really "this server does not support json_schema"; a timeout is retried
    only with ``policy.retry_timeouts``. ``prepare`` runs before each attempt, holding the semaphore but outside
    the attempt's timeout (it bounds its own wait), e.g. to wait until the server finished an abandoned request;
    an ``LLMError`` it raises ends the attempt like the request's own. The semaphore is held only while a
    request is in flight, not during backoff sleeps.
    """
    attempt = 0
    while True:
        try:
            async with limiter:
                if prepare is not None:
                    await prepare()
                async with asyncio.timeout(policy.timeout):
                    return await op()
        except TimeoutError as exc:
            err: LLMError = LLMTimeout(f"{what}: timed out, no answer within {policy.timeout:g}s")
            cause: Exception = exc
        except LLMError as exc:
            err, cause = exc, exc
        except Exception as exc:
            translated = translate(exc)
            if translated is None:
                raise
            err, cause = translated, exc
        retry = err.retryable if retry_if is None else retry_if(err)
        if isinstance(err, LLMTimeout) and not policy.retry_timeouts:
            retry = False
        if not retry or attempt >= policy.max_retries:
            if err is cause:
                raise err
            raise err from cause
        wait = policy.delay(attempt, err.retry_after)
        telemetry.current_event(
            "retry", {"attempt": attempt + 1, "error": type(err).__name__, "wait_s": round(wait, 3)}
        )
        log.warning(
            "%s failed (%s); retry %d/%d in %.2fs", what, err.message, attempt + 1, policy.max_retries, wait
        )
        await asyncio.sleep(wait)
        attempt += 1


def status_error(provider: str, status: int, message: str, retry_after: float | None = None) -> LLMError:
    """Map an HTTP status to an ``LLMError``: 429 rate limit, 408/409/5xx retryable, other 4xx final."""
    text = f"{provider} HTTP {status}: {message[:1000]}"
    if status == 429:
        return LLMRateLimited(text, retry_after=retry_after)
    return LLMError(
        text, status=status, retryable=status >= 500 or status in (408, 409), retry_after=retry_after
    )
