"""How well an HNSW graph (usearch, as ``TieredVectorIndex`` builds it) recalls the exact top k when it is built on
one thread and on all cores, by the rows it starts with: the measurement behind ``ONE_THREAD_BELOW`` in
``graphrecall.index.vector``.

Each size builds ``--builds`` graphs per thread setting from the same rows (the index's own settings: cosine,
connectivity 32, expansion 128 on add and 300 on search) and asks every graph the same queries; a query "misses"
when the graph's top k is not the exact scan's. Rows are clustered (200 centres plus noise, closer to sentence
embeddings than independent Gaussians); queries are rows plus noise.

    python -m benchmarks.perf.graph_threads --sizes 180,1000,5000,20000 --dims 16,384
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run

CONNECTIVITY, EXPANSION_ADD, EXPANSION_SEARCH = 32, 128, 300  # TieredVectorIndex's defaults


def _unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def rows(rng: np.random.Generator, n: int, dim: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    centres = rng.standard_normal((200, dim)).astype(np.float32)
    mat = _unit(centres[rng.integers(0, 200, n)] + 0.6 * rng.standard_normal((n, dim)))
    qs = _unit(mat[rng.integers(0, n, queries)] + 0.3 * rng.standard_normal((queries, dim)))
    return mat, qs


def one(mat: np.ndarray, qs: np.ndarray, k: int, threads: int) -> dict[str, float]:
    from usearch.index import Index

    t = time.perf_counter()
    g = Index(
        ndim=mat.shape[1],
        metric="cos",
        dtype="f32",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )
    g.add(np.arange(len(mat), dtype=np.uint64), mat, threads=threads)
    build = time.perf_counter() - t
    found = missed = 0
    for q in qs:
        want = set(np.argsort(-(mat @ q), kind="stable")[:k].tolist())
        got = {int(key) for key in g.search(q, k).keys}
        found += len(want & got)
        missed += got != want
    return {"build_s": build, "recall": found / (k * len(qs)), "missed": missed / len(qs)}


def run(sizes: list[int], dims: list[int], builds: int, queries: int, k: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for dim in dims:
        for n in sizes:
            mat, qs = rows(np.random.default_rng(n + dim), n, dim, queries)
            for threads in (1, 0):
                trials = [one(mat, qs, k, threads) for _ in range(builds)]
                row = {
                    "dim": dim,
                    "rows": n,
                    "threads": "one" if threads == 1 else "all",
                    **{key: float(np.mean([t[key] for t in trials])) for key in trials[0]},
                    "worst_missed": max(t["missed"] for t in trials),
                }
                print(row, flush=True)
                out.append(row)
    return out


def report(res: dict[str, Any]) -> str:
    a = res["args"]
    lines = [
        f"# HNSW recall by build threads ({a['builds']} builds each, {a['queries']} queries, top {a['k']})",
        "",
        "| dim | rows | threads | build s | recall@k | queries missing one of the top k (mean / worst build) |",
        "|---|---|---|---|---|---|",
    ]
    for r in res["rows"]:
        lines.append(
            f"| {r['dim']} | {r['rows']:,} | {r['threads']} | {r['build_s']:.2f} | {r['recall']:.4f}"
            f" | {r['missed']:.2%} / {r['worst_missed']:.2%} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="180,1000,5000,20000", help="rows per graph (default: %(default)s)")
    ap.add_argument("--dims", default="16,384", help="dimensions (default: %(default)s)")
    ap.add_argument("--builds", type=int, default=5, help="graphs built per setting (default: %(default)s)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/graph_threads"))
    a = ap.parse_args()
    if a.builds < 1 or a.queries < 1 or a.k < 1:
        ap.error("--builds, --queries and --k must be at least 1")
    record = Run.begin()
    sizes = [int(s) for s in a.sizes.split(",")]
    dims = [int(d) for d in a.dims.split(",")]
    res: dict[str, Any] = {"args": {k: str(v) for k, v in vars(a).items()}}
    res["rows"] = run(sizes, dims, a.builds, a.queries, a.k)
    save_report(a.out, "graph_threads", res, report(res), record)


if __name__ == "__main__":
    main()
