"""Search latency (query embedding included, no reranker) and where the time goes, stage by stage.

The stage breakdown comes from ``HybridRetriever.search`` itself (its ``timings`` argument), so it times the very
path that the latency figures time, and a missed target can be pinned on one stage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.percentile import percentiles
from graphrecall import Memory, testing
from graphrecall.models import Scope
from graphrecall.store import rounds as q

K = 10


def summarize(ms: Sequence[float]) -> dict[str, float]:
    p50, p95 = percentiles(ms, [50, 95])
    return {
        "n": float(len(ms)),
        "p50_ms": p50,
        "p95_ms": p95,
        "mean_ms": sum(ms) / len(ms),
        "max_ms": max(ms),
    }


def search_latency(
    mem: Memory, scope: Scope, queries: Sequence[str], *, use_index: bool, warmup: int = 3
) -> dict[str, Any]:
    """Per-query wall time of ``retriever.search`` on an open database (pool hit), k=10."""
    times: list[float] = []
    empty = 0
    with testing.database(mem, scope, create=False) as db:
        for query in queries[:warmup]:
            testing.retriever(mem).search(db, query, K, use_index=use_index)
        for query in queries:
            t0 = time.perf_counter()
            hits = testing.retriever(mem).search(db, query, K, use_index=use_index)
            times.append((time.perf_counter() - t0) * 1000)
            empty += not hits
    out = summarize(times)
    out["empty_results"] = float(empty)
    return out


def stage_breakdown(
    mem: Memory, scope: Scope, queries: Sequence[str], *, use_index: bool = True
) -> dict[str, Any]:
    """Median/p95 per stage, as timed by ``retriever.search`` itself (its ``timings`` argument).

    ``store_sum`` adds up what the database answers (index queries, row lookups, time ranges). With
    ``RetrievalConfig.parallel`` those stages overlap each other and the query embedding, so the stages can add up
    to more than ``total`` (the wall time).
    """
    stages: dict[str, list[float]] = {}
    store = {
        "vec_user",
        "vec_reply",
        "scan_user",
        "scan_reply",
        "bm25",
        "fetch_rows",
        "fetch_rows_bg",
        "time_range",
    }
    with testing.database(mem, scope, create=False) as db:
        for query in queries:
            timings: dict[str, float] = {}
            t0 = time.perf_counter()
            testing.retriever(mem).search(db, query, K, use_index=use_index, timings=timings)
            total = (time.perf_counter() - t0) * 1000
            for name, ms in timings.items():
                stages.setdefault(name, []).append(ms)
            stages.setdefault("store_sum", []).append(sum(ms for n, ms in timings.items() if n in store))
            stages.setdefault("total", []).append(total)
    return {name: summarize(ms) for name, ms in stages.items()}


def hnsw_recall(mem: Memory, scope: Scope, queries: Sequence[str]) -> dict[str, float]:
    """Share of the exact top-n (user vectors) that the HNSW index also returns: what the index trades for speed."""
    n = max(testing.retriever(mem).config.candidates, K)
    at_n: list[float] = []
    at_k: list[float] = []
    with testing.database(mem, scope, create=False) as db:
        for query in queries:
            qvec = mem.embedder.embed([query], kind="query")[0]
            approx = [rid for rid, _ in q.vector_search(db, "round_user", qvec, n)]
            exact = [rid for rid, _ in q.exact_vector_search(db, "embedding", qvec, n)]
            at_n.append(len(set(approx) & set(exact)) / max(1, len(exact)))
            at_k.append(len(set(approx[:K]) & set(exact[:K])) / max(1, len(exact[:K])))
    return {
        f"recall_at_{n}": float(np.mean(at_n)),
        f"recall_at_{K}": float(np.mean(at_k)),
        "queries": float(len(queries)),
    }
