"""The hybrid retriever: candidate generators, one fusion, the post-fusion stages, hits with provenance.

One search, in order (``search``):

1. the generators' store queries that need no query vector start (``retrieve.lists``: BM25), the query is
   embedded on this thread meanwhile;
2. every candidate generator of ``lists.GENERATORS`` that this question and the config want adds its lists
   (vector, bm25, bm25_tail, bm25_user, recency, fact, event, entity, in_range: ``config.ListName``);
3. one fusion of them all (``retrieve.fusion.fuse``: RRF or weighted, per ``RetrievalConfig.fusion``), each list
   at its weight for this search (``lists.weights``);
4. the post-fusion stages of ``post.POST_FUSION``: the time boost, the head's rows and the cutoff, the reranker,
   newer restatements first;
5. the best ``k`` as hits, each with the score of every list that ranked it.

Nothing recorded after the cutoff is returned (``graphrecall.dates.Cutoff``); Kuzu's rows and the write log's
unflushed tail are searched together. Independent store queries of one search run side by side
(``retrieve.stages``), and ``timings`` receives milliseconds per stage.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from typing import Any

from graphrecall.config import ListName, RetrievalConfig
from graphrecall.dates import Cutoff
from graphrecall.embed.base import Embedder, Vectors
from graphrecall.embed.profile import profile_of
from graphrecall.models import DocumentRef, Hit, Round, TimeRange
from graphrecall.retrieve import fusion
from graphrecall.retrieve.graph import GraphCandidates
from graphrecall.retrieve.intent import Cues, without_now_cue
from graphrecall.retrieve.lists import GENERATORS, weights
from graphrecall.retrieve.post import POST_FUSION
from graphrecall.retrieve.rerank import Reranker
from graphrecall.retrieve.stages import StageRunner, on_search_worker, stage
from graphrecall.retrieve.state import SearchState
from graphrecall.retrieve.timeparse import parse_time_range
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.wal import TailSnapshot

log = logging.getLogger(__name__)


class HybridRetriever:
    def __init__(
        self,
        embedder: Embedder,
        config: RetrievalConfig | None = None,
        reranker: Reranker | None = None,
        *,
        graph: bool = True,
    ) -> None:
        """``graph=False`` leaves extracted memory out of round ranking (a baseline for benchmarks)."""
        self.embedder = embedder
        self.config = config or RetrievalConfig()
        self.reranker = reranker
        self.graph = (
            GraphCandidates(
                rrf_k=self.config.rrf_k,
                query_stopwords=self.config.query_stopwords,
                oversample=self.config.graph_oversample,
                salience_weight=self.config.salience_weight,
                salience_half_life_days=self.config.salience_half_life_days,
            )
            if graph
            else None
        )

    def search(
        self,
        db: ScopeDatabase,
        query: str,
        k: int = 10,
        *,
        cutoff: Cutoff | None = None,
        time_range: TimeRange | None = None,
        as_of: datetime | None = None,
        use_index: bool = True,
        timings: dict[str, float] | None = None,
        tail: TailSnapshot | None = None,
    ) -> list[Hit]:
        """The top ``k`` rounds for ``query`` visible at ``cutoff`` (``None``: no cutoff and no anchor for
        relative time; the facade always passes one), Kuzu's and the write log's unflushed ``tail`` together
        (taken before this call: see ``store.wal``). ``timings``, when given, receives milliseconds per stage (stages
        that run on worker threads overlap, so they may add up to more than the wall time)."""
        cfg = self.config
        with StageRunner(cfg.parallel, timings) as run:
            s = SearchState(
                db=db,
                query=query,
                k=k,
                n=max(cfg.candidates, k),
                config=cfg,
                run=run,
                cues=Cues.of(query),
                cutoff=cutoff,
                as_of=as_of,
                time_range=time_range
                or parse_time_range(query, cutoff.question_date if cutoff is not None else None),
                tail=tail if tail is not None and (len(tail) or tail.shadowed) else None,
                use_index=use_index,
                graph=self.graph,
                reranker=self.reranker,
                similarity=self.similarity,
                lexical=without_now_cue(query),
            )
            return self._search(s)

    def _search(self, s: SearchState) -> list[Hit]:
        wanted = [g for g in GENERATORS if g.wanted(s)]
        for g in wanted:
            g.prefetch(s)
        # Embedded on this thread, not the search pool: the thread would only wait for it, and under load a pool
        # worker held by an embedding that waits for the model (or for a micro-batch, ``embed.batching``) is one
        # fewer for the BM25 and vector stages of every search.
        with stage(s.timings, "embed_query"):
            s.qvec = self._embed_query(s.query)[0]
        for g in wanted:
            g.launch(s)
        for g in wanted:
            g.generate(s)
        s.fused = fusion.fuse(s.ordered_lists(), weights(s), method=s.config.fusion, k=s.config.rrf_k)
        for post in POST_FUSION:
            if post.wanted(s):
                if post.timed:
                    with stage(s.timings, post.name):
                        post(s)
                else:
                    post(s)
        signals = _signals(s)
        return [
            _hit(s, signals, rid, score, rank) for rank, (rid, score) in enumerate(s.ranked[: s.k], start=1)
        ]

    def similarity(self, threshold: float) -> float:
        """A cosine threshold of the config (reference scale) on this embedder's scale (``embed.profile``); the
        profile is looked up at the first stage that needs one, not when the retriever is built."""
        return profile_of(self.embedder).translate(threshold)

    def _embed_query(self, query: str) -> Vectors:
        if on_search_worker():
            # On a search worker torch runs single-threaded (an OpenMP setting of this thread only; ingest keeps
            # its threads): one short query gains nothing from a second core that is running BM25 meanwhile.
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_num_threads(1)
        return self.embedder.embed([query], kind="query")


def _signals(s: SearchState) -> dict[str, dict[str, float]]:
    """Per list, the scores its hits show: the tail's BM25 under ``bm25`` (one BM25 signal per hit, wherever its
    round is stored)."""
    out = {name.value: s.signals[name] for name in ListName if name in s.signals}
    if ListName.bm25_tail in out:
        out[ListName.bm25] = {**out.pop(ListName.bm25_tail), **out.get(ListName.bm25, {})}
    return out


def _hit(s: SearchState, lists: dict[str, dict[str, float]], rid: str, score: float, rank: int) -> Hit:
    r: Round = s.rounds[rid]
    signals: dict[str, Any] = {name: float(vals[rid]) for name, vals in lists.items() if rid in vals}
    signals["fused"] = float(s.fused.get(rid, 0.0))
    if s.time_range is not None:
        signals["time"] = 1.0 if rid in s.in_range_ids() else 0.0
    if rid in s.rerank_scores:
        signals["rerank"] = s.rerank_scores[rid]
    return Hit(
        id=r.id,
        kind="round",
        text=r.text,
        score=float(score),
        rank=rank,
        signals=signals,
        session_id=r.session_id,
        date=r.at,
        message_ids=list(r.message_ids),
        document=DocumentRef.of_round(r.text, r.idx),
    )
