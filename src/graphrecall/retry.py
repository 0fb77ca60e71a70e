"""How hard a client of a remote service tries: bounded attempts, exponential backoff with jitter, the server's
Retry-After honoured. Ground floor: the LLM providers (``llm/_http.py``, async) and the remote embedders
(``embed/remote.py``, sync) run their own loops over the same policy, so both back off alike.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


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
