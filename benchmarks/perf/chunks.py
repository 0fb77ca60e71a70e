"""What chunking a bulk ingest's texts costs the embedder: the same texts in one call, in chunks of rounds, and in
chunks of texts sorted by length over the whole batch.

Why: ingest embeds a large batch in chunks so that the writer thread can store one chunk while the next is embedded
(``Writer._embed_and_write``). A model call pads each of its batches to its longest text, and a round's two texts
(a short question, a long reply) differ in length, so chunks of rounds padded more than one call over everything.
This times the embedder alone on each split of the same texts (LongMemEval sessions, the bundled model, uncached),
alternating, so that the ratio to one call is the cost of the split and nothing else.

    python -m benchmarks.perf.chunks --rounds 600 --reps 2 --out benchmarks/results/chunks
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import data_file, save_report
from benchmarks.perf import corpus
from benchmarks.provenance import Run
from graphrecall import ingest as ing
from graphrecall.cli_common import positive_int
from graphrecall.embed.sentence import SentenceTransformerEmbedder
from graphrecall.store.rows import RoundRow
from graphrecall.writer import round_texts


def round_chunks(rounds: Sequence[RoundRow], size: int) -> list[list[str]]:
    """The old split: rounds sorted by their user text's length, ``size`` rounds (both their texts) per call."""
    by_length = sorted(rounds, key=lambda r: len(ing.embedding_texts(r)[0]))
    return [round_texts(by_length[i : i + size])[0] for i in range(0, len(by_length), size)]


def text_chunks(rounds: Sequence[RoundRow], size: int) -> list[list[str]]:
    """Ingest's split: every text of the batch sorted by length, ``size`` texts per call."""
    texts = sorted(round_texts(rounds)[0], key=len)
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def run(rounds_wanted: int, reps: int, data: Path = corpus.DATA) -> dict[str, Any]:
    rounds = [r for s in corpus.load(data).take_rounds(rounds_wanted) for r in s.rounds]
    embedder = SentenceTransformerEmbedder()
    texts = round_texts(rounds)[0]
    embedder.embed(texts[:32])  # load and warm up before anything is timed
    splits = {
        "one call": [texts],
        "48-round chunks": round_chunks(rounds, 48),
        "150-round chunks": round_chunks(rounds, 150),
        "96-text chunks, sorted over the batch": text_chunks(rounds, 96),
    }
    seconds: dict[str, list[float]] = {name: [] for name in splits}
    for _ in range(reps):
        for name, chunks in splits.items():
            t0 = time.perf_counter()
            for chunk in chunks:
                embedder.embed(chunk)
            seconds[name].append(time.perf_counter() - t0)
    base = statistics.median(seconds["one call"])
    return {
        "rounds": len(rounds),
        "texts": len(texts),
        "reps": reps,
        "splits": {
            name: {"calls": len(splits[name]), "seconds": s, "vs_one_call": statistics.median(s) / base}
            for name, s in seconds.items()
        },
    }


def report(res: dict[str, Any]) -> str:
    lines = [
        f"{res['texts']} texts of {res['rounds']} rounds, {res['reps']} alternating repetitions (median):",
        "",
        "| split | calls | seconds | time vs one call |",
        "|---|---:|---|---:|",
    ]
    for name, r in res["splits"].items():
        secs = " / ".join(f"{s:.2f}" for s in r["seconds"])
        lines.append(f"| {name} | {r['calls']} | {secs} | {r['vs_one_call']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rounds", type=positive_int, default=600, help="rounds of LongMemEval (default: %(default)s)"
    )
    ap.add_argument(
        "--reps", type=positive_int, default=2, help="repetitions of each split (default: %(default)s)"
    )
    ap.add_argument(
        "--data", type=data_file, default=corpus.DATA, help="LongMemEval_S JSON (default: %(default)s)"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/chunks"), help="report directory")
    a = ap.parse_args(argv)
    this_run = Run.begin()
    res = run(a.rounds, a.reps, a.data)
    save_report(a.out, "chunks", res, report(res), this_run)


if __name__ == "__main__":
    main()
