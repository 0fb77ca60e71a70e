"""The hybrid retriever: candidate generators, fusion, an optional cross-encoder, hits with provenance.

Generators over raw history: HNSW over user-turn vectors and over reply vectors (a round scores the better of the
two; replies hold what the assistant said, which "what did you recommend" questions ask for), and BM25 over the
round text, then BM25 over the user side of that candidate pool (``retrieve.lexical``: what the user said in their
own words, where a long reply on the same topic cannot crowd it out). A time range parsed from the question
(relative to the cutoff's question date) boosts rounds inside it and adds a list of them ranked by similarity
among themselves, and nothing recorded after the cutoff is returned (``graphrecall.dates.Cutoff``). Candidates
from extracted memory (facts, events, entity expansion) come from ``retrieve.graph.GraphCandidates``.
Independent store queries of one search run side by side (``retrieve.stages``).
"""

from __future__ import annotations

import logging
import sys
from concurrent.futures import Future
from datetime import datetime
from typing import Any

import numpy as np

from graphrecall.config import RetrievalConfig
from graphrecall.dates import Cutoff
from graphrecall.embed.base import Embedder, Vectors
from graphrecall.models import Hit, Round, TimeRange
from graphrecall.retrieve import fusion
from graphrecall.retrieve.fusion import Ranked
from graphrecall.retrieve.graph import GraphCandidates
from graphrecall.retrieve.intent import asks_about_assistant, asks_about_now, asks_about_someone_else
from graphrecall.retrieve.lexical import pool_bm25
from graphrecall.retrieve.rerank import Reranker
from graphrecall.retrieve.stages import StageRunner, on_search_worker, stage
from graphrecall.retrieve.timeparse import parse_time_range
from graphrecall.retrieve.updates import newer_first
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.wal import TailSnapshot
from graphrecall.store.wal.tail import Side
from graphrecall.text import query_terms

log = logging.getLogger(__name__)

