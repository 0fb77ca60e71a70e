"""How hard a client of a remote service tries: bounded attempts, exponential backoff with jitter, the server's
Retry-After honoured. Ground floor: the LLM providers (``llm/_http.py``, async) and the remote embedders
(``embed/remote.py``, sync) run their own loops over the same policy, so both back off alike.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from graphrecall.errors import ConfigurationError


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
