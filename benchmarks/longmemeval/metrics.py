"""Retrieval metrics with LongMemEval's definitions, and their aggregation overall and per question type.

- ``recall_any@k``: 1 if any relevant item is in the top k.
- ``recall_all@k``: 1 if every relevant item is in the top k.
- ``ndcg_any@k``: binary-relevance nDCG; the ideal ranking puts all relevant items first. The discount follows the
  official implementation (rank 1 and rank 2 both weigh 1, rank i >= 2 weighs 1/log2(i)), so numbers are
  comparable with published LongMemEval retrieval results.

Session rankings are derived from round rankings: a session ranks where its best round ranks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence

Scores = dict[str, float]


def _discount(rank: int) -> float:
    return 1.0 / math.log2(max(rank, 2))


def dcg(relevances: Sequence[int], k: int) -> float:
    return sum(rel * _discount(i) for i, rel in enumerate(relevances[:k], start=1))


def recall_any(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    return 1.0 if set(ranked[:k]) & set(relevant) else 0.0


def recall_all(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    return 1.0 if set(relevant) <= set(ranked[:k]) else 0.0


def ndcg_any(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    rel = set(relevant)
    ideal = dcg([1] * min(len(rel), k), k)
    if ideal == 0:
        return 0.0
    return dcg([1 if item in rel else 0 for item in ranked[:k]], k) / ideal


def score(ranked: Sequence[str], relevant: Collection[str], ks: Iterable[int]) -> Scores:
    """All metrics at every k for one ranking, keyed ``recall_any@5`` etc."""
    out: Scores = {}
    for k in ks:
        out[f"recall_any@{k}"] = recall_any(ranked, relevant, k)
        out[f"recall_all@{k}"] = recall_all(ranked, relevant, k)
        out[f"ndcg_any@{k}"] = ndcg_any(ranked, relevant, k)
    return out


def sessions_from_rounds(ranked_rounds: Sequence[str], session_of: Mapping[str, str]) -> list[str]:
    """Sessions in the order of their best-ranked round."""
    seen: dict[str, None] = {}
    for rid in ranked_rounds:
        seen.setdefault(session_of[rid], None)
    return list(seen)


def first_rank(ranked: Sequence[str], relevant: Collection[str]) -> int | None:
    """1-based rank of the first relevant item, None when none was retrieved."""
    rel = set(relevant)
    return next((i for i, item in enumerate(ranked, start=1) if item in rel), None)


def mean_scores(rows: Iterable[Mapping[str, float]]) -> Scores:
    """Mean of each metric over the rows that have it (a metric undefined for a row, e.g. turn coverage of a
    question without evidence turns, is left out of that metric's mean rather than counted as 0)."""
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        for key, v in row.items():
            sums[key] += v
            counts[key] += 1
    return {key: v / counts[key] for key, v in sums.items()}


def by_group(rows: Iterable[tuple[str, Mapping[str, float]]]) -> dict[str, tuple[int, Scores]]:
    """Mean scores per group (e.g. question type), with the group size, groups sorted by name."""
    groups: dict[str, list[Mapping[str, float]]] = defaultdict(list)
    for group, row in rows:
        groups[group].append(row)
    return {g: (len(groups[g]), mean_scores(groups[g])) for g in sorted(groups)}
