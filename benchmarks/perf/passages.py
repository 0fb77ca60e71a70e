"""How a long message should be embedded so that one detail in it is found: passage sizes, pooled vs best passage.

Why this benchmark: ``embed.passages`` cuts a text longer than the model's window into passages and stores a vector
per passage beside the pooled one; the passage size decides whether a detail stands out (a short passage is mostly
the detail) or is diluted by its neighbours (a window-sized passage is mostly something else). LongMemEval's and
LoCoMo's evidence turns are short, so their retrieval figures cannot tell; this builds long messages with a known
needle from LongMemEval's own turns.

For each question with a user-side evidence turn (``has_answer``), the needle, other user turns of the same
haystack are glued around it (the needle at a seeded random position) into one message of at least
``--min-chars`` characters. That message is ranked by dense similarity to the question among every other user turn
of the haystack (the turns used in the message taken out). Each system embeds every text (hay and message) its way:

- ``window``: the text as the model reads it alone (cut at its window: what graphrecall did before passages);
- ``pooled-N``: the normalized mean of passages of at most N characters (``pooled-762``: graphrecall's vector of a
  long text, the mean of its window-sized pieces);
- ``best-N``: the best of that vector and each passage of at most N characters (what search does with ``Passage``
  rows);
  ``best-N-pX``: each passage's similarity less X first (``RetrievalConfig.passage_penalty``).

Figures: R@1, R@5 and MRR of the long message, and for reference the needle turn alone among the same hay.

    python -m benchmarks.perf.passages --data ../shared/data/longmemeval/longmemeval_s_dev.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.jsonfile import save_report
from benchmarks.longmemeval import data as lme_data
from benchmarks.longmemeval import harness
from benchmarks.percentile import percentile
from benchmarks.provenance import Run
from graphrecall import Scope, testing
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.embed import CachedEmbedder, SentenceTransformerEmbedder
from graphrecall.embed.base import Embedder, normalize_rows
from graphrecall.embed.passages import (
    MAX_PASSAGES,
    PASSAGE_FROM_CHARS,
    embed_in_full,
    passage_chars,
    passage_texts,
    split_passages,
    spread,
)
from graphrecall.retrieve.retriever import HybridRetriever


def _load(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        data: list[dict[str, Any]] = json.load(f)
    return data


def _cases(data: Sequence[dict[str, Any]], limit: int, min_chars: int, seed: int) -> list[dict[str, Any]]:
    """(question, long message, hay) per question with a user-side needle."""
    rng = random.Random(seed)
    out = []
    for q in data:
        needles: list[str] = []
        others: list[str] = []
        for sess in q["haystack_sessions"]:
            for t in sess:
                if t["role"] != "user" or not t["content"].strip():
                    continue
                (needles if t.get("has_answer") else others).append(t["content"])
        others = list(dict.fromkeys(t for t in others if t not in needles))
        if len(needles) != 1 or len(others) < 20:
            continue  # one needle: a message with two would be found by either
        rng.shuffle(others)
        filler: list[str] = []
        while sum(len(t) for t in filler) + len(needles[0]) < min_chars and others:
            filler.append(others.pop())
        at = rng.randint(0, len(filler))
        message = "\n\n".join([*filler[:at], needles[0], *filler[at:]])
        out.append({"question": q["question"], "needle": needles[0], "message": message, "hay": others})
        if len(out) == limit:
            break
    return out


def _embed_system(
    embedder: Embedder, texts: Sequence[str], system: str, from_chars: int
) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]]:
    """Per text, its vector and (for ``best-N``, when it was split) its passages' vectors."""
    if system == "window":
        return [(v, None) for v in embedder.embed(list(texts))]
    kind, size = system.split("-")[:2]
    window = passage_chars(embedder) or int(size)
    limit = min(int(size), window)
    start = window if kind == "pooled" else min(window, from_chars)  # which texts get passages
    pieces: list[list[str]] = [
        spread(split_passages(t, limit), MAX_PASSAGES) if len(t) > start else [t] for t in texts
    ]
    vecs = embedder.embed([p for ps in pieces for p in ps])
    whole = embed_in_full(embedder, texts)  # the product's vector: the mean of window-sized pieces
    out: list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]] = []
    at = 0
    for i, ps in enumerate(pieces):
        rows = vecs[at : at + len(ps)]
        at += len(ps)
        if kind == "pooled":
            out.append((normalize_rows(rows.mean(axis=0))[0], None))
        else:
            out.append((whole[i], normalize_rows(rows) if len(ps) > 1 else None))
    return out


