"""Ingest throughput of ``Memory.add_sessions`` against the embedder alone on the same texts.

Both sides use the same *uncached* embedder instance, so the ratio ours/embedder-alone is what storage (Kuzu
writes, HNSW and FTS maintenance, validation, round building) costs on top of embedding. Runs alternate A/B/A/B so
that load from other processes on the shared cores hits both sides alike; the median ratio over pairs is reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.perf.corpus import ChatSession, embed_texts
from graphrecall import Memory, testing
from graphrecall.config import Settings
from graphrecall.embed import Embedder, TextKind, Vectors
from graphrecall.embed.base import Wrapper
from graphrecall.embed.passages import passage_texts
from graphrecall.models import Scope


class RecordingEmbedder(Wrapper):
    """Passes through to ``inner`` and keeps every text it was asked to embed (to prove both sides match)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.texts: list[str] = []
        self.seconds = 0.0

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        self.texts.extend(texts)
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts, kind=kind)
        finally:
            self.seconds += time.perf_counter() - t0


def measure(root: Path, embedder: Embedder, sessions: list[ChatSession], *, pairs: int = 3) -> dict[str, Any]:
    """Alternate ``pairs`` times: ingest into a fresh (pre-created) scope, then embed the same texts alone."""
    rounds = [r for s in sessions for r in s.rounds]
    texts, _, _ = passage_texts(embedder, embed_texts(rounds))  # long user turns go to the model as pieces
    n_messages = sum(len(s.messages) for s in sessions)
    recorder = RecordingEmbedder(embedder)
    embedder.embed(texts[:16])  # load the model and warm up kernels before anything is timed
    runs: list[dict[str, float]] = []
    with Memory.open(root, embedder=recorder, settings=Settings(root=root, reranker=None)) as mem:
        for i in range(pairs):
            scope = Scope(org_id="perf", user_id=f"ingest{i}")
            with testing.database(
                mem, scope, create=True
            ):  # schema creation: a one-off, measured under cold opens
                pass
            recorder.texts.clear()
            recorder.seconds = 0.0
            t0 = time.perf_counter()
            result = mem.add_sessions(scope, [s.as_input() for s in sessions])
            ours = time.perf_counter() - t0
            if sorted(recorder.texts) != sorted(texts):  # same texts; ingest orders them by length in chunks
                raise AssertionError("ingest embedded other texts than the embedder-alone side")
            if result.rounds_written != len(rounds):
                raise AssertionError(f"wrote {result.rounds_written} rounds, expected {len(rounds)}")
            t0 = time.perf_counter()
            embedder.embed(texts)
            alone = time.perf_counter() - t0
            runs.append(
                {
                    "ingest_s": ours,
                    "embed_alone_s": alone,
                    "ratio": alone / ours,
                    "embed_inside_ingest_s": recorder.seconds,
                    "inner_ratio": recorder.seconds / ours,
                }
            )
    ratios = [r["ratio"] for r in runs]
    med_ours = statistics.median(r["ingest_s"] for r in runs)
    med_alone = statistics.median(r["embed_alone_s"] for r in runs)
    return {
        "sessions": len(sessions),
        "messages": n_messages,
        "rounds": len(rounds),
        "texts_embedded": len(texts),
        "pairs": runs,
        "ingest_msgs_per_s": n_messages / med_ours,
        "embed_alone_msgs_per_s": n_messages / med_alone,
        "ratio_median": statistics.median(ratios),
        # The same run's embedding time over its wall time: immune to load changing between the A and B sides.
        "inner_ratio_median": statistics.median(r["inner_ratio"] for r in runs),
        "storage_s_inside_ingest_median": statistics.median(
            r["ingest_s"] - r["embed_inside_ingest_s"] for r in runs
        ),
        "storage_overhead_s_median": statistics.median(r["ingest_s"] - r["embed_alone_s"] for r in runs),
        "target_ratio": 0.95,  # issue 10: 600 rounds in one call >= 0.95x the embedder alone
    }
