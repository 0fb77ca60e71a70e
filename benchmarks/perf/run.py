"""Entry point: ``python -m benchmarks.perf.run [--sizes 1000,10000,100000] [--out DIR] [--quick]``.

Runs, in order: ingest throughput (A/B against the embedder alone), the empty-scope disk floor, then grows one scope
through each size and measures build rate, disk, search latency with and without the vector index, the stage
breakdown, HNSW recall and cold opens; finally many scopes behind a small pool. Writes perf.json, perf.md and
latency.png to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import kuzu

from benchmarks.arguments import add_embedder_argument
from benchmarks.jsonfile import data_file
from benchmarks.perf import disk, latency, report, scopes, synth, throughput
from benchmarks.perf.corpus import DATA, Corpus, load
from benchmarks.perf.memwatch import RssWatch
from benchmarks.provenance import Run
from graphrecall import Memory, testing
from graphrecall.config import Settings
from graphrecall.embed import CachedEmbedder, Embedder, embedder_from_spec
from graphrecall.models import Scope
from graphrecall.store import rounds as q

DEFAULT_OUT = Path("benchmarks/results/perf")
DEFAULT_CACHE = Path("benchmarks/results/embed_cache.sqlite")
PHASES = ("ingest", "floor", "sizes", "scopes")

METHOD = (
    "Ingest: real LongMemEval_S haystack sessions; `Memory.add_sessions` into a fresh, pre-created scope (A) "
    "alternates with `embedder.embed` over exactly the texts ingest embedded (B, checked text by text), same uncached "
    "embedder (`--embedder`, default all-MiniLM-L6-v2); ratio = B time / A time, median over pairs. Large stores: a "
    "base of real rounds with their real vectors from that embedder (through the shared SQLite embedding cache, "
    "keyed by model) is replayed into ONE scope; copy "
    "c >= 1 gets new session/message/round ids, dates shifted by c weeks, identical text, and vectors perturbed by "
    "Gaussian noise of norm sigma then re-normalized; rows are written through `store.rounds.write_history` inside "
    "`db.write()` in large batches (HNSW and FTS indexes maintained on insert, as in real ingest). The scope grows "
    "through each size, so the 10k store contains the 1k store. Latency: real LongMemEval questions, "
    "`retriever.search(db, q, 10, use_index=...)` on an open database after 3 warm-up queries, no question_date, no "
    "reranker, uncached query embedding. Disk: main file + WAL after CHECKPOINT. Cold open = pool miss (OS page "
    "cache may be warm)."
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.perf.run", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000", help="store sizes in rounds, ascending")
    p.add_argument(
        "--data", type=data_file, default=DATA, help="LongMemEval_S JSON, the corpus (default: %(default)s)"
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    add_embedder_argument(p)
    p.add_argument("--quick", action="store_true", help="1k and 10k only, fewer queries and repeats")
    p.add_argument("--queries", type=int, default=100, help="queries per latency measurement (index path)")
    p.add_argument("--exact-queries", type=int, default=30, help="queries for the exact-scan path")
    p.add_argument("--ingest-rounds", type=int, default=300)
    p.add_argument("--pairs", type=int, default=3, help="A/B pairs for ingest throughput")
    p.add_argument("--base-rounds", type=int, default=4000, help="real rounds (with real vectors) replayed")
    p.add_argument("--sigma", type=float, default=0.35, help="vector perturbation for replayed copies")
    p.add_argument("--batch-rounds", type=int, default=5000, help="rounds per build transaction")
    p.add_argument(
        "--reuse", action="store_true", help="bulk: reuse stores left under OUT/work by an earlier (kept) run"
    )
    p.add_argument(
        "--build",
        choices=("bulk", "incremental"),
        default="bulk",
        help="bulk: load rows, then build indexes once (a fresh store per size); incremental: grow one scope "
        "through the sizes with indexes maintained on insert (slows down with size)",
    )
    p.add_argument("--scopes", type=int, default=100, help="scopes for the many-scopes test")
    p.add_argument("--buffer-pool-mib", type=int, default=None, help="override Settings.buffer_pool_bytes")
    p.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="SQLite embedding cache for base vectors"
    )
    p.add_argument("--keep", action="store_true", help="keep the built stores under OUT/work")
    p.add_argument(
        "--only",
        default=",".join(PHASES),
        help=f"comma-separated phases to run ({', '.join(PHASES)}); the other phases' results are kept from an "
        "existing OUT/perf.json, so a long phase can run on its own",
    )
    a = p.parse_args(argv)
    if a.quick:
        a.sizes = "1000,10000" if a.sizes == "1000,10000,100000" else a.sizes
        a.queries, a.exact_queries, a.ingest_rounds, a.pairs = 40, 20, 120, 2
        a.base_rounds, a.scopes = min(a.base_rounds, 2000), min(a.scopes, 30)
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    this_run = Run.begin()
    sizes = sorted(int(x) for x in a.sizes.split(","))
    only = {x.strip() for x in a.only.split(",") if x.strip()}
    if unknown := only - set(PHASES):
        raise SystemExit(f"--only: unknown phase(s) {sorted(unknown)}; choose from {', '.join(PHASES)}")
    out: Path = a.out
    work = out / "work" / "-".join(sorted(only))
    if not a.reuse:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {}
    watch = RssWatch().start()
    t_all = time.perf_counter()
    print("loading LongMemEval ...", flush=True)
    corpus = load(a.data)
    queries = [text for text, _ in corpus.questions]
    st = embedder_from_spec(a.embedder)
    run_info = {
        "config": {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
            "sizes": sizes,
            "command": " ".join(["python -m benchmarks.perf.run", *(sys.argv[1:] if argv is None else argv)]),
            "embedder": st.id,
            "embedder_spec": a.embedder,
            "torch_threads": _torch_threads(),
            "embed_backend": getattr(st, "backend", type(st).__name__),
        },
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
            "kuzu": kuzu.__version__,
        },
    }
    res.update(run_info)
    res["method"] = METHOD
    res.setdefault("runs", {}).update({ph: run_info for ph in only})
    res.setdefault("memory", {"phases": {}, "process_peak_mib": 0.0})

    if "ingest" in only:
        print(f"ingest throughput: {a.ingest_rounds} rounds, {a.pairs} A/B pairs ...", flush=True)
        with watch.phase("ingest"):
            res["ingest"] = throughput.measure(
                work / "ingest", st, corpus.take_rounds(a.ingest_rounds), pairs=a.pairs
            )
        print(f"  ratio {res['ingest']['ratio_median']:.3f}", flush=True)
    if "floor" in only:
        print("disk floor ...", flush=True)
        res["disk_floor"] = disk.floor(work / "floor")
    cached = CachedEmbedder(st, path=a.cache)
    if "sizes" in only:
        run_sizes(a, sizes, res, corpus, queries, st, cached, watch, work)
    if "scopes" in only:
        print(f"many scopes: {a.scopes} scopes, pool 16 ...", flush=True)
        with watch.phase("many_scopes"):
            res["many_scopes"] = scopes.many_scopes(
                work / "many", cached, corpus.sessions, queries[0], n_scopes=a.scopes
            )
    watch.stop()
    res["memory"]["phases"].update(watch.phases)
    res["memory"]["process_peak_mib"] = max(res["memory"]["process_peak_mib"], RssWatch.process_peak_mib())
    res["total_seconds"] = time.perf_counter() - t_all
    run_info["run"] = this_run.finish()  # the record of every phase this run measured (the dict "runs" holds)
    prev = out / "perf.json"
    if prev.exists() and only != set(PHASES):  # read at the end: another phase may have finished meanwhile
        res = report.merge(json.loads(prev.read_text()), res)
    paths = report.write_all(res, out, this_run)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(summary(res))
    print("wrote", ", ".join(str(p) for p in paths))
    return 0


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def run_sizes(
    a: argparse.Namespace,
    sizes: list[int],
    res: dict[str, Any],
    corpus: Corpus,
    queries: list[str],
    st: Embedder,
    cached: CachedEmbedder,
    watch: RssWatch,
    work: Path,
) -> None:
    """Grow one scope through ``sizes`` and measure build, disk, latency, breakdown, recall and cold opens."""
    print(f"base vectors for {a.base_rounds} rounds (cache {a.cache}) ...", flush=True)
    base_sessions = corpus.take_rounds(a.base_rounds)
    with watch.phase("embed_base"):
        vectors = synth.embed_base(base_sessions, cached)
    res["base"] = {
        "sessions": len(base_sessions),
        "rounds": sum(len(s.rounds) for s in base_sessions),
        "cache_hits": vectors.hits,
        "cache_misses": vectors.misses,
        "sigma": a.sigma,
        "seconds": watch.phases["embed_base"]["seconds"],
    }

    settings = Settings(root=work / "stores", reranker=None)
    if a.buffer_pool_mib:
        settings.buffer_pool_bytes = a.buffer_pool_mib << 20
    res["config"]["buffer_pool_bytes"] = settings.buffer_pool_bytes
    res["sizes"] = []
    with Memory.open(work / "stores", embedder=st, settings=settings) as mem:
        grower = synth.StoreGrower(base_sessions, vectors, sigma=a.sigma)
        for size in sizes:
            scope = Scope(org_id="perf", user_id="grown" if a.build == "incremental" else f"bulk{size}")
            path = testing.pool(mem).path_for(scope)
            print(f"size {size}: building ({a.build}) ...", flush=True)
            with watch.phase(f"build_{size}"):
                if a.build == "bulk" and a.reuse and path.exists():
                    build = {"mode": "bulk (reused from an earlier run)", "rounds_per_s": float("nan")}
                elif a.build == "bulk":
                    grower = synth.StoreGrower(base_sessions, vectors, sigma=a.sigma)
                    build = synth.bulk_store(
                        path, grower, size, embedder_id=st.id, dim=st.dim, batch_rounds=a.batch_rounds
                    )
                else:
                    with testing.database(mem, scope) as db:
                        build = grower.grow_to(db, size, batch_rounds=a.batch_rounds)
                build.setdefault("batches", grower.batches[-20:])
                with testing.database(mem, scope, create=False) as db:
                    n_rounds = q.counts(db)["Round"]
                    before = disk.files(path)
                    disk.checkpoint(db)
                    after = disk.total(path)
            entry: dict[str, Any] = {
                "rounds": n_rounds,
                "build": build,
                "disk": {
                    "before_checkpoint": before,
                    "after_checkpoint_bytes": after,
                    "bytes_per_round": after / n_rounds,
                },
            }
            print(f"  {n_rounds} rounds, {after / 1e6:.0f} MB; searching ...", flush=True)
            try:
                with watch.phase(f"search_{size}"):
                    entry["latency"] = {
                        "index": latency.search_latency(mem, scope, queries[: a.queries], use_index=True),
                        "exact": latency.search_latency(
                            mem, scope, queries[: a.exact_queries], use_index=False
                        ),
                    }
                    entry["breakdown"] = {
                        "index": latency.stage_breakdown(mem, scope, queries[: a.queries], use_index=True),
                        "exact": latency.stage_breakdown(
                            mem, scope, queries[: a.exact_queries], use_index=False
                        ),
                    }
                    entry["hnsw_recall"] = latency.hnsw_recall(mem, scope, queries[: a.exact_queries])
            except RuntimeError as e:  # e.g. Kuzu's buffer pool exhausted: the finding, recorded, not a crash
                entry["error"] = f"{type(e).__name__}: {e}"
                print(f"  search failed: {entry['error']}", flush=True)
                res["sizes"].append(entry)
                continue
            entry["rss"] = {
                "build_peak_mib": watch.phases[f"build_{size}"]["rss_peak_mib"],
                "search_peak_mib": watch.phases[f"search_{size}"]["rss_peak_mib"],
            }
            entry["cold"] = scopes.cold_vs_warm(mem, scope, queries[::-1])
            li = entry["latency"]["index"]
            print(
                f"  index p50 {li['p50_ms']:.1f} ms p95 {li['p95_ms']:.1f} ms; "
                f"exact p50 {entry['latency']['exact']['p50_ms']:.1f} ms; cold {entry['cold']['open_plus_first_search_ms_median']:.0f} ms",
                flush=True,
            )
            res["sizes"].append(entry)


def summary(res: dict[str, Any]) -> str:
    rows = [
        f"{'rounds':>8} {'idx p50':>8} {'idx p95':>8} {'exact p50':>9} {'exact p95':>9} {'MB':>7} {'B/round':>8} {'cold ms':>8}"
    ]
    for s in res.get("sizes", []):
        if "error" in s:
            rows.append(f"{s['rounds']:>8} search failed: {s['error'][:90]}")
            continue
        li, le = s["latency"]["index"], s["latency"]["exact"]
        rows.append(
            f"{s['rounds']:>8} {li['p50_ms']:>8.1f} {li['p95_ms']:>8.1f} {le['p50_ms']:>9.1f} {le['p95_ms']:>9.1f} "
            f"{s['disk']['after_checkpoint_bytes'] / 1e6:>7.0f} {s['disk']['bytes_per_round']:>8.0f} "
            f"{s['cold']['open_plus_first_search_ms_median']:>8.0f}"
        )
    ing = res.get("ingest")
    if ing:
        rows.append(
            f"ingest: ours {ing['ingest_msgs_per_s']:.1f} msg/s, embedder alone {ing['embed_alone_msgs_per_s']:.1f} "
            f"msg/s, ratio {ing['ratio_median']:.3f} (target >= 0.9)"
        )
    m = res.get("many_scopes")
    if m:
        rows.append(
            f"many scopes: {m['scopes']} scopes, {m['round_robin_opens']} opens, miss p50 "
            f"{m['pool_miss_search']['p50_ms']:.0f} ms, hit p50 {m['pool_hit_search']['p50_ms']:.1f} ms, "
            f"max open {m['max_open_databases']}, errors {m['error_count']}"
        )
    rows.append(f"peak RSS {res['memory']['process_peak_mib']:.0f} MiB; total {res['total_seconds']:.0f} s")
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
