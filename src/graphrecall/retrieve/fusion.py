"""Fusion: the one place where ranked lists become one.

``fuse`` is the rank fusion every caller uses: the retriever (its generators' lists, and the first fusion that
picks the pool its user-side and recency lists re-rank: ``retrieve.lists``), extracted memory (a fact's or an
event's vector and BM25 lists: ``retrieve.graph``) and the Reader (the hits of a question and of its
sub-questions: ``read.gather``). Callers choose the method and RRF's damping ``k``; the code is this one.
Reciprocal rank fusion (default) needs no score calibration between generators (BM25 scores and cosine
similarities live on different scales); weighted min-max fusion lets a deployment lean on one signal's scores.

``interleave`` is not a fusion: it merges lists whose scores are already on one scale (hits of several kinds, each
list fused on the RRF scale: ``recall``), by score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

# A ranked list: (id, score), best first. Every generator returns one; fusion reads any sequence of pairs.
Ranked = list[tuple[str, float]]
Scored = Sequence[tuple[str, float]]
Method = Literal["rrf", "weighted"]


def fuse(
    lists: Mapping[str, Scored],
    weights: Mapping[str, float] | None = None,
    *,
    method: Method = "rrf",
    k: int = 60,
) -> dict[str, float]:
    """Item -> fused score over ``lists``, read in their order (float sums depend on it), each list weighted by
    ``weights`` (a list missing from it weighs 1; weight 0 drops the list, candidates and all). ``k``: RRF's
    damping (unused by weighted fusion)."""
    if method == "rrf":
        return rrf(lists, weights, k)
    return weighted(lists, weights)


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


def interleave(lists: Mapping[str, Scored]) -> list[tuple[str, str, float]]:
    """(list name, id, score) of every item of ``lists``, best score first, ties by list name then id. For lists
    whose scores already share one scale (a fact hit and a round hit both carry RRF scores), so that ranks would
    throw away what the scores say."""
    items = [(name, item, s) for name, ranked in lists.items() for item, s in ranked]
    return sorted(items, key=lambda x: (-x[2], x[0], x[1]))


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
