"""Ranking hand-written chat histories by gold session, graphrecall beside plain BM25 and dense-only: shared by the
small-store benchmark (``benchmarks/smallstore``) and the multilingual one (``benchmarks/multilingual``), so both
compare the same systems over the same stored rounds and score them the same way.

- ``graphrecall``: ``Memory.search`` with the library defaults;
- ``bm25``: the plain Okapi baseline of the LongMemEval harness (``benchmarks/longmemeval/bm25.py``) over the same
  round texts (no stopwords, no stemming; a Chinese sentence without spaces is one token to it);
- ``dense``: the library's retriever with only the vector list weighted (``DENSE_ONLY``), over the same embedder;
- any other ``HybridRetriever`` a benchmark adds (config variants, an LLM reranker), searched over the same scope.

A session ranks where its best round ranks; R@1, R@3 and MRR are by gold session.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from benchmarks.longmemeval import metrics
from benchmarks.longmemeval.bm25 import BM25
from graphrecall import Memory, testing
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.models import Scope
from graphrecall.retrieve.retriever import HybridRetriever

SEARCH_K = 50  # more than any hand-written history has rounds: every round is ranked
BASE_SYSTEMS = ("graphrecall", "bm25", "dense")
DENSE_ONLY = {"vector": 1.0, "bm25": 0.0, "bm25_user": 0.0, "fact": 0.0, "event": 0.0, "entity": 0.0}
METRICS = ("r@1", "r@3", "mrr")


def score(ranked_sessions: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """R@1, R@3 (any gold session in the top k) and reciprocal rank of the first gold session."""
    first = metrics.first_rank(ranked_sessions, gold)
    return {
        "r@1": metrics.recall_any(ranked_sessions, gold, 1),
        "r@3": metrics.recall_any(ranked_sessions, gold, 3),
        "mrr": 0.0 if first is None else 1.0 / first,
    }


def dense_retriever(mem: Memory, settings: Settings) -> HybridRetriever:
    """The library's retriever with only the vector list weighted: the embedder alone, through the same code (the
    other-language list, a second vote from the same vectors, off: the baseline it is measured against)."""
    overrides = {"weights": DENSE_ONLY, "other_language_weight": 0.0}
    config = RetrievalConfig.model_validate(settings.retrieval.model_dump() | overrides)
    return HybridRetriever(mem.embedder, config)


class History(Protocol):
    """What a history of the small-store and multilingual sets offers (their ``data.History``)."""

    @property
    def question_date(self) -> datetime: ...

    @property
    def questions(self) -> Sequence[Any]: ...

    def session_inputs(self) -> list[dict[str, Any]]: ...

    def rounds(self) -> Sequence[tuple[str, str, str]]: ...


def rank_questions(
    mem: Memory, scope: Scope, h: History, retrievers: Sequence[tuple[str, HybridRetriever]]
) -> list[dict[str, list[str]]]:
    """``rank_history`` over one history's sessions, rounds and questions."""
    questions = [q.question for q in h.questions]
    return rank_history(mem, scope, h.session_inputs(), h.rounds(), questions, h.question_date, retrievers)


def rank_history(
    mem: Memory,
    scope: Scope,
    sessions: list[dict[str, Any]],
    rounds: Sequence[tuple[str, str, str]],
    questions: Sequence[str],
    question_date: datetime,
    retrievers: Sequence[tuple[str, HybridRetriever]],
) -> list[dict[str, list[str]]]:
    """Ingest ``sessions`` into a fresh ``scope``, ask every question with every system, erase the scope.

    ``rounds`` is (round id, session id, text) as ``Memory`` builds them (the histories' ``rounds()``); BM25 ranks
    those texts. Returns, per question, each system's sessions best first. A round id the benchmark cannot label
    is an error, not a miss.
    """
    mem.forget(scope)
    mem.add_sessions(scope, sessions)
    session_of = {rid: sid for rid, sid, _ in rounds}
    bm = BM25([text for _, _, text in rounds])
    out = []
    try:
        for question in questions:
            ranked: dict[str, list[str]] = {}
            hits = mem.search(scope, question, k=SEARCH_K, question_date=question_date)
            ranked["graphrecall"] = [x.id for x in hits]
            ranked["bm25"] = [rounds[i][0] for i in bm.rank(question, SEARCH_K)]
            cutoff = mem.recall(scope, question_date).cutoff
            mem.flush()  # the side-by-side retrievers read Kuzu only
            with testing.database(mem, scope) as db:
                for name, retriever in retrievers:
                    found = retriever.search(db, question, SEARCH_K, cutoff=cutoff)
                    ranked[name] = [x.id for x in found]
            unknown = [rid for lst in ranked.values() for rid in lst if rid not in session_of]
            if unknown:
                raise RuntimeError(
                    f"{question!r}: search returned rounds the benchmark cannot label: {unknown[:3]}"
                )
            out.append({name: metrics.sessions_from_rounds(lst, session_of) for name, lst in ranked.items()})
    finally:
        mem.forget(scope)
    return out


def means(rows: Sequence[dict[str, Any]], system: str) -> dict[str, float]:
    """Mean R@1, R@3 and MRR of ``system`` over ``rows`` (each with ``scores[system]``), and how many rows."""
    n = len(rows)
    return {k: (sum(r["scores"][system][k] for r in rows) / n if n else float("nan")) for k in METRICS} | {
        "n": n
    }
