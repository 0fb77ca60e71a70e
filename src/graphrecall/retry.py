"""How hard a client of a remote service tries: bounded attempts, exponential backoff with jitter, the server's
Retry-After honoured. Ground floor: the LLM providers (``llm/_http.py``, async) and the remote embedders
(``embed/remote.py``, sync) run their own loops over the same policy, so both back off alike.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from graphrecall.errors import ConfigurationError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: ``max_retries`` extra attempts after the first, each capped at ``timeout`` s.

    ``retry_timeouts`` (off by default) also resends a request whose attempt timed out; only for servers known to
    drop the work of a client that left: an LLM server usually keeps computing it, so a copy would queue behind
    the original (``llm/_http.py``); an embeddings server answers in milliseconds, so its timeouts are retried.
    """

    max_retries: int = 3
    timeout: float = 60.0
    base_delay: float = 0.5
    max_delay: float = 20.0
    retry_timeouts: bool = False

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Backoff before retry number ``attempt`` (0-based): exponential, "equal jitter", at least the
        server's Retry-After hint (capped so a silly hint cannot stall a run)."""
        backoff = min(self.max_delay, self.base_delay * float(2**attempt))
        wait: float = backoff / 2 + random.uniform(0, backoff / 2)
        if retry_after is not None and retry_after > 0:
            wait = max(wait, min(retry_after, max(self.max_delay, 60.0)))
        return wait


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (only the delta-seconds form; HTTP dates are rare from LLM APIs)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def env_number(env: Mapping[str, str], name: str, default: float, *, minimum: float, integer: bool) -> float:
    """A numeric setting from ``env``: ``default`` when unset, else checked (a ``ConfigurationError`` naming it)."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ConfigurationError(f"must be {kind}, got {raw!r}", where=name) from None
    if value < minimum or not math.isfinite(value):
        raise ConfigurationError(f"must be at least {minimum:g}, got {raw!r}", where=name)
    return value


class Retryable(Exception):
    """One attempt failed in a way worth trying again (after ``retry_after`` s at least, when the server said);
    ``unreachable``: no answer at all (the connection failed)."""

    def __init__(self, message: str, retry_after: float | None = None, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.unreachable = unreachable


def with_retries(
    attempt: Callable[[], T], policy: RetryPolicy, give_up: Callable[[Retryable, int], Exception]
) -> T:
    """``attempt()`` until it returns, retrying a ``Retryable`` failure ``policy.max_retries`` times with backoff;
    then ``give_up(last failure, tries)`` is raised. A synchronous loop (the remote embedders and rerankers)."""
    tries = 0
    while True:
        try:
            return attempt()
        except Retryable as e:
            tries += 1
            if tries > policy.max_retries:
                raise give_up(e, tries) from None
            time.sleep(policy.delay(tries - 1, e.retry_after))


def post_json(
    client: Any, url: str, body: Any, *, api_key: str | None, timeout: float, what: str, key_setting: str,
    failed: Callable[[str], Exception], final: Mapping[int, Callable[[str], Exception]] | None = None,
) -> Any:  # fmt: skip
    """One JSON POST to a model server (``what``: "embeddings server", "rerank server") and its JSON answer. A
    timeout, a failed connection, a 408/429 or a 5xx is ``Retryable`` (with the server's Retry-After); a 401/403 is
    a ``ConfigurationError`` naming ``key_setting``; a status in ``final`` raises what it maps the answer's text to;
    any other 4xx, or an answer that is not JSON, is ``failed(message)``."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = client.post(url, json=body, headers=headers)
    except httpx.TimeoutException:
        raise Retryable(f"no answer within {timeout:g} s") from None
    except httpx.TransportError as e:
        raise Retryable(f"{type(e).__name__}: {e}", unreachable=True) from None
    if r.status_code in (408, 429) or r.status_code >= 500:
        raise Retryable(
            f"HTTP {r.status_code}: {r.text[:200]}", parse_retry_after(r.headers.get("retry-after"))
        )
    if r.status_code in (401, 403):
        raise ConfigurationError(
            f"{what} {url} refused the key (HTTP {r.status_code}): {r.text[:200]}", where=key_setting
        )
    if final and r.status_code in final:
        raise final[r.status_code](r.text[:200])
    if r.status_code >= 400:
        raise failed(f"{what} {url}: HTTP {r.status_code}: {r.text[:300]}")
    try:
        return r.json()
    except ValueError:
        raise failed(f"{what} {url} answered something else than JSON: {r.text[:100]!r}") from None
