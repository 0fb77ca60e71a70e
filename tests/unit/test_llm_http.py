"""Retry, timeout and concurrency behaviour shared by the HTTP providers (no network needed)."""

from __future__ import annotations

import asyncio

import pytest

from graphrecall.llm import LLMError, LLMRateLimited, LLMTimeout
from graphrecall.llm._http import Limiter, RetryPolicy, call_with_retries, status_error

FAST = RetryPolicy(max_retries=3, timeout=1.0, base_delay=0.001, max_delay=0.01)


def _no_translate(exc: Exception) -> LLMError | None:
    return None


async def _run(op, policy: RetryPolicy = FAST, **kw):  # type: ignore[no-untyped-def]
    return await call_with_retries(
        op, policy=policy, limiter=Limiter(4), translate=kw.pop("translate", _no_translate), what="test", **kw
    )


async def test_retryable_errors_are_retried_until_success() -> None:
    attempts = 0

    async def op() -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise status_error("p", 503, "busy")
        return "ok"

    assert await _run(op) == "ok"
    assert attempts == 3


async def test_attempts_are_bounded() -> None:
    attempts = 0

    async def op() -> str:
        nonlocal attempts
        attempts += 1
        raise LLMRateLimited("429")

    with pytest.raises(LLMRateLimited):
        await _run(op)
    assert attempts == 1 + FAST.max_retries


async def test_client_errors_are_not_retried() -> None:
    attempts = 0

    async def op() -> str:
        nonlocal attempts
        attempts += 1
        raise status_error("p", 400, "bad request")

    with pytest.raises(LLMError, match="HTTP 400"):
        await _run(op)
    assert attempts == 1


async def test_sdk_exceptions_are_translated_and_unknown_ones_pass_through() -> None:
    async def conn() -> str:
        raise ConnectionResetError("reset")

    async def bug() -> str:
        raise KeyError("bug")

    def translate(exc: Exception) -> LLMError | None:
        return LLMError("connection", retryable=False) if isinstance(exc, ConnectionError) else None

    with pytest.raises(LLMError, match="connection"):
        await _run(conn, translate=translate)
    with pytest.raises(KeyError):
        await _run(bug, translate=translate)


async def test_slow_attempts_time_out() -> None:
    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    policy = RetryPolicy(max_retries=1, timeout=0.05, base_delay=0.001)
    with pytest.raises(LLMTimeout, match=r"0\.05s"):
        await _run(slow, policy=policy)


async def test_a_timed_out_request_is_not_resent_unless_the_policy_says_so() -> None:
    """The server may still be computing a request that timed out: a copy would queue behind it."""
    attempts = 0

    async def slow() -> str:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(5)
        return "late"

    with pytest.raises(LLMTimeout, match="timed out"):
        await _run(slow, policy=RetryPolicy(max_retries=3, timeout=0.05, base_delay=0.001))
    assert attempts == 1
    attempts = 0
    with pytest.raises(LLMTimeout):
        await _run(
            slow, policy=RetryPolicy(max_retries=2, timeout=0.05, base_delay=0.001, retry_timeouts=True)
        )
    assert attempts == 3


async def test_prepare_runs_before_each_attempt_off_the_attempts_clock() -> None:
    events: list[str] = []

    async def prepare() -> None:
        events.append("prepare")
        await asyncio.sleep(0.15)  # longer than the attempt's timeout: not counted against it

    async def flaky() -> str:
        events.append("op")
        if events.count("op") == 1:
            raise status_error("p", 503, "busy")
        return "ok"

    policy = RetryPolicy(max_retries=2, timeout=0.1, base_delay=0.001)
    assert await _run(flaky, policy=policy, prepare=prepare) == "ok"
    assert events == ["prepare", "op", "prepare", "op"]

    async def busy() -> None:
        raise LLMTimeout("still busy")

    async def never() -> str:
        raise AssertionError("sent although prepare said the server is busy")

    with pytest.raises(LLMTimeout, match="still busy"):
        await _run(never, prepare=busy)


async def test_limiter_caps_concurrent_requests() -> None:
    limiter = Limiter(2)
    active = peak = 0

    async def op() -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1

    await asyncio.gather(
        *(
            call_with_retries(op, policy=FAST, limiter=limiter, translate=_no_translate, what="t")
            for _ in range(8)
        )
    )
    assert peak == 2


def test_backoff_grows_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    for attempt, (low, high) in enumerate([(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (4.0, 8.0)]):
        assert low <= policy.delay(attempt) <= high
    assert policy.delay(0, retry_after=7.0) == 7.0


def test_status_mapping() -> None:
    assert isinstance(status_error("p", 429, "x"), LLMRateLimited)
    assert status_error("p", 500, "x").retryable
    assert status_error("p", 408, "x").retryable
    assert not status_error("p", 422, "x").retryable
