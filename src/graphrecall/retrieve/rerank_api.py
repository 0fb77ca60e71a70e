"""Reranking by a server. Two request shapes cover the hosted and self-hosted rerank APIs:

* ``api:MODEL``, ``cohere:MODEL``, ``jina:MODEL``: ``POST {base}/rerank`` with ``{"model", "query", "documents",
  "top_n"}``, answered with ``{"results": [{"index", "relevance_score"}, ...]}``: Cohere (v1 and v2), Jina, Voyage,
  vLLM, Infinity, LocalAI...
* ``tei`` (or ``tei:ANYTHING``, the name is not sent): Hugging Face Text Embeddings Inference, ``POST {base}/rerank``
  with ``{"query", "texts", "truncate": true}``, answered with a bare list ``[{"index", "score"}, ...]``. TEI
  serves one model, requires ``texts`` (a ``documents`` body is refused with 422), refuses over-long inputs unless
  asked to truncate, and more than 32 texts a request unless started with a larger ``--max-client-batch-size``.

Either answer shape is read whichever provider sent it. ``{base}`` is the server's address including any version
segment (``http://host:8000/v1`` for vLLM's ``/v1/rerank``); an address already ending in ``/rerank`` is used as
it is. A spec's prefix must be one of these four and a path that exists is always a local cross-encoder
(``retrieve.rerank.load_reranker``), so a Hugging Face name (``BAAI/bge-reranker-base``: no colon) or a local
directory never reads as a provider.

| variable | default | meaning |
|---|---|---|
| ``GRAPHRECALL_RERANK_BASE_URL`` | the provider's API; required for ``api`` and ``tei`` | the server |
| ``GRAPHRECALL_RERANK_API_KEY`` | ``COHERE_API_KEY`` / ``JINA_API_KEY`` | bearer key |
| ``GRAPHRECALL_RERANK_BATCH`` | 64 (``tei``: 32) | documents per request |
| ``GRAPHRECALL_RERANK_TIMEOUT_S`` | 30 | seconds per request |
| ``GRAPHRECALL_RERANK_MAX_RETRIES`` | 2 | extra tries after a 408, 429, a 5xx, a timeout or a failed connection |

Retries back off exponentially (``retry.RetryPolicy``) and wait at least a 429's or 503's ``Retry-After``.

Why the scores are not declared ``probabilities`` (``retrieve.rerank.Reranker``): the retriever adds probabilities
straight to the fused scores, in rank-1 units (``retrieve.post.Rerank``), which suits the LLM reranker's P(yes),
spread over [0, 1]. A hosted reranker's scores are in [0, 1] for Cohere, Jina and TEI's default sigmoid, but their
spread differs by provider and model (Cohere's v3 models put most passages below 0.1 and a few near 1; another
model's relevant passages sit at 0.3), so one ``rerank_weight`` would move a round a full place for one model and
nothing for another; and an ``api`` server may answer raw logits (TEI with ``raw_scores``, some vLLM models), which
clipping to [0, 1] would flatten. Their order is what every one of them gets right, so they are blended with the
fused order in rank space like a local cross-encoder's: a weak reranker cannot throw away what fusion found.
Documents a server leaves out of its answer (``top_n`` capped by the server) rank below every one it scored, in
every batch of the search.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphrecall.errors import ConfigurationError, RerankFailed, Unreachable
from graphrecall.retry import Retryable, RetryPolicy, env_number, post_json, with_retries

PROVIDERS = {
    "api": None,
    "cohere": "https://api.cohere.com/v2",
    "jina": "https://api.jina.ai/v1",
    "tei": None,
}
KEY_VARIABLES = {"cohere": "COHERE_API_KEY", "jina": "JINA_API_KEY"}
DEFAULT_BATCH = {"tei": 32}  # TEI's --max-client-batch-size default; hosted APIs take far more than 64
EXAMPLE_URL = {"api": "http://127.0.0.1:8000/v1 (vLLM)", "tei": "http://127.0.0.1:8080"}


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
                f"the {provider} reranker needs the server's address, e.g. {EXAMPLE_URL[provider]}",
                where="GRAPHRECALL_RERANK_BASE_URL",
            )
        if "://" not in url:
            url = f"http://{url}"
        key = (
            e.get("GRAPHRECALL_RERANK_API_KEY", "").strip()
            or e.get(KEY_VARIABLES.get(provider, ""), "").strip()
        )
        batch = env_number(
            e, "GRAPHRECALL_RERANK_BATCH", DEFAULT_BATCH.get(provider, 64), minimum=1, integer=True
        )
        retries = int(env_number(e, "GRAPHRECALL_RERANK_MAX_RETRIES", 2, minimum=0, integer=True))
        timeout = env_number(e, "GRAPHRECALL_RERANK_TIMEOUT_S", 30.0, minimum=0.1, integer=False)
        return cls(
            base_url=url.rstrip("/"),
            api_key=key or None,
            batch=int(batch),
            retry=RetryPolicy(max_retries=retries, timeout=timeout, retry_timeouts=True),
        )


class ApiReranker:
    """A ``Reranker`` (``retrieve.rerank``) over a rerank server (module docstring). Thread-safe: one ``httpx``
    client, nothing else shared between calls."""

    def __init__(self, provider: str, model: str, settings: RerankSettings) -> None:
        import httpx

        self.provider, self.model, self.settings = provider, model, settings
        self._client = httpx.Client(timeout=settings.retry.timeout)

    @property
    def url(self) -> str:
        base = self.settings.base_url
        return base if base.endswith("/rerank") else base + "/rerank"

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """One score per document, in input order, ``GRAPHRECALL_RERANK_BATCH`` documents a request; a document a
        server left out scores below every document scored in any batch."""
        scored: dict[int, float] = {}
        size = self.settings.batch
        for start in range(0, len(documents), size):
            part = self._batch(query, list(documents[start : start + size]))
            scored.update((start + i, value) for i, value in part.items())
        if not scored:
            return []
        floor = min(scored.values()) - 1.0
        return [scored.get(i, floor) for i in range(len(documents))]

    def _batch(self, query: str, documents: list[str]) -> dict[int, float]:
        def attempt() -> dict[int, float]:
            return self._scores(self._post(query, documents), len(documents))

        return with_retries(attempt, self.settings.retry, self._give_up)

    def _give_up(self, e: Retryable, tries: int) -> Exception:
        if e.unreachable:
            return Unreachable(f"rerank server {self.url} did not answer: {e}")
        return RerankFailed(f"rerank server {self.url}: {e} (after {tries} tries)")

    def body(self, query: str, documents: list[str]) -> dict[str, Any]:
        """The request: TEI's own shape for ``tei``, else the Cohere/Jina one (module docstring)."""
        if self.provider == "tei":
            return {"query": query, "texts": documents, "truncate": True}
        return {"model": self.model, "query": query, "documents": documents, "top_n": len(documents)}

    def _post(self, query: str, documents: list[str]) -> Any:
        """One request; a 413 names the setting that makes requests smaller."""

        def too_large(text: str) -> Exception:
            return RerankFailed(
                f"rerank server {self.url} refused {len(documents)} documents in one request (HTTP 413): lower "
                f"GRAPHRECALL_RERANK_BATCH; {text}"
            )

        return post_json(
            self._client, self.url, self.body(query, documents), api_key=self.settings.api_key,
            timeout=self.settings.retry.timeout, what="rerank server", key_setting="GRAPHRECALL_RERANK_API_KEY",
            failed=RerankFailed, final={413: too_large},
        )  # fmt: skip

    def _scores(self, body: Any, count: int) -> dict[int, float]:
        """The answer as {index: score}, checked: whole-number indexes among the ``count`` sent, each once, finite
        numbers. A list that scores none of them is an error; one that leaves some out is not (``top_n``)."""
        rows = body.get("results") if isinstance(body, dict) else body
        if not isinstance(rows, list):
            what = (
                f"an object with keys {sorted(body)[:5]}" if isinstance(body, dict) else type(body).__name__
            )
            raise RerankFailed(f"rerank server {self.url} answered {what}, not a list of results")
        scored: dict[int, float] = {}
        for row in rows:
            index = row.get("index") if isinstance(row, dict) else None
            value = None
            if isinstance(row, dict):
                value = row["relevance_score"] if "relevance_score" in row else row.get("score")
            if not _whole(index) or not _number(value):
                raise RerankFailed(
                    f"rerank server {self.url} answered a result without a whole-number index and a finite "
                    f"relevance_score or score: {str(row)[:120]}"
                )
            assert isinstance(index, int) and isinstance(value, int | float)
            if not 0 <= index < count:
                raise RerankFailed(f"rerank server {self.url} answered index {index} for {count} documents")
            if index in scored:
                raise RerankFailed(f"rerank server {self.url} answered index {index} twice")
            scored[index] = float(value)
        if not scored and count:
            raise RerankFailed(f"rerank server {self.url} scored none of {count} documents")
        return scored


def _whole(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def from_spec(provider: str, model: str) -> ApiReranker:
    """``provider:model`` (module docstring); ``tei`` needs no model (its server has one), the others do."""
    if not model and provider != "tei":
        raise ConfigurationError(
            f"write {provider}:MODEL (the rerank model's name)", where="GRAPHRECALL_RERANKER"
        )
    return ApiReranker(provider, model, RerankSettings.from_env(provider))
