"""Search latency (query embedding included, no reranker) and where the time goes, stage by stage.

The stage breakdown replays what ``HybridRetriever.search`` does on the index path (embed the query, HNSW over user
vectors, HNSW over reply vectors, BM25, fetch the fused head's rows) as separate timed calls with the same
arguments, so a missed target can be pinned on one stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphrecall import Memory
from graphrecall.models import Scope
from graphrecall.retrieve import fusion
from graphrecall.store import rounds as q
from graphrecall.store.text import query_terms

K = 10


def summarize(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64)
    return {
        "n": float(len(a)),
        "p50_ms": float(np.percentile(a, 50)),
        "p95_ms": float(np.percentile(a, 95)),
        "mean_ms": float(a.mean()),
        "max_ms": float(a.max()),
    }


def search_latency(
    mem: Memory, scope: Scope, queries: Sequence[str], *, use_index: bool, warmup: int = 3
) -> dict[str, Any]:
    """Per-query wall time of ``retriever.search`` on an open database (pool hit), k=10."""
    times: list[float] = []
    empty = 0
    with mem.pool.acquire(scope, create=False) as db:
        for query in queries[:warmup]:
            mem.retriever.search(db, query, K, use_index=use_index)
        for query in queries:
            t0 = time.perf_counter()
            hits = mem.retriever.search(db, query, K, use_index=use_index)
            times.append((time.perf_counter() - t0) * 1000)
            empty += not hits
    out = summarize(times)
    out["empty_results"] = float(empty)
    return out


def stage_breakdown(
    mem: Memory, scope: Scope, queries: Sequence[str], *, use_index: bool = True
) -> dict[str, Any]:
    """Median/p95 per stage, timed separately with the retriever's own arguments."""
    cfg = mem.retriever.config
    n = max(cfg.candidates, K)
    head = max(3 * K, cfg.rerank_top)
    stages: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        stages.setdefault(name, []).append((time.perf_counter() - t0) * 1000)
        return out

    with mem.pool.acquire(scope, create=False) as db:
        for query in queries:
            qvec = timed("embed_query", lambda: mem.embedder.embed([query], kind="query")[0])  # noqa: B023
            if use_index:
                user = timed("hnsw_user", lambda: q.vector_search(db, "Round", "round_user_vec", qvec, n))  # noqa: B023
                reply = timed("hnsw_reply", lambda: q.vector_search(db, "Round", "round_reply_vec", qvec, n))  # noqa: B023
            else:
                user = timed("scan_user", lambda: q.exact_vector_search(db, "embedding", qvec, n))  # noqa: B023
                reply = timed("scan_reply", lambda: q.exact_vector_search(db, "reply_embedding", qvec, n))  # noqa: B023
            terms = query_terms(query)
            bm25 = timed("fts", lambda: q.fts_search(db, "Round", "round_fts", terms, n))  # noqa: B023
            vec: dict[str, float] = {}
            for rid, s in [*user, *[(r, s - cfg.reply_penalty) for r, s in reply]]:
                vec[rid] = max(vec.get(rid, -1.0), s)
            ranked = fusion.order(
                fusion.rrf({"vector": fusion.order(vec)[:n], "bm25": bm25}, cfg.weights, cfg.rrf_k)
            )
            timed("fetch_rows", lambda: q.fetch_rounds(db, [rid for rid, _ in ranked[:head]]))  # noqa: B023
            stages.setdefault("store_only", []).append(
                sum(ms[-1] for name, ms in stages.items() if name not in ("embed_query", "store_only"))
            )
    return {name: summarize(ms) for name, ms in stages.items()}


def hnsw_recall(mem: Memory, scope: Scope, queries: Sequence[str]) -> dict[str, float]:
    """Share of the exact top-n (user vectors) that the HNSW index also returns: what the index trades for speed."""
    n = max(mem.retriever.config.candidates, K)
    at_n: list[float] = []
    at_k: list[float] = []
    with mem.pool.acquire(scope, create=False) as db:
        for query in queries:
            qvec = mem.embedder.embed([query], kind="query")[0]
            approx = [rid for rid, _ in q.vector_search(db, "Round", "round_user_vec", qvec, n)]
            exact = [rid for rid, _ in q.exact_vector_search(db, "embedding", qvec, n)]
            at_n.append(len(set(approx) & set(exact)) / max(1, len(exact)))
            at_k.append(len(set(approx[:K]) & set(exact[:K])) / max(1, len(exact[:K])))
    return {
        f"recall_at_{n}": float(np.mean(at_n)),
        f"recall_at_{K}": float(np.mean(at_k)),
        "queries": float(len(queries)),
    }
