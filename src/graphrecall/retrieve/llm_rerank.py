"""Reranking by a language model's judgement, for deployments with an LLM but no cross-encoder.

A trained cross-encoder reads the question and a round together; where none is installed, the LLM the Reader
already uses can do the same job, pointwise: one short request per candidate, "does the text answer the
question? yes or no", and the score is the model's probability of "yes" against "no" for its first token
(``complete(..., top_logprobs=...)``). The probability rather than the word: a small model says "no" to most
excerpts, yet its "yes" is measurably likelier for the one that answers, and that margin is what ranks. A
provider that returns no log probabilities still works, at the coarser 1 (yes) / 0 (no).

Pointwise rather than one listwise prompt because a small model keeps a single excerpt in view reliably and a
list invites position bias; the question comes first so a local server reuses its cached prefix across the
candidates of one search. A request per candidate is slow next to a cross-encoder, so ``max_documents`` caps how
many fused candidates it reads, whatever ``RetrievalConfig.rerank_top`` says. A reply that is neither yes nor no
scores 0.5 (no information) and is counted in ``unparsed`` (logged once): a model that cannot follow the format
degrades to the fused order, never to an error in search. So does a model that fails (unreachable, overloaded,
an error status after the provider's retries): the search logs a warning, counts it in ``failures`` and returns
the fused order, because a reranker improves a search and must not take it down. A reranker that is not
configured at all (``GRAPHRECALL_RERANKER=llm`` with no LLM) is a configuration error and says so.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence

from graphrecall.llm.base import LLM, ChatMessage, run_sync
from graphrecall.llm.errors import LLMError
from graphrecall.prompts import Prompt, load_prompt
from graphrecall.retrieve.excerpt import question_terms, round_excerpt

log = logging.getLogger(__name__)

PROMPT = "rerank_answers"
# The setting measured on the small-store set (docs/benchmarks.md "An LLM as the reranker").
DEFAULT_MAX_DOCUMENTS = 4
DOCUMENT_MAX_CHARS = 1500
TOP_LOGPROBS = 10
UNKNOWN = 0.5
_WORD = re.compile(r"[a-z]+")


def yes_probability(first_token_logprobs: Mapping[str, float]) -> float | None:
    """P(yes) / (P(yes) + P(no)) over the first token's alternatives (any case, any surrounding space or
    punctuation), or None when neither word is among them."""
    yes = no = 0.0
    for token, logprob in first_token_logprobs.items():
        word = _word(token)
        if word == "yes":
            yes += math.exp(logprob)
        elif word == "no":
            no += math.exp(logprob)
    return yes / (yes + no) if yes + no > 0 else None


def parse_answer(reply: str) -> float | None:
    """1.0 for a reply that starts with yes, 0.0 for no, None for anything else."""
    word = _word(reply)
    return 1.0 if word == "yes" else 0.0 if word == "no" else None


def _word(text: str) -> str:
    m = _WORD.search(text.lower())
    return m.group(0) if m else ""


class LLMReranker:
    """Scores each (question, round) pair by an LLM's probability that the round answers it."""

    probabilities = True
    """Scores are probabilities: the retriever adds them to the fused score instead of blending ranks."""

    def __init__(
        self,
        llm: LLM | None = None,
        *,
        max_documents: int = DEFAULT_MAX_DOCUMENTS,
        prompt: Prompt | None = None,
    ) -> None:
        """``llm`` None: the model ``GRAPHRECALL_LLM`` names, built when the first search needs it, so that a
        store opened to list, export or erase never imports a provider or fails for want of a key."""
        if max_documents < 1:
            raise ValueError(f"max_documents must be at least 1, got {max_documents}")
        self._llm = llm
        self.max_documents = max_documents
        self.prompt = prompt or load_prompt(PROMPT)
        self.unparsed = 0
        self.failures = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMReranker(llm={self._llm!r}, max_documents={self.max_documents})"

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            with self._lock:
                if self._llm is None:
                    self._llm = _configured_llm()
        return self._llm

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """All candidates' requests at once: a hosted model answers them in parallel (up to the provider's
        concurrency limit); a local single-slot server queues them, no slower than one by one."""
        if not documents:
            return []
        llm = self.llm  # a configuration error surfaces here, not as a failed request
        try:
            return run_sync(self._score_all(query, documents))
        except LLMError as e:
            with self._lock:
                self.failures += 1
            log.warning("LLM reranker: %s failed (%s); this search keeps the fused order", llm.model, e)
            return [UNKNOWN] * len(documents)

    async def _score_all(self, query: str, documents: Sequence[str]) -> list[float]:
        return list(await asyncio.gather(*(self.judge(query, doc) for doc in documents)))

    async def judge(self, query: str, document: str) -> float:
        """The probability (or, without log probabilities, 1/0) that ``document`` answers ``query``."""
        text = self.prompt.render(question=query, document=shorten(document, query))
        resp = await self.llm.complete(
            [ChatMessage.user(text)],
            temperature=0.0,
            max_tokens=1,
            purpose="rerank",
            top_logprobs=TOP_LOGPROBS,
        )
        p = yes_probability(resp.first_token_logprobs)
        if p is None:
            p = parse_answer(resp.text or "")
        if p is None:
            with self._lock:
                self.unparsed += 1
                first = self.unparsed == 1
            if first:
                log.warning("LLM reranker: reply is neither yes nor no: %r (scored %.1f)", resp.text, UNKNOWN)
            return UNKNOWN
        return p


def _configured_llm() -> LLM:
    from graphrecall.errors import ConfigurationError, NotAvailable
    from graphrecall.llm import LLMError, llm_from_settings
    from graphrecall.llm.factory import ENV_SPEC

    if not os.environ.get(ENV_SPEC, "").strip():
        raise ConfigurationError(
            f"GRAPHRECALL_RERANKER=llm needs an LLM: set {ENV_SPEC} (e.g. openai:gpt-4o-mini; "
            "GRAPHRECALL_LLM_BASE_URL for a local server) or pass Memory(llm=...)",
            where=ENV_SPEC,
        )
    try:
        return llm_from_settings()
    except LLMError as e:  # a malformed spec, an unknown provider, no key
        raise ConfigurationError(f"the llm reranker: {e}", where=ENV_SPEC) from None
    except ImportError as e:  # the provider's SDK is an optional extra
        raise NotAvailable(f"the llm reranker: {e}") from None


def shorten(document: str, question: str) -> str:
    """``document`` within ``DOCUMENT_MAX_CHARS``: a long round keeps the user's words and the reply's sentences
    that share the question's content words (``excerpt.round_excerpt``, as the Reader's context shows it), not its
    opening characters: the answer in a long reply is often far from its start."""
    return round_excerpt(document, question_terms(question), DOCUMENT_MAX_CHARS)[0]
