"""What a graph saved without its vectors costs to open and to save, against the same graph saved whole: the
measurement behind ``TieredVectorIndex._persist`` saving apart (``hnsw.<n>.links`` + ``hnsw.<n>.slots``).

Takes one vector index directory that holds a graph (a scope's ``<user>.kuzu.idx/vec-round_user`` after
``benchmarks.perf.buckets --parts rounds --sizes 100000``), copies it twice, saves one copy's graph whole (as before
the change: usearch's own file, no slots), the other apart, and opens both alternately, ``--repeats`` times each, checking that a
query gets the same hits from both. Then saves the graph both ways, and the memory a save apart allocates at its
peak (``tracemalloc``: NumPy's arrays and usearch's bytes included). The source directory is not modified.

    python -m benchmarks.perf.buckets --parts rounds --sizes 100000 --work /tmp/b
    python -m benchmarks.perf.graph_open /tmp/b/rounds100000/bench/u.kuzu.idx/vec-round_user --out /tmp/graph_open
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run
from graphrecall.index.vector import GRAPH, GRAPH_META, TieredVectorIndex


def _open(directory: Path, embedder_id: str, dim: int) -> tuple[float, TieredVectorIndex]:
    t0 = time.perf_counter()
    index = TieredVectorIndex(directory, embedder_id=embedder_id, dim=dim, half=True)
    took = time.perf_counter() - t0
    if not index.uses_graph:
        raise SystemExit(f"{directory}: no graph was opened (fewer rows than the threshold?)")
    return took, index


def _bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.iterdir() if f.is_file())


def measure(source: Path, repeats: int) -> dict[str, Any]:
    manifest = json.loads((source / "manifest.json").read_text())
    embedder_id, dim = manifest["embedder_id"], int(manifest["dim"])
    with tempfile.TemporaryDirectory(prefix="graph_open-") as tmp:
        apart, whole = Path(tmp) / "apart", Path(tmp) / "whole"
        shutil.copytree(source, apart)
        shutil.copytree(source, whole)
        _, index = _open(apart, embedder_id, dim)
        index._persist()  # apart, whichever way the source was saved
        if json.loads((apart / GRAPH_META).read_text()).get("vectors") != "log":
            raise SystemExit(
                f"{source}: its graph could not be saved apart (its vectors are not the log's rows)"
            )
        _, index = _open(whole, embedder_id, dim)
        for saved in whole.glob("hnsw.*"):
            if saved.name != GRAPH_META:
                saved.unlink()
        index._graph.save(str(whole / GRAPH))  # what an earlier release saved: usearch's file, no slots
        meta = json.loads((whole / GRAPH_META).read_text())
        (whole / GRAPH_META).write_text(json.dumps({k: meta[k] for k in ("rows", "dim", "dtype")}))
        rows = int(meta["rows"])
        del index
        query = np.random.default_rng(0).standard_normal(dim).astype(np.float32)
        opened: dict[str, list[float]] = {"apart": [], "whole": []}
        hits: dict[str, list[tuple[str, float]]] = {}
        for _ in range(repeats):
            for name, directory in (("apart", apart), ("whole", whole)):
                took, index = _open(directory, embedder_id, dim)
                opened[name].append(took)
                hits[name] = index.search(query, 20)
                del index
        sizes = {"apart": _bytes(apart), "whole": _bytes(whole)}
        _, index = _open(apart, embedder_id, dim)
        saves: list[float] = []
        for _ in range(3):
            t0 = time.perf_counter()
            index._persist()
            saves.append(time.perf_counter() - t0)
        tracemalloc.start()
        index._persist()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        t0 = time.perf_counter()
        index._graph.save(str(Path(tmp) / "whole.usearch"))
        whole_save = time.perf_counter() - t0
    return {
        "rows": rows,
        "repeats": repeats,
        "open_ms_p50": {k: 1000 * statistics.median(v) for k, v in opened.items()},
        "same_hits": hits["apart"] == hits["whole"],
        "directory_bytes": sizes,
        "bytes_per_row_saved": (sizes["whole"] - sizes["apart"]) / rows,
        "save_peak_bytes": peak,
        "save_ms_p50": {
            "apart": 1000 * statistics.median(saves),
            "whole (usearch, no fsync)": 1000 * whole_save,
        },
    }


def report(r: dict[str, Any]) -> str:
    o, s, b = r["open_ms_p50"], r["save_ms_p50"], r["directory_bytes"]
    return "\n".join(
        [
            f"One index of {r['rows']:,} rows, opened {r['repeats']} times each way, alternating; same hits: "
            f"{r['same_hits']}.",
            "",
            "| graph saved | index directory | open p50 | save p50 |",
            "|---|---:|---:|---:|",
            f"| apart (links + slots) | {b['apart'] / 1e6:,.1f} MB | {o['apart']:,.0f} ms | {s['apart']:,.0f} ms |",
            f"| whole (usearch's file) | {b['whole'] / 1e6:,.1f} MB | {o['whole']:,.0f} ms | "
            f"{s['whole (usearch, no fsync)']:,.0f} ms (no fsync) |",
            "",
            f"{r['bytes_per_row_saved']:,.0f} B per row saved. A save apart allocates {r['save_peak_bytes'] / 2**20:,.0f} "
            "MiB at its peak (traced).",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("index", type=Path, help="a vector index directory holding a graph (left unchanged)")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/graph-open"))
    a = ap.parse_args()
    if not (a.index / GRAPH_META).is_file():
        ap.error(f"{a.index}: no {GRAPH_META} (not a vector index with a graph)")
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    record = Run.begin()
    res = measure(a.index, a.repeats)
    save_report(a.out, "graph_open", res, report(res), record)


if __name__ == "__main__":
    main()
