"""K-fold cross-validation of retrieval settings over per-question scores (shared by LongMemEval and LoCoMo).

A setting chosen because it scored best on the questions it is then reported on looks better than it is. Here
each fold's setting is chosen on the other folds' questions (the training part) and scored on the fold's own
questions (held out), so the reported figure is what choosing by that metric is worth on unseen questions. The
in-sample figures (the defaults, and the best setting picked on all questions) are reported beside it, never
instead of it.

Everything works on cached per-question scores (``system -> metric -> value``), so adding a fold count or
dropping a candidate rescoring costs no ingest and no search. Folds are stratified by a group label (question
type, LoCoMo category) so every fold holds each type in about the same proportion; nothing is tuned per group.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.longmemeval import metrics

Scores = Mapping[str, float]


@dataclass(frozen=True)
class Item:
    """One question: its id, its stratum (question type / category) and each candidate system's scores."""

    id: str
    group: str
    scores: Mapping[str, Scores]  # system -> metric -> value


def stratified_folds(items: Sequence[tuple[str, str]], k: int, seed: int) -> list[list[str]]:
    """Split ``(id, group)`` pairs into ``k`` folds: a partition of the ids, fold sizes within one of each other,
    and each group spread so that its count in any two folds differs by at most one.

    Deterministic for a seed and independent of the input order (ids are sorted before the seeded shuffle).
    Groups are dealt one after the other onto the folds in a rotating order that continues across groups, which
    is what keeps both the fold sizes and each group's share balanced."""
    ids = [i for i, _ in items]
    if len(set(ids)) != len(ids):
        raise ValueError("item ids must be unique")
    if not 2 <= k <= len(ids):
        raise ValueError(f"folds must lie in 2..{len(ids)} (the number of questions), got {k}")
    rng = random.Random(seed)
    by_group: dict[str, list[str]] = defaultdict(list)
    for item_id, group in items:
        by_group[group].append(item_id)
    folds: list[list[str]] = [[] for _ in range(k)]
    slot = 0
    for group in sorted(by_group):
        members = sorted(by_group[group])
        rng.shuffle(members)
        for item_id in members:
            folds[slot % k].append(item_id)
            slot += 1
    return folds


def mean_of(items: Sequence[Item], system: str) -> dict[str, float]:
    """Mean of each metric of ``system`` over ``items`` (a metric missing for an item is left out of its mean)."""
    return metrics.mean_scores(it.scores[system] for it in items)


def select(items: Sequence[Item], candidates: Sequence[str], primary: str, tiebreak: str) -> str:
    """The candidate with the best mean ``primary`` over ``items``, ties broken by ``tiebreak``, then by the order
    of ``candidates`` (list the defaults first, so a tie keeps them)."""
    if not candidates:
        raise ValueError("no candidate systems to choose from")
    if not items:
        raise ValueError("cannot choose a system on no questions")

    def key(idx_name: tuple[int, str]) -> tuple[float, float, int]:
        idx, name = idx_name
        m = mean_of(items, name)
        # Rounded so that float noise in equal means does not decide; the earlier candidate wins a real tie.
        return (round(m.get(primary, 0.0), 12), round(m.get(tiebreak, 0.0), 12), -idx)

    return max(enumerate(candidates), key=key)[1]


@dataclass
class Fold:
    index: int
    n_train: int
    n_test: int
    chosen: str
    train: dict[str, float]  # the chosen system's mean on the training questions
    test: dict[str, float]  # ... and on the held-out questions


@dataclass
class CVResult:
    k: int
    seed: int
    primary: str
    tiebreak: str
    candidates: list[str]
    folds: list[Fold]
    held_out: dict[str, dict[str, float]]  # metric -> {mean, std, min, max} across the held-out folds
    pooled: dict[str, float]  # every question scored by the system its fold chose, pooled
    pooled_by_group: dict[str, dict[str, float]]  # group -> {"n": n, metric: value}
    in_sample: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> system, overall, by_group

    def as_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "seed": self.seed,
            "primary": self.primary,
            "tiebreak": self.tiebreak,
            "candidates": self.candidates,
            "folds": [f.__dict__ for f in self.folds],
            "held_out": self.held_out,
            "pooled": self.pooled,
            "pooled_by_group": self.pooled_by_group,
            "in_sample": self.in_sample,
        }


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def _by_group(items: Sequence[Item], system_of: Mapping[str, str]) -> dict[str, dict[str, float]]:
    grouped = metrics.by_group((it.group, it.scores[system_of[it.id]]) for it in items)
    return {g: {"n": float(n), **m} for g, (n, m) in grouped.items()}


