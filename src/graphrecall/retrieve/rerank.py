"""Cross-encoder reranking through the ``rerankers`` package, configurable by model name or local path; or the
LLM reranker (``llm_rerank``) where an LLM is configured and no cross-encoder is.

No trained cross-encoder ships offline here, so reranking is optional: when none is configured the retriever says
so once (a log line) and keeps the fused order; one that is configured but cannot be loaded fails the search with
``NotAvailable`` naming it, rather than quietly ranking without it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from graphrecall.errors import ConfigurationError, NotAvailable

if TYPE_CHECKING:
    from graphrecall.llm.base import LLM

log = logging.getLogger(__name__)


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, document) pairs; higher is more relevant. One score per document, in input order.

    Two optional attributes change how the retriever uses it: ``max_documents`` (int) caps how many fused
    candidates it is given, below ``RetrievalConfig.rerank_top``, for a reranker that is slow per document;
    ``probabilities`` (bool) says its scores are probabilities in [0, 1], which the retriever then adds to the
    fused scores (times ``rerank_weight`` in rank-1 units) instead of blending ranks."""

    def score(self, query: str, documents: Sequence[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A ``rerankers`` cross-encoder (``model_type='cross-encoder'``) loaded lazily on first use."""

    def __init__(
        self, model: str, *, model_type: str = "cross-encoder", device: str = "cpu", batch_size: int = 16
    ):
        self.model = model
        self.model_type = model_type
        self.device = device
        self.batch_size = batch_size
        self._ranker: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._ranker is None:
            with self._lock:
                if self._ranker is None:
                    try:
                        from rerankers import Reranker as _Rerankers

                        ranker = _Rerankers(
                            self.model,
                            model_type=self.model_type,
                            device=self.device,
                            batch_size=self.batch_size,
                            verbose=0,
                        )
                    except Exception as e:  # ImportError, OSError (no such model), torch errors...
                        raise NotAvailable(f"cannot load reranker {self.model!r}: {e}") from e
                    if ranker is None:  # ``rerankers`` returns None (and prints) when a dependency is missing
                        raise NotAvailable(
                            f"cannot load reranker {self.model!r}: rerankers lacks the dependencies for "
                            f"{self.model_type!r} (pip install 'graphrecall[rerank]')"
                        )
                    self._ranker = ranker
        return self._ranker

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        ranked = self._load().rank(query=query, docs=list(documents), doc_ids=list(range(len(documents))))
        scores = [0.0] * len(documents)
        for r in ranked.results:
            scores[int(r.document.doc_id)] = float(r.score)
        return scores


class _Warned:
    done = False


LLM_SPEC = "llm"


def load_reranker(spec: str | None, llm: LLM | None = None) -> Reranker | None:
    """``spec`` is a cross-encoder's model name or local path, ``api:MODEL`` / ``cohere:MODEL`` / ``jina:MODEL`` /
    ``tei`` for a rerank server (``retrieve.rerank_api``; an existing directory named like ``api:x`` is a local
    model; a Hugging Face name has no colon), or ``llm`` / ``llm:N`` for the LLM reranker
    (``graphrecall.retrieve.llm_rerank``; N candidates per search, default 4) over ``llm``, else the model
    ``GRAPHRECALL_LLM`` names (built on the first search). None/empty means reranking is off (said once, in the
    log)."""
    if not spec:
        if not _Warned.done:
            log.info("reranker: off (set GRAPHRECALL_RERANKER to a cross-encoder name or path to enable it)")
            _Warned.done = True
        return None
    spec = spec.strip()
    name, _, count = spec.partition(":")
    from graphrecall.retrieve import rerank_api

    # api:MODEL, cohere:MODEL, jina:MODEL, tei: a rerank server, unless a local directory is called that
    if name in rerank_api.PROVIDERS and not (":" in spec and Path(spec).expanduser().exists()):
        return rerank_api.from_spec(name, count.strip())
    if name != LLM_SPEC:
        return CrossEncoderReranker(spec)
    from graphrecall.retrieve.llm_rerank import DEFAULT_MAX_DOCUMENTS, LLMReranker

    try:
        top = int(count) if count else DEFAULT_MAX_DOCUMENTS
        if top < 1:
            raise ValueError
    except ValueError:
        raise ConfigurationError(
            f"reranker {spec!r}: write llm or llm:N with N a positive number of candidates",
            where="GRAPHRECALL_RERANKER",
        ) from None
    return LLMReranker(llm, max_documents=top)