def _scores(
    embedded: Sequence[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]], qv: Any, penalty: float
) -> list[float]:
    """What search scores each text by: its vector, or a passage less ``penalty`` when that is better."""
    return [
        max(float(v @ qv), float((p @ qv).max()) - penalty) if p is not None else float(v @ qv)
        for v, p in embedded
    ]


def _rank(score: float, hay: Sequence[float]) -> int:
    return 1 + sum(1 for s in hay if s > score)


def run(args: argparse.Namespace) -> dict[str, Any]:
    model = SentenceTransformerEmbedder()
    embedder: Embedder = CachedEmbedder(model, path=args.embed_cache) if args.embed_cache else model
    cases = _cases(_load(args.data), args.limit, args.min_chars, args.seed)
    window = passage_chars(embedder)
    systems: list[tuple[str, str, float]] = [("window", "window", 0.0)]
    for n in args.sizes:
        systems.append((f"pooled-{n}", f"pooled-{n}", 0.0))
        systems += [(f"best-{n}" + (f"-p{pen:g}" if pen else ""), f"best-{n}", pen) for pen in args.penalties]
    ranks: dict[str, list[int]] = {name: [] for name, _, _ in systems}
    ranks["needle-alone"] = []
    t0 = time.perf_counter()
    for c in cases:
        [qv] = embedder.embed([c["question"]], kind="query")
        embedded: dict[str, Any] = {}
        for name, system, penalty in systems:
            if system not in embedded:
                embedded[system] = _embed_system(
                    embedder, [*c["hay"], c["message"]], system, args.passages_from
                )
            scores = _scores(embedded[system], qv, penalty)
            ranks[name].append(_rank(scores[-1], scores[:-1]))
        alone = _scores(
            _embed_system(embedder, [*c["hay"], c["needle"]], f"best-{args.sizes[-1]}", args.passages_from),
            qv,
            0.0,
        )
        ranks["needle-alone"].append(_rank(alone[-1], alone[:-1]))
    figures = {
        s: {
            "r@1": round(float(np.mean([r == 1 for r in rs])), 3),
            "r@5": round(float(np.mean([r <= 5 for r in rs])), 3),
            "mrr": round(float(np.mean([1 / r for r in rs])), 3),
        }
        for s, rs in ranks.items()
    }
    return {
        "questions": len(cases),
        "window_chars": window,
        "message_chars_median": int(np.median([len(c["message"]) for c in cases])) if cases else 0,
        "hay_median": int(np.median([len(c["hay"]) for c in cases])) if cases else 0,
        "seconds": round(time.perf_counter() - t0, 1),
        "figures": figures,
    }


def cost(args: argparse.Namespace) -> dict[str, Any]:
    """What passages cost at ingest: the same LongMemEval user turns embedded as ingest would (``passage_texts``)
    with each ``--from-chars`` threshold, against the turns alone, uncached, in rounds that alternate the order."""
    model = SentenceTransformerEmbedder()
    texts: list[str] = []
    for q in _load(args.data):
        for sess in q["haystack_sessions"]:
            texts += [t["content"] for t in sess if t["role"] == "user" and t["content"].strip()]
    texts = list(dict.fromkeys(texts))[: args.cost]
    model.embed(texts[:64])  # load and warm the model
    systems: dict[str, list[str]] = {"whole": [], **{f"from-{n}": [] for n in args.from_chars}}
    for name in systems:
        if name == "whole":
            systems[name] = passage_texts(model, texts, passages=False)[0]
        else:
            systems[name] = passage_texts(model, texts, from_chars=int(name.split("-")[1]))[0]
    seconds: dict[str, list[float]] = {name: [] for name in systems}
    for r in range(args.rounds):
        for name in systems if r % 2 == 0 else reversed(systems):
            t0 = time.perf_counter()
            for i in range(0, len(systems[name]), 96):  # ingest's chunks (writer.TEXT_CHUNK)
                model.embed(systems[name][i : i + 96])
            seconds[name].append(time.perf_counter() - t0)
    base = float(np.median(seconds["whole"]))
    return {
        "turns": len(texts),
        "rounds": args.rounds,
        "texts": {name: len(t) for name, t in systems.items()},
        "chars": {name: sum(len(x) for x in t) for name, t in systems.items()},
        "seconds_median": {name: round(float(np.median(v)), 2) for name, v in seconds.items()},
        "ratio_to_whole": {name: round(float(np.median(v)) / base, 3) for name, v in seconds.items()},
    }