# Lists that a small scope weighs less (``RetrievalConfig.small_store_rounds``): the lexical ones (BM25's IDF over a
# handful of sessions makes any shared word look rare) and the extracted-memory ones (over a handful of facts they
# rank every fact, so any round with a fact gains a bonus whether it matches or not, and a round that matches the
# question exactly but has no facts yet, such as the newest turn, loses to it).
SMALL_SCOPE_LISTS = (*fusion.LEXICAL_LISTS, "fact", "event", "entity")


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
        n = max(cfg.candidates, k)
        with StageRunner(cfg.parallel, timings) as run:
            return self._search(
                db,
                query,
                k,
                n,
                run,
                cutoff=cutoff,
                time_range=time_range,
                as_of=as_of,
                use_index=use_index,
                tail=tail if tail is not None and (len(tail) or tail.shadowed) else None,
            )

    def _search(
        self,
        db: ScopeDatabase,
        query: str,
        k: int,
        n: int,
        run: StageRunner,
        *,
        cutoff: Cutoff | None,
        time_range: TimeRange | None,
        as_of: datetime | None,
        use_index: bool,
        tail: TailSnapshot | None,
    ) -> list[Hit]:
        cfg = self.config
        timings = run.timings
        weights, reply_penalty = cfg.weights, cfg.reply_penalty
        if asks_about_assistant(
            query
        ):  # the evidence is in a reply: user-side signals point at the wrong half
            weights, reply_penalty = {**weights, "bm25_user": 0.0}, 0.0
        elif cfg.user_side == "unless_about_others" and asks_about_someone_else(query):
            # About someone else: nothing says which half of a round holds the evidence, so neither half is
            # preferred (no user-side list, no penalty on the reply's similarity).
            weights, reply_penalty = {**weights, "bm25_user": 0.0}, 0.0
        # A muted list is not computed (fusion would ignore it). BM25 needs no embedding: it runs while the query
        # is embedded (Kuzu releases the GIL, torch too).
        terms = query_terms(query, drop_query_stopwords=cfg.query_stopwords)
        bm25_job = (
            run.submit("bm25", q.lexical_search, db, "round_terms", terms, n)
            if weights.get("bm25", 1.0)
            else None
        )
        # Embedded on this thread, not the search pool: the thread would only wait for it, and under load a pool
        # worker held by an embedding that waits for the model (or for a micro-batch, ``embed.batching``) is one
        # fewer for the BM25 and vector stages of every search.
        with stage(timings, "embed_query"):
            qvec = self._embed_query(query)[0]
        vec = (
            self._vector_scores(db, qvec, n, use_index, reply_penalty, run)
            if weights.get("vector", 1.0)
            else {}
        )
        lists: dict[str, Ranked] = {
            "vector": fusion.order(vec)[:n],
            "bm25": bm25_job.result() if bm25_job is not None else [],
        }
        pool: dict[str, Round] = {}  # rounds read while generating candidates, reused for the hits
        if tail is not None:
            vec = self._merge_tail(tail, qvec, query, n, vec, lists, weights, reply_penalty)
            pool.update(tail.get(list(vec) + [rid for rid, _ in lists["bm25_tail"]]))
        # A vector list shorter than n holds every round of the scope (Kuzu's and the tail's): a scope that small
        # gets less lexical weight.
        if cfg.small_store_rounds and vec and len(vec) < n:
            weights = fusion.scale_for_store_size(
                weights, len(vec), cfg.small_store_rounds, SMALL_SCOPE_LISTS
            )
        if tail is not None:
            weights = {**weights, "bm25_tail": weights.get("bm25", 1.0)}  # the tail's BM25 weighs like Kuzu's
        if weights.get("bm25_user", 0.0):
            lists["bm25_user"] = self._user_side_list(db, query, lists, weights, pool, run)
        if cfg.recency_weight and asks_about_now(query):
            lists["recency"] = self._recency_list(db, lists, weights, pool, run)
            weights = {**weights, "recency": cfg.recency_weight}
        if self.graph is not None:
            with stage(timings, "graph"):
                lists.update(self.graph(db, query, qvec, n, cutoff=cutoff, as_of=as_of))
        tr = time_range or parse_time_range(query, cutoff.question_date if cutoff is not None else None)
        in_range: set[str] = set()
        if tr is not None and (cfg.time_boost > 0 or cfg.in_range_weight > 0):
            with stage(timings, "time_range"):
                until = cutoff.until if cutoff is not None else None
                in_range = set(q.rounds_between(db, tr.start, tr.end, limit=5 * n, until=until))
            if tail is not None:
                in_range -= tail.shadowed
                in_range |= {
                    r.id
                    for r in tail.rounds()
                    if tr.start <= r.at <= tr.end and (cutoff is None or cutoff.admits(r.at))
                }
            if cfg.in_range_weight > 0 and in_range:
                with stage(timings, "in_range"):
                    lists["in_range"] = self._in_range_list(db, tail, sorted(in_range), qvec, reply_penalty)
                    if tail is not None:  # Kuzu has no row for a round only the tail holds
                        pool.update(tail.get([rid for rid, _ in lists["in_range"]]))
                weights = {**weights, "in_range": cfg.in_range_weight}
        fused = (
            fusion.rrf(lists, weights, cfg.rrf_k) if cfg.fusion == "rrf" else fusion.weighted(lists, weights)
        )
        if in_range and cfg.time_boost > 0:
            unit = _rank1_unit(cfg)
            for rid in in_range:
                if rid in fused:
                    fused[rid] += cfg.time_boost * unit
        ranked = fusion.order(fused)
        wanted = [rid for rid, _ in ranked[: max(3 * k, cfg.rerank_top)]]
        rounds = {rid: pool[rid] for rid in wanted if rid in pool}
        rounds.update(run.fetch_rounds(db, [rid for rid in wanted if rid not in pool]))
        ranked = [
            (rid, s)
            for rid, s in ranked
            if rid in rounds and (cutoff is None or cutoff.admits(rounds[rid].at))
        ]
        rerank_scores: dict[str, float] = {}
        if self.reranker is not None and ranked:
            with stage(timings, "rerank"):
                ranked, rerank_scores = self._rerank(query, ranked, rounds)
        if cfg.newer_restatements == "always" or (cfg.newer_restatements == "now" and asks_about_now(query)):
            with stage(timings, "restatements"):
                ranked = self._newer_first(db, tail, ranked, rounds)
        signals: dict[str, dict[str, float]] = {name: dict(lst) for name, lst in lists.items()}
        signals["vector"] = vec
        if "bm25_tail" in signals:  # one BM25 signal per hit, wherever its round is stored
            signals["bm25"] = {**signals.pop("bm25_tail"), **signals["bm25"]}
        hits = []
        for rank, (rid, score) in enumerate(ranked[:k], start=1):
            r = rounds[rid]
            sig = {name: float(vals[rid]) for name, vals in signals.items() if rid in vals}
            sig["fused"] = float(fused.get(rid, 0.0))
            if tr is not None:
                sig["time"] = 1.0 if rid in in_range else 0.0
            if rid in rerank_scores:
                sig["rerank"] = rerank_scores[rid]
            hits.append(_hit(r, score, rank, sig))
        return hits

    def _merge_tail(
        self,
        tail: TailSnapshot,
        qvec: Vectors,
        query: str,
        n: int,
        vec: dict[str, float],
        lists: dict[str, Ranked],
        weights: dict[str, float],
        reply_penalty: float,
    ) -> dict[str, float]:
        """Kuzu's lists without the rows the tail rewrote or deleted, plus the tail's own candidates: its cosine
        scores are Kuzu's measure, so they join the vector list by score; its BM25 has the tail's own statistics,
        so it is a list of its own (``bm25_tail``), which the caller weighs like ``bm25``. Returns the merged
        vector scores."""
        shadowed = tail.shadowed
        merged = {rid: s for rid, s in vec.items() if rid not in shadowed}
        if weights.get("vector", 1.0):
            for rid, s in tail.vector_search(
                qvec,
                n,
                "user",
                passages=self.config.passage_vectors,
                passage_penalty=self.config.passage_penalty,
            ):
                merged[rid] = max(merged.get(rid, -1.0), s)
            if self.config.use_reply_vectors:
                for rid, s in tail.vector_search(qvec, n, "reply"):
                    merged[rid] = max(merged.get(rid, -1.0), s - reply_penalty)
        lists["vector"] = fusion.order(merged)[:n]
        lists["bm25"] = [(rid, s) for rid, s in lists["bm25"] if rid not in shadowed]
        bm25_weight = weights.get("bm25", 1.0)
        lists["bm25_tail"] = (
            tail.bm25_search(query, n, drop_query_stopwords=self.config.query_stopwords)
            if bm25_weight
            else []
        )
        return merged

    def _embed_query(self, query: str) -> Vectors:
        if on_search_worker():
            # On a search worker torch runs single-threaded (an OpenMP setting of this thread only; ingest keeps
            # its threads): one short query gains nothing from a second core that is running BM25 meanwhile.
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_num_threads(1)
        return self.embedder.embed([query], kind="query")

    def _vector_scores(
        self,
        db: ScopeDatabase,
        qvec: Vectors,
        n: int,
        use_index: bool,
        reply_penalty: float,
        run: StageRunner,
    ) -> dict[str, float]:
        """Round id -> the best of its user-vector similarity, its passages' (a long user turn: ``passage_vectors``)
        and its reply-vector similarity minus a penalty."""
        reply_job: Future[list[tuple[str, float]]] | None = None
        passage_job: Future[list[tuple[str, float]]] | None = None
        passages = self.config.passage_vectors and db.indexes.count("round_passage") > 0
        if use_index:
            if self.config.use_reply_vectors:
                reply_job = run.submit("vec_reply", q.vector_search, db, "round_reply", qvec, n)
            if passages:
                passage_job = run.submit("vec_passage", q.vector_search, db, "round_passage", qvec, n)
            with stage(run.timings, "vec_user"):
                user = q.vector_search(db, "round_user", qvec, n)
        else:
            if self.config.use_reply_vectors:
                reply_job = run.submit("scan_reply", q.exact_vector_search, db, "reply_embedding", qvec, n)
            if passages:
                passage_job = run.submit(
                    "scan_passage", q.exact_vector_search, db, "embedding", qvec, n, "Passage"
                )
            with stage(run.timings, "scan_user"):
                user = q.exact_vector_search(db, "embedding", qvec, n)
        reply = reply_job.result() if reply_job is not None else []
        vec: dict[str, float] = {}
        for rid, s in user:
            vec[rid] = max(vec.get(rid, -1.0), s)
        if passage_job is not None:
            for rid, s in q.passage_scores(passage_job.result()).items():
                vec[rid] = max(vec.get(rid, -1.0), s - self.config.passage_penalty)
        for rid, s in reply:
            vec[rid] = max(vec.get(rid, -1.0), s - reply_penalty)
        return vec

    def _in_range_list(
        self,
        db: ScopeDatabase,
        tail: TailSnapshot | None,
        ids: list[str],
        qvec: Vectors,
        reply_penalty: float,
    ) -> Ranked:
        """The rounds inside the question's time range ranked by similarity alone (the better of the user side and
        the reply less ``reply_penalty``, as the vector list scores them): a question anchored in time ("the
        milestone I mentioned four weeks ago") has few candidates, and the best match among them may rank far
        down the whole scope's vector list, where the time boost cannot reach it."""
        qv = np.asarray(qvec, dtype=np.float32).reshape(-1)
        qv = qv / (float(np.linalg.norm(qv)) or 1.0)
        scores: dict[str, float] = {}
        sides: tuple[Side, ...] = ("user", "reply") if self.config.use_reply_vectors else ("user",)
        for side in sides:
            vectors = _stored_vectors(db, tail, ids, side)
            penalty = reply_penalty if side == "reply" else 0.0
            for rid, v in vectors.items():
                v = np.asarray(v, dtype=np.float32).reshape(-1)
                s = float(v @ qv) / (float(np.linalg.norm(v)) or 1.0) - penalty
                scores[rid] = max(scores.get(rid, -2.0), s)
        return fusion.order(scores)

    def _user_side_list(
        self,
        db: ScopeDatabase,
        query: str,
        lists: dict[str, Ranked],
        weights: dict[str, float],
        pool: dict[str, Round],
        run: StageRunner,
    ) -> Ranked:
        """BM25 over the user side of the best ``user_pool`` candidates so far (``retrieve.lexical``)."""
        ids = self._head(db, lists, weights, pool, run, self.config.user_pool)
        with stage(run.timings, "bm25_user"):
            return pool_bm25(
                query,
                {rid: pool[rid].user_text for rid in ids if rid in pool},
                drop_query_stopwords=self.config.query_stopwords,
            )

    def _head(
        self,
        db: ScopeDatabase,
        lists: dict[str, Ranked],
        weights: dict[str, float],
        pool: dict[str, Round],
        run: StageRunner,
        size: int,
    ) -> list[str]:
        """The ids of the best ``size`` candidates by a first fusion of the lists so far, their rounds in ``pool``."""
        ids = [rid for rid, _ in fusion.order(fusion.rrf(lists, weights, self.config.rrf_k))[:size]]
        pool.update(run.fetch_rounds(db, [rid for rid in ids if rid not in pool]))
        return ids

    def _recency_list(
        self,
        db: ScopeDatabase,
        lists: dict[str, Ranked],
        weights: dict[str, float],
        pool: dict[str, Round],
        run: StageRunner,
    ) -> Ranked:
        """The best ``recency_pool`` candidates so far, newest first: only rounds already relevant compete on date."""
        ids = self._head(db, lists, weights, pool, run, self.config.recency_pool)
        dated = sorted((rid for rid in ids if rid in pool), key=lambda rid: (pool[rid].at, rid), reverse=True)
        return [(rid, float(len(dated) - i)) for i, rid in enumerate(dated)]

    def _newer_first(
        self, db: ScopeDatabase, tail: TailSnapshot | None, ranked: Ranked, rounds: dict[str, Round]
    ) -> Ranked:
        top = self.config.restatement_top
        ids = [rid for rid, _ in ranked[:top]]
        return newer_first(
            ranked,
            {rid: rounds[rid].at for rid in ids},
            _stored_vectors(db, tail, ids, "user"),
            top=top,
            min_similarity=self.config.restatement_similarity,
        )

    def _rerank(
        self, query: str, ranked: Ranked, rounds: dict[str, Round]
    ) -> tuple[Ranked, dict[str, float]]:
        assert self.reranker is not None
        cfg = self.config
        top = min(cfg.rerank_top, getattr(self.reranker, "max_documents", cfg.rerank_top))
        head, tail = ranked[:top], ranked[top:]
        scores = self.reranker.score(query, [rounds[rid].text for rid, _ in head])
        z = np.asarray(scores, dtype=np.float64)
        if getattr(self.reranker, "probabilities", False):
            # Probabilities (the LLM reranker's P(yes)) are added to the fused score in rank-1 units, like the
            # time boost: a small margin moves little, a confident one moves a round up; ranks would turn the
            # noise between 0.30 and 0.31 into a full step.
            unit = _rank1_unit(cfg)
            p = np.clip(z, 0.0, 1.0)
            blended = {
                rid: float(fused) + cfg.rerank_weight * unit * float(p[i])
                for i, (rid, fused) in enumerate(head)
            }
        else:
            # Blend in rank space so that a weak cross-encoder cannot throw away what fusion found; equal
            # scores keep the fused order between them.
            rerank_rank = {head[i][0]: r for r, i in enumerate(np.argsort(-z, kind="stable"), start=1)}
            blended = {
                rid: 1.0 / (cfg.rrf_k + pos) + cfg.rerank_weight / (cfg.rrf_k + rerank_rank[rid])
                for pos, (rid, _) in enumerate(head, start=1)
            }
        new_head = fusion.order(blended)
        return new_head + tail, {head[i][0]: float(scores[i]) for i in range(len(head))}


def _rank1_unit(cfg: RetrievalConfig) -> float:
    """What first place in one list is worth in the fused score (RRF: 1 / (k + 1); weighted fusion: 1): the unit of
    the boosts added after fusion (the time boost, a reranker's probabilities)."""
    return 1.0 / (cfg.rrf_k + 1) if cfg.fusion == "rrf" else 1.0


def _stored_vectors(
    db: ScopeDatabase, tail: TailSnapshot | None, ids: list[str], side: Side
) -> dict[str, Vectors]:
    """The stored user-side (or reply-side) vectors of these rounds, by id: the write log's tail's version where it
    holds one, else Kuzu's (from the derived index)."""
    vectors = tail.vectors(ids, side) if tail is not None else {}
    vectors.update(q.round_vectors(db, [rid for rid in ids if rid not in vectors], side))
    return vectors


def _hit(r: Round, score: float, rank: int, signals: dict[str, Any]) -> Hit:
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
    )
