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
from graphrecall.embed import CachedEmbedder, SentenceTransformerEmbedder
from graphrecall.embed.base import Embedder, normalize_rows
from graphrecall.embed.passages import MAX_PASSAGES, embed_in_full, passage_chars, split_passages, spread


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
    embedder: Embedder, texts: Sequence[str], system: str
) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None]]:
    """Per text, its vector and (for ``best-N``, when it was split) its passages' vectors."""
    if system == "window":
        return [(v, None) for v in embedder.embed(list(texts))]
    kind, size = system.split("-")[:2]
    window = passage_chars(embedder) or int(size)
    limit = min(int(size), window)
    pieces: list[list[str]] = [
        spread(split_passages(t, limit), MAX_PASSAGES) if len(t) > window else [t] for t in texts
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
                embedded[system] = _embed_system(embedder, [*c["hay"], c["message"]], system)
            scores = _scores(embedded[system], qv, penalty)
            ranks[name].append(_rank(scores[-1], scores[:-1]))
        alone = _scores(_embed_system(embedder, [*c["hay"], c["needle"]], f"best-{args.sizes[-1]}"), qv, 0.0)
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
    p.add_argument(
        "--penalties", type=float, nargs="+", default=[0.0], help="passage penalties for best-N (best-N-pX)"
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = p.parse_args(argv)
    result = run(args)
    save_report(args.out, "passages", result, markdown(result, args))


if __name__ == "__main__":
    main()