def cross_validate(
    items: Sequence[Item],
    candidates: Sequence[str],
    *,
    k: int,
    seed: int,
    primary: str,
    tiebreak: str,
    default: str | None = None,
) -> CVResult:
    """Choose a candidate on each fold's training questions and score it on the fold's held-out questions.

    ``held_out`` is the mean and spread of the per-fold held-out means (what the issue's targets are stated
    in); ``pooled`` scores each question once, by its own fold's choice (per group too). ``in_sample`` gives, over
    all questions, the ``default`` system (the first candidate unless named) and the system that all questions
    together would pick."""
    missing = [c for c in candidates if any(c not in it.scores for it in items)]
    if missing:
        raise ValueError(f"systems without scores for every question: {missing}")
    by_id = {it.id: it for it in items}
    folds = stratified_folds([(it.id, it.group) for it in items], k, seed)
    results: list[Fold] = []
    chosen_for: dict[str, str] = {}
    for i, test_ids in enumerate(folds):
        test_set = set(test_ids)
        train = [it for it in items if it.id not in test_set]
        test = [by_id[x] for x in test_ids]
        best = select(train, candidates, primary, tiebreak)
        results.append(Fold(i, len(train), len(test), best, mean_of(train, best), mean_of(test, best)))
        chosen_for.update(dict.fromkeys(test_ids, best))
    metric_names = sorted({m for f in results for m in f.test})
    held_out = {
        m: _spread([f.test[m] for f in results if m in f.test])
        for m in metric_names
        if any(m in f.test for f in results)
    }
    pooled = metrics.mean_scores(it.scores[chosen_for[it.id]] for it in items)
    default = default or candidates[0]
    best_all = select(items, candidates, primary, tiebreak)
    in_sample = {
        label: {
            "system": system,
            "overall": mean_of(items, system),
            "by_group": _by_group(items, dict.fromkeys(by_id, system)),
        }
        for label, system in (("default", default), ("best_in_sample", best_all))
    }
    return CVResult(
        k=k,
        seed=seed,
        primary=primary,
        tiebreak=tiebreak,
        candidates=list(candidates),
        folds=results,
        held_out=held_out,
        pooled=pooled,
        pooled_by_group=_by_group(items, chosen_for),
        in_sample=in_sample,
    )


def render_markdown(cv: Mapping[str, Any], shown: Sequence[str], group_label: str = "type") -> str:
    """The cross-validated figures beside the in-sample ones, overall and per group, for the ``shown`` metrics.

    Takes ``CVResult.as_dict()`` (what the JSON reports hold), so a stored report renders the same."""
    default, best = cv["in_sample"]["default"], cv["in_sample"]["best_in_sample"]
    chosen = ", ".join(f"{f['index']}: {f['chosen']}" for f in cv["folds"])
    lines = [
        f"## Cross-validated ({cv['k']} folds, seed {cv['seed']}, stratified by {group_label})",
        "",
        f"Candidates: {', '.join(cv['candidates'])}. Each fold picks the candidate with the best mean "
        f"`{cv['primary']}` (ties: `{cv['tiebreak']}`, then the defaults) on the other folds and is scored on its "
        f"own questions. Chosen per fold: {chosen}. Best on all questions (in-sample): {best['system']}.",
        "",
        "| metric | held-out mean | std | min | max | in-sample default | in-sample best |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    nan = float("nan")
    for m in shown:
        h = cv["held_out"].get(m)
        if h is None:
            continue
        lines.append(
            f"| {m} | {h['mean']:.3f} | {h['std']:.3f} | {h['min']:.3f} | {h['max']:.3f} | "
            f"{default['overall'].get(m, nan):.3f} | {best['overall'].get(m, nan):.3f} |"
        )
    lines += [
        "",
        f"### Per {group_label}: held-out (each question scored by its fold's choice) / in-sample default / "
        "in-sample best",
        "",
        f"| {group_label} | n | " + " | ".join(shown) + " |",
        "|---|---:|" + "---:|" * len(shown),
    ]
    for g, pooled in cv["pooled_by_group"].items():
        d, b = default["by_group"].get(g, {}), best["by_group"].get(g, {})
        cells = [f"{pooled.get(m, nan):.3f} / {d.get(m, nan):.3f} / {b.get(m, nan):.3f}" for m in shown]
        lines.append(f"| {g} | {int(pooled['n'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
