"""Dump the ranked hits of a fixed set of searches to JSON, to compare before and after a change.

    python -m benchmarks.rankings.dump --out benchmarks/results/rankings/before.json.gz

For every scope of ``benchmarks.rankings.scopes`` each question is searched (k = 50) with ``Memory.search`` under
the default settings while the write log still holds the last session ("default"), over a graph scope also with
``kinds=("round", "fact", "event")`` ("kinds"); then the scope is flushed into Kuzu and searched again with the
default settings ("flushed") and with each of ``VARIANTS``, which take the branches the defaults do not (weighted
fusion, the recency list, restatements for every question, the user side always, no reply or passage vectors and
no time list, serial stages over exact scans). Each hit is written with its id, kind, score and signals; floats are
written exactly (``repr``). Nothing here depends on timing, and the dump runs under one hash seed (``main``), so
two runs of one commit give identical files (vectors come from ``--embed-cache`` after the first run: the same
floats).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import arguments
from benchmarks.locomo import data as locomo
from benchmarks.longmemeval import data as lme
from benchmarks.longmemeval import harness
from benchmarks.rankings import scopes
from graphrecall import Memory, testing
from graphrecall.config import Settings
from graphrecall.embed import CachedEmbedder, Embedder
from graphrecall.models import Hit

FORMAT = "graphrecall.rankings/v1"
SEARCH_K = 50
LME = "longmemeval/longmemeval_s_dev.json.gz"  # the data files, under --data-dir
ORACLE = "longmemeval/longmemeval_oracle_dev.json.gz"
LOCOMO = "locomo/locomo_dev.json.gz"

# name -> (RetrievalConfig overrides, HybridRetriever.search keyword arguments); searched over the flushed scope.
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "flushed": ({}, {}),
    "weighted": ({"fusion": "weighted"}, {}),
    "recency": ({"recency_weight": 2.0}, {}),
    "restate_always": ({"newer_restatements": "always"}, {}),
    "user_always": ({"user_side": "always"}, {}),
    "lean": ({"use_reply_vectors": False, "passage_vectors": False, "in_range_weight": 0.0}, {}),
    "serial_exact": ({"parallel": False}, {"use_index": False}),
}


def hit_row(h: Hit) -> dict[str, Any]:
    return {"id": h.id, "kind": h.kind, "score": h.score, "signals": dict(sorted(h.signals.items()))}


def search_scope(mem: Memory, filled: scopes.Filled, out: dict[str, list[dict[str, Any]]]) -> None:
    """Every search of one filled scope, into ``out`` by key (``<probe key>:<search>``)."""
    for p in filled.probes:
        hits = mem.search(filled.scope, p.query, k=SEARCH_K, question_date=p.question_date)
        out[f"{p.key}:default"] = [hit_row(h) for h in hits]
        if filled.extracted:
            hits = mem.search(
                filled.scope,
                p.query,
                k=SEARCH_K,
                question_date=p.question_date,
                kinds=("round", "fact", "event"),
            )
            out[f"{p.key}:kinds"] = [hit_row(h) for h in hits]
    mem.flush()
    base = testing.retriever(mem).config
    for name, (overrides, kwargs) in VARIANTS.items():
        retriever = harness.variant_retriever(mem, base, overrides)
        for p in filled.probes:
            cutoff = mem.recall(filled.scope, p.question_date).cutoff
            with testing.database(mem, filled.scope) as db:
                hits = retriever.search(db, p.query, SEARCH_K, cutoff=cutoff, **kwargs)
            out[f"{p.key}:{name}"] = [hit_row(h) for h in hits]


@contextmanager
def memory(embedder: Embedder) -> Iterator[Memory]:
    """A ``Memory`` on a temporary root with default settings (never the environment's), whose write logs are
    flushed only when asked: what stays unflushed does not depend on how long a search took."""
    root = Path(tempfile.mkdtemp(prefix="rankings-"))
    try:
        with Memory.open(root, embedder=embedder, settings=Settings(root=root, flush_max_age_s=1e6)) as mem:
            yield mem
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fillers(args: argparse.Namespace) -> list[tuple[str, Callable[[Memory], scopes.Filled]]]:
    """(scope name, how to fill it) for every scope the arguments ask for, in a fixed order."""
    out: list[tuple[str, Callable[[Memory], scopes.Filled]]] = []
    if args.lme_questions:
        for q in scopes.spread(lme.load(args.data_dir / LME), args.lme_questions):
            out.append((f"lme/{q.question_id}", partial(scopes.fill_longmemeval, q=q, source="lme")))
    if args.oracle_questions:
        for q in scopes.spread(lme.load(args.data_dir / ORACLE), args.oracle_questions):
            fill = partial(scopes.fill_longmemeval, q=q, source="lme-oracle")
            out.append((f"lme-oracle/{q.question_id}", fill))
    if args.locomo_conversations:
        locomo_file = args.data_dir / LOCOMO
        raw = scopes.locomo_raw(locomo_file)
        for conv in locomo.load(locomo_file, {1, 2, 3, 4, 5})[: args.locomo_conversations]:
            out.append(
                (f"locomo/{conv.sample_id}", partial(scopes.fill_locomo, conv=conv, raw=raw[conv.sample_id]))
            )
    return out


def build_embedder(args: argparse.Namespace) -> Embedder:
    args.embed_cache.parent.mkdir(parents=True, exist_ok=True)
    built: Embedder = arguments.build_embedder(args.embedder, args.embed_cache)
    return built


def commit() -> str:
    """The checkout's commit, with ``+dirty`` when it has uncommitted changes (for the dump's header only)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def dump(args: argparse.Namespace) -> dict[str, Any]:
    embedder = build_embedder(args)
    searches: dict[str, list[dict[str, Any]]] = {}
    scope_notes: dict[str, dict[str, int]] = {}
    try:
        for name, fill in fillers(args):
            t0 = time.perf_counter()
            with memory(embedder) as mem:  # one store per scope: nothing one scope does reaches another
                filled = fill(mem)
                search_scope(mem, filled, searches)
            scope_notes[name] = {"questions": len(filled.probes), **filled.notes}
            print(
                f"{name}: {len(filled.probes)} questions, {time.perf_counter() - t0:.1f} s", file=sys.stderr
            )
    finally:
        if isinstance(embedder, CachedEmbedder):
            embedder.close()
    return {
        "format": FORMAT,
        "commit": args.label or commit(),
        "k": SEARCH_K,
        "embedder": embedder.id,
        "variants": {name: {"config": c, "search": s} for name, (c, s) in VARIANTS.items()},
        "scopes": scope_notes,
        "searches": searches,
    }


