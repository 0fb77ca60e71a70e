"""Evidence gathering for the Reader: one search per query (the question and its sub-questions), fused by RRF,
with the time range from the question or from an event anchor, rendered as a dated context.

Synthesis wants the user's own words first (what they like, own, plan), so round texts are rewritten to put the
user's turn first and shorten the assistant's reply, which is mostly generic advice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphrecall.models import Context, Hit, HitKind, TimeRange
from graphrecall.read.access import MemoryAccess
from graphrecall.read.analysis import QuestionAnalysis
from graphrecall.retrieve import fusion
from graphrecall.retrieve.context import build_context

REPLY_CHARS = 240
# Fusing the hit lists of the question and its sub-questions: each list is already a fused, reranked result, so
# the textbook damping (60) that lets several lists agree is used, not the retriever's tuned ``rrf_k`` (which
# fuses raw generator lists of one query).
SUBQUERY_RRF_K = 60


@dataclass
class Gathered:
    hits: list[Hit]
    context: Context
    time_range: TimeRange | None
    queries: list[str]


def kinds_for(access: MemoryAccess) -> tuple[HitKind, ...]:
    return ("round", "fact", "event") if access.has_extracted else ("round",)


def fuse(lists: Sequence[list[Hit]], k: int, rrf_k: int = SUBQUERY_RRF_K) -> list[Hit]:
    """Reciprocal rank fusion of hit lists (``retrieve.fusion.fuse``, with ``rrf_k``); a single list is returned as is
    (cut to ``k``)."""
    if len(lists) == 1:
        return list(lists[0][:k])
    by_id: dict[str, Hit] = {}
    ranked: dict[str, list[tuple[str, float]]] = {}
    for i, hits in enumerate(lists):
        ranked[str(i)] = [(h.id, h.score) for h in hits]
        for h in hits:
            by_id.setdefault(h.id, h)
    ordered = fusion.order(fusion.fuse(ranked, method="rrf", k=rrf_k))[:k]
    return [by_id[i].model_copy(update={"score": s, "rank": r}) for r, (i, s) in enumerate(ordered, start=1)]


def user_first(h: Hit) -> Hit:
    """A round's text with the user's lines first and the assistant's reply shortened."""
    if h.kind != "round":
        return h
    user: list[str] = []
    other: list[str] = []
    for block in h.text.split("\n"):
        (user if block.startswith("user:") else other).append(block)
    if not user:
        return h
    reply = " ".join(" ".join(other).split())
    if len(reply) > REPLY_CHARS:
        reply = reply[: REPLY_CHARS - 1] + "…"
    text = "\n".join(user) + (f"\n({reply})" if reply else "")
    return h.model_copy(update={"text": text})


def gather(
    access: MemoryAccess,
    analysis: QuestionAnalysis,
    *,
    k: int,
    token_budget: int,
    synthesis: bool = False,
) -> Gathered:
    """Search every query, fuse, and render the context within ``token_budget``."""
    kinds = kinds_for(access)
    time_range = analysis.time_range
    queries = list(analysis.queries)
    if analysis.anchor is not None:
        anchor_hits = access.search(analysis.anchor.anchor, 3)
        queries.append(analysis.anchor.anchor)
        if anchor_hits and anchor_hits[0].date is not None:
            time_range = analysis.anchor.resolve(anchor_hits[0].date)
    lists = [access.search(q, k, kinds=kinds, time_range=time_range) for q in queries]
    hits = fuse([h for h in lists if h] or [[]], k)
    if synthesis:
        hits = [user_first(h) for h in hits]
    context = build_context(analysis.question, hits, token_budget, question_date=analysis.question_date)
    return Gathered(hits=hits, context=context, time_range=time_range, queries=queries)


def widen(
    access: MemoryAccess, gathered: Gathered, query: str, *, k: int, token_budget: int, question: str
) -> Gathered:
    """One extra, targeted search (the verifier's "missing" text); its new hits are placed right after the best
    half of the first ones so that the context keeps the strongest evidence and gains the new."""
    extra = [
        h
        for h in access.search(query, k, kinds=kinds_for(access))
        if h.id not in {x.id for x in gathered.hits}
    ]
    half = max(1, len(gathered.hits) // 2)
    hits = [*gathered.hits[:half], *extra, *gathered.hits[half:]]
    context = build_context(question, hits, token_budget, question_date=access.question_date)
    return Gathered(
        hits=hits, context=context, time_range=gathered.time_range, queries=[*gathered.queries, query]
    )
