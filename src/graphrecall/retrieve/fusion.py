"""Rank fusion: reciprocal rank fusion (default) and weighted min-max score fusion.

RRF needs no score calibration between generators (BM25 scores and cosine similarities live on different scales),
which is why it is the default; weights let a deployment lean on one signal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# A ranked list: (id, score), best first. Every generator returns one; fusion reads any sequence of pairs.
Ranked = list[tuple[str, float]]
Scored = Sequence[tuple[str, float]]


def rrf(
    lists: Mapping[str, Scored], weights: Mapping[str, float] | None = None, k: int = 60
) -> dict[str, float]:
    """sum_over_lists weight / (k + rank), rank starting at 1. Items missing from a list get nothing from it."""
    out: dict[str, float] = {}
    for name, ranked in lists.items():
        w = 1.0 if weights is None else weights.get(name, 1.0)
        if w == 0:
            continue
        for rank, (item, _) in enumerate(ranked, start=1):
            out[item] = out.get(item, 0.0) + w / (k + rank)
    return out


def minmax(ranked: Scored) -> dict[str, float]:
    """Scores scaled to [0, 1] within one list; a constant list maps to 1.0."""
    if not ranked:
        return {}
    scores = [s for _, s in ranked]
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return {item: 1.0 for item, _ in ranked}
    return {item: (s - lo) / (hi - lo) for item, s in ranked}


def weighted(lists: Mapping[str, Scored], weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """sum_over_lists weight * minmax(score). Items missing from a list get 0 from it."""
    out: dict[str, float] = {}
    for name, ranked in lists.items():
        w = 1.0 if weights is None else weights.get(name, 1.0)
        if w == 0:  # as in rrf: a muted list contributes no candidates, not zero-score ones
            continue
        for item, s in minmax(ranked).items():
            out[item] = out.get(item, 0.0) + w * s
    return out


def order(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """Descending by score, ties broken by id so results are deterministic."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


LEXICAL_LISTS: tuple[str, ...] = ("bm25", "bm25_user")


def scale_for_store_size(
    weights: Mapping[str, float], rounds: int, full_at: int, names: Sequence[str] = LEXICAL_LISTS
) -> dict[str, float]:
    """``weights`` with the lists in ``names`` scaled by ``rounds / full_at`` when the scope holds fewer than
    ``full_at`` rounds.

    Why: BM25's IDF is only as good as the collection it is counted in. In a scope of a few sessions, a word that two
    rounds share is "rare" whatever it means, so the lexical lists rank a round first on one incidental shared word
    ("live", "work", "name") as confidently as on the answer's own words, and rank fusion, which sees ranks and not
    scores, gives that first place full weight. The dense list ranks every round of a small scope on meaning. As
    the scope grows, IDF becomes informative and the weights return to those configured (tuned on ~500-round
    LongMemEval haystacks, which this leaves untouched)."""
    if full_at <= 0 or rounds >= full_at:
        return dict(weights)
    f = max(rounds, 0) / full_at
    out = dict(weights)
    for name in names:  # a list missing from ``weights`` weighs 1.0 in fusion, so it is scaled from 1.0
        out[name] = out.get(name, 1.0) * f
    return out
