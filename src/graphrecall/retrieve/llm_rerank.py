"""Reranking by a language model's graded judgement, for deployments with an LLM but no cross-encoder.

A trained cross-encoder reads the question and a round together; where none is installed, the LLM that the
Reader already uses can do the same job, pointwise: one short request per candidate ("how well does this excerpt
answer the question? 0-3"), the grade as the score. Pointwise rather than one listwise prompt because a small
model keeps a single excerpt in view reliably and a list invites position bias; the question comes first in the
prompt so a local server reuses its cached prefix across the candidates of one search.

It is slow next to a cross-encoder (a request per candidate), so its ``max_documents`` caps how many fused
candidates it reads, whatever ``RetrievalConfig.rerank_top`` says. A reply without a grade scores 0 and is
counted in ``unparsed`` (logged once): a model that cannot follow the format degrades to the fused order, never
to an error in search.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence

from graphrecall.llm.base import LLM, ChatMessage
from graphrecall.prompts import Prompt, load_prompt

log = logging.getLogger(__name__)

PROMPT = "rerank_relevance"
MAX_GRADE = 3
DEFAULT_MAX_DOCUMENTS = 8
DOCUMENT_MAX_CHARS = 2000
_GRADE = re.compile(r"[0-3]")


def parse_grade(reply: str) -> int | None:
    """The first digit 0-3 in ``reply`` (models add words or punctuation around it), or None."""
    m = _GRADE.search(reply)
    return int(m.group(0)) if m else None


class LLMReranker:
    """Scores each (question, round) pair by an LLM's grade 0-3 (see module docstring)."""

    def __init__(
        self,
        llm: LLM,
        *,
        max_documents: int = DEFAULT_MAX_DOCUMENTS,
        prompt: Prompt | None = None,
    ) -> None:
        if max_documents < 1:
            raise ValueError(f"max_documents must be at least 1, got {max_documents}")
        self.llm = llm
        self.max_documents = max_documents
        self.prompt = prompt or load_prompt(PROMPT)
        self.unparsed = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMReranker(llm={self.llm!r}, max_documents={self.max_documents})"

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        return [float(self.grade(query, doc)) for doc in documents]

    def grade(self, query: str, document: str) -> int:
        text = self.prompt.render(question=query, document=_clip(document))
        reply = self.llm.complete_sync(
            [ChatMessage.user(text)], temperature=0.0, max_tokens=4, purpose="rerank"
        ).text
        grade = parse_grade(reply or "")
        if grade is None:
            with self._lock:
                self.unparsed += 1
                first = self.unparsed == 1
            if first:
                log.warning("LLM reranker: reply without a grade 0-%d: %r (scored 0)", MAX_GRADE, reply)
            return 0
        return grade


def _clip(document: str) -> str:
    if len(document) <= DOCUMENT_MAX_CHARS:
        return document
    return document[:DOCUMENT_MAX_CHARS].rsplit(" ", 1)[0] + " …"
