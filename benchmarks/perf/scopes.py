"""Cold opens against warm searches, and many scopes in one process behind a small pool.

"Cold" here is a pool miss (the scope's ``kuzu.Database`` is opened, its schema checked, then searched); the OS page
cache may still hold the file, so this is the cost a server pays when a user returns after eviction, not after a
reboot.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.perf.corpus import ChatSession
from benchmarks.perf.disk import total
from benchmarks.perf.latency import K, summarize
from graphrecall import Memory, testing
from graphrecall.config import Settings
from graphrecall.embed import Embedder
from graphrecall.models import Scope


def cold_vs_warm(mem: Memory, scope: Scope, queries: list[str], *, reps: int = 3) -> dict[str, Any]:
    """Close the pool, then time open, first search, and a warm search with another query."""
    opens: list[float] = []
    firsts: list[float] = []
    warms: list[float] = []
    for i in range(reps):
        testing.pool(mem).close()
        t0 = time.perf_counter()
        with testing.database(mem, scope, create=False) as db:
            t1 = time.perf_counter()
            testing.retriever(mem).search(db, queries[2 * i], K)
            t2 = time.perf_counter()
            testing.retriever(mem).search(db, queries[2 * i + 1], K)
            t3 = time.perf_counter()
        opens.append((t1 - t0) * 1000)
        firsts.append((t2 - t0) * 1000)
        warms.append((t3 - t2) * 1000)
    return {
        "open_ms_median": statistics.median(opens),
        "open_plus_first_search_ms_median": statistics.median(firsts),
        "warm_search_ms_median": statistics.median(warms),
        "reps": reps,
        "raw": {"open_ms": opens, "open_plus_first_search_ms": firsts, "warm_search_ms": warms},
    }


def many_scopes(
    root: Path,
    embedder: Embedder,
    sessions: list[ChatSession],
    query: str,
    *,
    n_scopes: int,
    capacity: int = 16,
) -> dict[str, Any]:
    """``n_scopes`` scopes (one real session each) with a pool of ``capacity``: create, then search round-robin.

    The query is the same throughout, so after the first call its embedding comes from the cache and the timings
    isolate pool misses (open + search) from pool hits (search only).
    """
    proc = psutil.Process()
    scopes = [Scope(org_id="many", user_id=f"u{i:03d}") for i in range(n_scopes)]
    errors: list[str] = []
    max_open = 0
    settings = Settings(root=root, reranker=None, pool_size=capacity)
    with Memory.open(root, embedder=embedder, settings=settings) as mem:
        create_ms: list[float] = []
        for i, s in enumerate(scopes):
            sess = sessions[i % len(sessions)]
            t0 = time.perf_counter()
            mem.add_sessions(s, [sess.as_input()])
            create_ms.append((time.perf_counter() - t0) * 1000)
            max_open = max(max_open, testing.pool(mem).open_count())
        mem.search(scopes[0], query, K)  # embed the query once
        opens_before = testing.pool(mem).opens
        miss_ms: list[float] = []
        for _ in range(2):  # round-robin over more scopes than the pool holds: every call is a miss
            for s in scopes:
                t0 = time.perf_counter()
                try:
                    mem.search(s, query, K)
                except (
                    Exception
                ) as e:  # a failed open (e.g. mmap) is the finding, not a crash of the benchmark
                    errors.append(f"{s}: {type(e).__name__}: {e}")
                miss_ms.append((time.perf_counter() - t0) * 1000)
                max_open = max(max_open, testing.pool(mem).open_count())
        opens_rr = testing.pool(mem).opens - opens_before
        hot = scopes[: max(1, capacity // 2)]
        for s in hot:
            mem.search(s, query, K)
        opens_before = testing.pool(mem).opens
        hit_ms: list[float] = []
        for _ in range(5):
            for s in hot:
                t0 = time.perf_counter()
                mem.search(s, query, K)
                hit_ms.append((time.perf_counter() - t0) * 1000)
        opens_hot = testing.pool(mem).opens - opens_before
        mi = proc.memory_info()
        disk = sum(total(testing.pool(mem).path_for(s)) for s in scopes)
    return {
        "scopes": n_scopes,
        "pool_capacity": capacity,
        "create_scope_with_one_session_ms": summarize(create_ms),
        "round_robin_searches": len(miss_ms),
        "round_robin_opens": opens_rr,
        "pool_miss_search": summarize(miss_ms),
        "hot_set_searches": len(hit_ms),
        "hot_set_opens": opens_hot,
        "pool_hit_search": summarize(hit_ms),
        "max_open_databases": max_open,
        "errors": errors[:5],
        "error_count": len(errors),
        "rss_mib_after": mi.rss / (1 << 20),
        "vms_gib_after": mi.vms / (1 << 30),
        "disk_mb_total": disk / 1e6,
        "disk_mb_per_scope": disk / 1e6 / n_scopes,
    }
