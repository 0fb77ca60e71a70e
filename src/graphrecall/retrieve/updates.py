"""Newer statements of the same thing first: the latest version of an answer that changed.

Why: in raw rounds nothing says that "we painted the cabinets navy" (November) replaces "we chose white oak
cabinets" (August); both match "what colour are my kitchen cabinets?" about equally, and the older one often ranks
first. Extraction records such supersession when an LLM is configured; without one, the retriever has only the
rounds. A recency list over all candidates (``RetrievalConfig.recency_weight``) fixed many of these but also lifted
newer rounds that were merely related (docs/benchmarks.md). This is narrower: among the best ``top`` hits, a round
moves above a higher-ranked one only if it is newer **and** says nearly the same thing (the cosine of their
user-side vectors is at least ``min_similarity``): two statements of one fact, not two facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from graphrecall.embed.base import normalize_rows

Ranked = list[tuple[str, float]]


def newer_first(
    ranked: Sequence[tuple[str, float]],
    dates: Mapping[str, datetime],
    vectors: Mapping[str, Any],
    *,
    top: int,
    min_similarity: float,
) -> Ranked:
    """``ranked`` with, within its first ``top``, each round preceded by the newest round below it that restates it.

    Rounds keep the scores of the positions they land on, so scores still descend; rounds without a date or a
    vector never move and are never moved over. The rest of the list is unchanged."""
    head = [rid for rid, _ in ranked[:top]]
    unit = {rid: normalize_rows(vectors[rid])[0] for rid in head if rid in vectors and rid in dates}
    i = 0
    while i < len(head):
        here = head[i]
        if here in unit:
            later = [
                rid
                for rid in head[i + 1 :]
                if rid in unit
                and dates[rid] > dates[here]
                and float(unit[rid] @ unit[here]) >= min_similarity
            ]
            if later:
                newest = max(later, key=lambda rid: (dates[rid], rid))
                head.remove(newest)
                head.insert(i, newest)
                continue  # the round now at i may itself be restated by a newer one below it
        i += 1
    scores = [s for _, s in ranked[:top]]
    return list(zip(head, scores, strict=True)) + list(ranked[top:])


def above_background(vectors: Mapping[str, Any], contrast: float) -> float:
    """The cosine ``contrast`` standard deviations above the mean cosine between two of these rounds: what two
    rounds of this scope that merely share its person, style and topics score, plus a margin (-1.0, which every
    pair passes, for fewer than three rounds)."""
    if len(vectors) < 3:
        return -1.0
    unit = normalize_rows(
        np.vstack([np.asarray(v, dtype=np.float32).reshape(1, -1) for v in vectors.values()])
    )
    sims = unit @ unit.T
    pairs = sims[np.triu_indices(len(unit), k=1)]
    return float(pairs.mean() + contrast * pairs.std())