def cost_markdown(result: dict[str, Any]) -> str:
    return _table(
        f"Passages at ingest: {result['turns']} LongMemEval user turns, median of {result['rounds']} rounds",
        ["system", "texts embedded", "characters", "seconds", "x whole"],
        [
            [
                name,
                f"{result['texts'][name]:,}",
                f"{result['chars'][name]:,}",
                result["seconds_median"][name],
                result["ratio_to_whole"][name],
            ]
            for name in result["texts"]
        ],
    )


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A report: a ``#`` title and one Markdown table."""
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """What searching the passages costs: one store of ``--latency`` LongMemEval questions' haystacks (ingested with
    the default settings, flushed into Kuzu), every question asked with passages on and off alternately, through
    the same retriever code (only ``RetrievalConfig.passage_vectors`` differs)."""
    model = SentenceTransformerEmbedder()
    embedder: Embedder = CachedEmbedder(model, path=args.embed_cache) if args.embed_cache else model
    questions = lme_data.load(args.data, limit=args.latency)
    scope = Scope(org_id="bench", user_id="passages")
    seen: dict[str, dict[str, Any]] = {}
    for q in questions:
        for s in lme_data.session_inputs(q):
            seen.setdefault(s["session_id"], s)
    with harness.temporary_store("passages-latency-", embedder, Settings()) as mem:
        mem.add_sessions(scope, list(seen.values()))
        mem.flush()
        retrievers = {
            "on": HybridRetriever(embedder, RetrievalConfig()),
            "off": HybridRetriever(embedder, RetrievalConfig(passage_vectors=False)),
        }
        ms: dict[str, list[float]] = {name: [] for name in retrievers}
        with testing.database(mem, scope) as db:
            counts = {"rounds": db.indexes.count("round_user"), "passages": db.indexes.count("round_passage")}
            for r in range(args.rounds):
                for q in questions:
                    for name in retrievers if r % 2 == 0 else reversed(retrievers):
                        t0 = time.perf_counter()
                        retrievers[name].search(db, q.question, 10)
                        ms[name].append((time.perf_counter() - t0) * 1000)
    return {
        **counts,
        "searches": {name: len(v) for name, v in ms.items()},
        "p50_ms": {name: round(percentile(v, 50), 2) for name, v in ms.items()},
        "p95_ms": {name: round(percentile(v, 95), 2) for name, v in ms.items()},
    }


def latency_markdown(result: dict[str, Any]) -> str:
    return _table(
        f"Searching passages: {result['rounds']:,} rounds, {result['passages']:,} passages",
        ["passages", "searches", "p50 ms", "p95 ms"],
        [
            [name, result["searches"][name], result["p50_ms"][name], result["p95_ms"][name]]
            for name in result["p50_ms"]
        ],
    )


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    return _table(
        f"Long messages: passage sizes ({result['questions']} questions, message median "
        f"{result['message_chars_median']:,} characters, hay median {result['hay_median']} user turns, window "
        f"~{result['window_chars']} characters, passages from {args.passages_from} characters, seed {args.seed})",
        ["system", "R@1", "R@5", "MRR"],
        [[s, f"{f['r@1']:.3f}", f"{f['r@5']:.3f}", f"{f['mrr']:.3f}"] for s, f in result["figures"].items()],
    )


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="LongMemEval JSON (.json or .json.gz)")
    p.add_argument("--limit", type=int, default=80, help="questions (the first with one user-side needle)")
    p.add_argument("--min-chars", type=int, default=3000, help="length of each long message, at least")
    p.add_argument("--sizes", type=int, nargs="+", default=[150, 250, 762], help="passage sizes (chars)")
    p.add_argument(
        "--penalties",
        type=float,
        nargs="+",
        default=[0.0, 0.1],
        help="passage penalties for best-N (best-N-pX)",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--passages-from",
        type=int,
        default=PASSAGE_FROM_CHARS,
        help="best-N: texts longer than this (or the window) get passages, hay included (the product's default)",
    )
    p.add_argument(
        "--cost", type=int, default=0, help="instead: time embedding this many user turns as ingest does"
    )
    p.add_argument("--from-chars", type=int, nargs="+", default=[200, 300], help="--cost: passage thresholds")
    p.add_argument("--rounds", type=int, default=3, help="--cost, --latency: timed rounds per system")
    p.add_argument(
        "--latency", type=int, default=0, help="instead: search a store of this many questions' haystacks"
    )
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = p.parse_args(argv)
    this_run = Run.begin()
    if args.latency:
        searched = latency(args)
        save_report(args.out, "passages_latency", searched, latency_markdown(searched), this_run)
        return
    if args.cost:
        timed = cost(args)
        save_report(args.out, "passages_cost", timed, cost_markdown(timed), this_run)
        return
    result = run(args)
    save_report(args.out, "passages", result, markdown(result, args), this_run)


if __name__ == "__main__":
    main()
