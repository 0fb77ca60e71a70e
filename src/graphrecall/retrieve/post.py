"""What happens to the fused candidates, in order (``POST_FUSION``): the time boost, feedback (off by default), the
rows of the head (and the cutoff), the reranker, newer restatements first.

Each stage says when it runs; ``HybridRetriever.search`` runs them in this order and times the ones named
``timed``. The time boost and a probability reranker add to fused scores in one unit, what first place in one list
is worth (``rank1_unit``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from graphrecall.config import RetrievalConfig
from graphrecall.retrieve import fusion
from graphrecall.retrieve.state import SearchState
from graphrecall.retrieve.updates import above_background, newer_first
from graphrecall.store.feedback import round_feedback


def rank1_unit(cfg: RetrievalConfig) -> float:
    """What first place in one list is worth in the fused score (RRF: 1 / (k + 1); weighted fusion: 1): the unit of
    the boosts added after fusion (the time boost, a reranker's probabilities)."""
    return 1.0 / (cfg.rrf_k + 1) if cfg.fusion == "rrf" else 1.0


class Stage:
    """A post-fusion stage: ``wanted`` says whether this search runs it, ``__call__`` changes the state's
    ``fused`` scores or ``ranked`` order. ``timed``: reported under ``name`` in the search's timings."""

    name: ClassVar[str]
    timed: ClassVar[bool] = False

    def wanted(self, s: SearchState) -> bool:
        return True

    def __call__(self, s: SearchState) -> None:
        raise NotImplementedError


class TimeBoost(Stage):
    """Fused candidates inside the question's time range gain ``time_boost`` rank-1 units (their ``fused`` signal
    includes it)."""

    name = "time_boost"

    def wanted(self, s: SearchState) -> bool:
        return s.config.time_boost > 0 and bool(s.in_range_ids())

    def __call__(self, s: SearchState) -> None:
        boost = s.config.time_boost * rank1_unit(s.config)
        for rid in s.in_range_ids():
            if rid in s.fused:
                s.fused[rid] += boost


class FeedbackBoost(Stage):
    """Fused candidates that feedback marked useful gain ``feedback_weight`` rank-1 units, those marked wrong lose
    as many (the net count's sign: one click is as good as ten, so a round cannot be voted to the top of every
    search). Reads the scope's rounds that have feedback (``store.feedback``) only when the weight is on."""

    name = "feedback"

    def wanted(self, s: SearchState) -> bool:
        return s.config.feedback_weight > 0

    def __call__(self, s: SearchState) -> None:
        unit = s.config.feedback_weight * rank1_unit(s.config)
        for rid, net in round_feedback(s.db).items():
            if rid in s.fused:
                s.fused[rid] += unit if net > 0 else -unit


class Head(Stage):
    """The fused order, cut to the head that later stages and the hits can use (``max(3 k, rerank_top)``), whose
    rounds are read (from the pool, else the store); a round dated after the cutoff, or without a row, is left
    out."""

    name = "head"

    def __call__(self, s: SearchState) -> None:
        ranked = fusion.order(s.fused)
        wanted = [rid for rid, _ in ranked[: max(3 * s.k, s.config.rerank_top)]]
        s.rounds = {rid: s.pool[rid] for rid in wanted if rid in s.pool}
        s.rounds.update(s.run.fetch_rounds(s.db, [rid for rid in wanted if rid not in s.pool]))
        cutoff = s.cutoff
        s.ranked = [
            (rid, score)
            for rid, score in ranked
            if rid in s.rounds and (cutoff is None or cutoff.admits(s.rounds[rid].at))
        ]


class Rerank(Stage):
    """The reranker (``retrieve.rerank``, ``retrieve.llm_rerank``) re-scores the best ``rerank_top`` rounds (or its
    own ``max_documents``). Probabilities (the LLM reranker's P(yes)) are added to the fused score in rank-1
    units, like the time boost: a small margin moves little, a confident one moves a round up; ranks would turn
    the noise between 0.30 and 0.31 into a full step. Other scores are blended in rank space, so that a weak
    cross-encoder cannot throw away what fusion found; equal scores keep the fused order between them."""

    name = "rerank"
    timed = True

    def wanted(self, s: SearchState) -> bool:
        return s.reranker is not None and bool(s.ranked)

    def __call__(self, s: SearchState) -> None:
        reranker, cfg = s.reranker, s.config
        assert reranker is not None
        top = min(cfg.rerank_top, getattr(reranker, "max_documents", cfg.rerank_top))
        head, rest = s.ranked[:top], s.ranked[top:]
        scores = reranker.score(s.query, [s.rounds[rid].text for rid, _ in head])
        z = np.asarray(scores, dtype=np.float64)
        if getattr(reranker, "probabilities", False):
            unit = rank1_unit(cfg)
            p = np.clip(z, 0.0, 1.0)
            blended = {
                rid: float(fused) + cfg.rerank_weight * unit * float(p[i])
                for i, (rid, fused) in enumerate(head)
            }
        else:
            rerank_rank = {head[i][0]: r for r, i in enumerate(np.argsort(-z, kind="stable"), start=1)}
            blended = {
                rid: 1.0 / (cfg.rrf_k + pos) + cfg.rerank_weight / (cfg.rrf_k + rerank_rank[rid])
                for pos, (rid, _) in enumerate(head, start=1)
            }
        s.ranked = fusion.order(blended) + rest
        s.rerank_scores = {head[i][0]: float(scores[i]) for i in range(len(head))}


class NewerRestatements(Stage):
    """Within the best ``restatement_top`` hits, a round goes above an older one whose user side it restates
    (``retrieve.updates``). For every question with ``newer_restatements="always"``; with ``"now"`` (default) only
    for a question about how things are now (``Cues.about_now``)."""

    name = "restatements"
    timed = True

    def wanted(self, s: SearchState) -> bool:
        mode = s.config.newer_restatements
        return mode == "always" or (mode == "now" and s.cues.about_now)

    def __call__(self, s: SearchState) -> None:
        cfg = s.config
        top = cfg.restatement_top
        ids = [rid for rid, _ in s.ranked[:top]]
        min_similarity = s.similarity(cfg.restatement_similarity)
        if cfg.restatement_contrast > 0:
            around = [rid for rid, _ in s.ranked[: max(cfg.rerank_top, top)]]
            vectors = s.stored_vectors(around, "user")
            min_similarity = max(min_similarity, above_background(vectors, cfg.restatement_contrast))
        else:
            vectors = s.stored_vectors(ids, "user")
        s.ranked = newer_first(
            s.ranked,
            {rid: s.rounds[rid].at for rid in ids},
            vectors,
            top=top,
            min_similarity=min_similarity,
        )


POST_FUSION: tuple[Stage, ...] = (TimeBoost(), FeedbackBoost(), Head(), Rerank(), NewerRestatements())
"""The stages after fusion, in the order they run."""
