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
- ``pooled-N``: the normalized mean of passages of at most N characters;
- ``best-N``: the best of the pooled vector and each passage (what search does with ``Passage`` rows).

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
from graphrecall.embed import CachedEmbedder, SentenceTransformerEmbedder
from graphrecall.embed.base import Embedder, normalize_rows
from graphrecall.embed.passages import MAX_PASSAGES, passage_chars, split_passages, spread


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


def _embed_system(embedder: Embedder, texts: Sequence[str], system: str) -> list[np.ndarray[Any, Any]]:
    """Per text, the rows it is scored by (the best row counts)."""
    if system == "window":
        return list(embedder.embed(list(texts))[:, None, :])
    kind, size = system.split("-")
    limit = min(int(size), passage_chars(embedder) or int(size))
    window = passage_chars(embedder) or limit
    pieces: list[list[str]] = [
        spread(split_passages(t, limit), MAX_PASSAGES) if len(t) > window else [t] for t in texts
    ]
    flat = [p for ps in pieces for p in ps]
    vecs = embedder.embed(flat)
    out = []
    at = 0
    for ps in pieces:
        rows = vecs[at : at + len(ps)]
        at += len(ps)
        pooled = normalize_rows(rows.mean(axis=0))
        out.append(pooled if kind == "pooled" or len(ps) == 1 else np.vstack([pooled, normalize_rows(rows)]))
    return out


def _rank(score: float, hay: Sequence[float]) -> int:
    return 1 + sum(1 for s in hay if s > score)


def run(args: argparse.Namespace) -> dict[str, Any]:
    model = SentenceTransformerEmbedder()
    embedder: Embedder = CachedEmbedder(model, path=args.embed_cache) if args.embed_cache else model
    cases = _cases(_load(args.data), args.limit, args.min_chars, args.seed)
    window = passage_chars(embedder)
    systems = ["window", *(f"{k}-{n}" for n in args.sizes for k in ("pooled", "best"))]
    ranks: dict[str, list[int]] = {s: [] for s in [*systems, "needle-alone"]}
    t0 = time.perf_counter()
    for c in cases:
        [qv] = embedder.embed([c["question"]], kind="query")
        for system in systems:
            rows = _embed_system(embedder, [*c["hay"], c["message"]], system)
            scores = [float((r @ qv).max()) for r in rows]
            ranks[system].append(_rank(scores[-1], scores[:-1]))
        rows = _embed_system(embedder, [*c["hay"], c["needle"]], f"best-{args.sizes[-1]}")
        scores = [float((r @ qv).max()) for r in rows]
        ranks["needle-alone"].append(_rank(scores[-1], scores[:-1]))
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


def markdown(result: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"# Long messages: passage sizes ({result['questions']} questions, message median "
        f"{result['message_chars_median']:,} characters, hay median {result['hay_median']} user turns, window "
        f"~{result['window_chars']} characters, seed {args.seed})",
        "",
        "| system | R@1 | R@5 | MRR |",
        "|---|---|---|---|",
    ]
    for s, f in result["figures"].items():
        lines.append(f"| {s} | {f['r@1']:.3f} | {f['r@5']:.3f} | {f['mrr']:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="LongMemEval JSON (.json or .json.gz)")
    p.add_argument("--limit", type=int, default=80, help="questions (the first with one user-side needle)")
    p.add_argument("--min-chars", type=int, default=3000, help="length of each long message, at least")
    p.add_argument("--sizes", type=int, nargs="+", default=[250, 400, 600, 762], help="passage sizes (chars)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = p.parse_args(argv)
    result = run(args)
    save_report(args.out, "passages", result, markdown(result, args))


if __name__ == "__main__":
    main()
