"""Reranking by a server: the hosted rerank API shape that Cohere, Jina, Voyage and self-hosted servers (TEI, vLLM,
Infinity) share: ``POST {base}/rerank`` with ``{"model", "query", "documents", "top_n"}``, answered with
``{"results": [{"index", "relevance_score"}, ...]}`` (Cohere, Jina, vLLM) or a bare list of ``{"index", "score"}``
(TEI's ``/rerank``).

Spec (``GRAPHRECALL_RERANKER``): ``api:MODEL`` (any server of that shape: set ``GRAPHRECALL_RERANK_BASE_URL``),
``cohere:MODEL`` (``https://api.cohere.com/v2``) or ``jina:MODEL`` (``https://api.jina.ai/v1``). A prefix must be one
of these three, so a cross-encoder's Hugging Face name (``BAAI/bge-reranker-base``) or path never reads as one.

| variable | default | meaning |
|---|---|---|
| ``GRAPHRECALL_RERANK_BASE_URL`` | the provider's API; required for ``api:`` | the server (``/rerank`` is appended) |
| ``GRAPHRECALL_RERANK_API_KEY`` | ``COHERE_API_KEY`` / ``JINA_API_KEY`` | bearer key |
| ``GRAPHRECALL_RERANK_BATCH`` | 64 | documents per request |
| ``GRAPHRECALL_RERANK_TIMEOUT_S`` | 30 | seconds per request |
| ``GRAPHRECALL_RERANK_MAX_RETRIES`` | 2 | extra tries after a 429, a 5xx, a timeout or a failed connection, with backoff |

Why the scores are not declared ``probabilities``: the retriever adds probabilities straight to the fused scores (the
LLM reranker's), but a hosted model's relevance scores are calibrated differently by every provider and model (a
TEI server returns raw logits unless told otherwise), so their order is what is used, blended with the fused order
like a local cross-encoder's. Documents a server leaves out of its answer (``top_n``) rank below every one it scored.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphrecall.errors import ConfigurationError, RerankFailed, Unreachable
from graphrecall.retry import Retryable, RetryPolicy, env_number, post_json, with_retries

PROVIDERS = {"api": None, "cohere": "https://api.cohere.com/v2", "jina": "https://api.jina.ai/v1"}
KEY_VARIABLES = {"cohere": "COHERE_API_KEY", "jina": "JINA_API_KEY"}


@dataclass(frozen=True)
class RerankSettings:
    base_url: str
    api_key: str | None
    batch: int = 64
    retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(max_retries=2, timeout=30.0, retry_timeouts=True)
    )

    @classmethod
    def from_env(cls, provider: str, env: Mapping[str, str] | None = None) -> RerankSettings:
        e = os.environ if env is None else env
        url = e.get("GRAPHRECALL_RERANK_BASE_URL", "").strip() or PROVIDERS[provider]
        if not url:
            raise ConfigurationError(
                "api:MODEL needs the server's address, e.g. http://127.0.0.1:8080 (a TEI or vLLM server)",
                where="GRAPHRECALL_RERANK_BASE_URL",
            )
        key = (
            e.get("GRAPHRECALL_RERANK_API_KEY", "").strip()
            or e.get(KEY_VARIABLES.get(provider, ""), "").strip()
        )
        retries = int(env_number(e, "GRAPHRECALL_RERANK_MAX_RETRIES", 2, minimum=0, integer=True))
        timeout = env_number(e, "GRAPHRECALL_RERANK_TIMEOUT_S", 30.0, minimum=0.1, integer=False)
        return cls(
            base_url=url.rstrip("/"),
            api_key=key or None,
            batch=int(env_number(e, "GRAPHRECALL_RERANK_BATCH", 64, minimum=1, integer=True)),
            retry=RetryPolicy(max_retries=retries, timeout=timeout, retry_timeouts=True),
        )


class ApiReranker:
    """A ``Reranker`` (``retrieve.rerank``) over a rerank server (module docstring). Thread-safe: one client."""

    def __init__(self, provider: str, model: str, settings: RerankSettings) -> None:
        import httpx

        self.provider, self.model, self.settings = provider, model, settings
        self._client = httpx.Client(timeout=settings.retry.timeout)
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.settings.base_url + "/rerank"

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in input order; a document the server left out scores below all it scored."""
        scores: list[float] = []
        size = self.settings.batch
        for start in range(0, len(documents), size):
            scores += self._batch(query, list(documents[start : start + size]))
        return scores

    def _batch(self, query: str, documents: list[str]) -> list[float]:
        body = {"model": self.model, "query": query, "documents": documents, "top_n": len(documents)}

        def attempt() -> list[float]:
            answer = post_json(
                self._client, self.url, body, api_key=self.settings.api_key, timeout=self.settings.retry.timeout,
                what="rerank server", key_setting="GRAPHRECALL_RERANK_API_KEY", failed=RerankFailed,
            )  # fmt: skip
            return self._scores(answer, len(documents))

        return with_retries(attempt, self.settings.retry, self._give_up)

    def _give_up(self, e: Retryable, tries: int) -> Exception:
        if e.unreachable:
            return Unreachable(f"rerank server {self.url} did not answer: {e}")
        return RerankFailed(f"rerank server {self.url}: {e} (after {tries} tries)")

    def _scores(self, body: Any, count: int) -> list[float]:
        """The answer as one score per document in input order, checked: known indexes, each once, numbers."""
        rows = body.get("results") if isinstance(body, dict) else body
        if not isinstance(rows, list):
            raise RerankFailed(f"rerank server {self.url} answered without a list of results")
        scored: dict[int, float] = {}
        for row in rows:
            try:
                index = int(row["index"])
                value = float(row["relevance_score"] if "relevance_score" in row else row["score"])
            except (KeyError, TypeError, ValueError) as e:
                raise RerankFailed(
                    f"rerank server {self.url} answered a result without index and score ({e!r})"
                ) from None
            if not 0 <= index < count or index in scored:
                raise RerankFailed(f"rerank server {self.url} answered index {index} for {count} documents")
            scored[index] = value
        if not scored and count:
            raise RerankFailed(f"rerank server {self.url} scored none of {count} documents")
        floor = min(scored.values()) - 1.0
        return [scored.get(i, floor) for i in range(count)]


def from_spec(provider: str, model: str) -> ApiReranker:
    if not model:
        raise ConfigurationError(
            f"write {provider}:MODEL (the rerank model's name)", where="GRAPHRECALL_RERANKER"
        )
    return ApiReranker(provider, model, RerankSettings.from_env(provider))