def write(path: Path, doc: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.rankings.dump", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="the dump (.json or .json.gz)")
    p.add_argument(
        "--data-dir",
        type=Path,
        required=True,
        help=f"the dev data ({LME}, {ORACLE}, {LOCOMO}), e.g. /work/shared/data",
    )
    p.add_argument(
        "--lme-questions", type=int, default=24, help="LongMemEval_S questions, spread over the file"
    )
    p.add_argument("--oracle-questions", type=int, default=12, help="oracle (small-scope) questions, spread")
    p.add_argument("--locomo-conversations", type=int, default=2, help="LoCoMo conversations, every question")
    p.add_argument(
        "--label", default=None, help="what the dump was made from (default: this checkout's commit)"
    )
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    arguments.add_embedder_argument(p)
    return p


HASH_SEED = "0"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        # The write log's BM25 sums a round's term scores in the order of a set of strings, which depends on the
        # interpreter's hash seed: the same search then differs in the last bit between two processes, and a
        # near tie may flip. One seed for every dump makes two runs of one commit give the same file.
        env = {**os.environ, "PYTHONHASHSEED": HASH_SEED}
        argv = sys.argv[1:] if argv is None else list(argv)
        os.execve(sys.executable, [sys.executable, "-m", "benchmarks.rankings.dump", *argv], env)
    doc = dump(args)
    write(args.out, doc)
    print(f"{len(doc['searches'])} searches over {len(doc['scopes'])} scopes -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
