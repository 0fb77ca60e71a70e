"""Cross-validation of retrieval settings (benchmarks/longmemeval/cv.py): folds, selection, held-out scoring."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.longmemeval import cv

GROUPS = st.sampled_from(["multi", "temporal", "single", "update"])


@st.composite
def labelled_ids(draw: st.DrawFn) -> tuple[list[tuple[str, str]], int]:
    n = draw(st.integers(min_value=2, max_value=60))
    groups = draw(st.lists(GROUPS, min_size=n, max_size=n))
    k = draw(st.integers(min_value=2, max_value=min(n, 10)))
    return [(f"q{i}", g) for i, g in enumerate(groups)], k


@given(labelled_ids(), st.integers(0, 2**16))
def test_folds_partition_the_questions_with_balanced_sizes_and_groups(
    case: tuple[list[tuple[str, str]], int], seed: int
) -> None:
    items, k = case
    folds = cv.stratified_folds(items, k, seed)
    assert len(folds) == k
    flat = [x for f in folds for x in f]
    assert sorted(flat) == sorted(i for i, _ in items)  # every question in exactly one fold
    sizes = [len(f) for f in folds]
    assert max(sizes) - min(sizes) <= 1
    group_of = dict(items)
    for g in set(group_of.values()):
        counts = [sum(group_of[x] == g for x in f) for f in folds]
        assert max(counts) - min(counts) <= 1, (g, counts)


@given(labelled_ids(), st.integers(0, 2**16), st.randoms())
def test_folds_depend_on_the_seed_only_not_on_the_input_order(
    case: tuple[list[tuple[str, str]], int], seed: int, rnd: object
) -> None:
    items, k = case
    shuffled = list(items)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert cv.stratified_folds(items, k, seed) == cv.stratified_folds(shuffled, k, seed)


def test_different_seeds_give_different_folds() -> None:
    items = [(f"q{i}", "t") for i in range(40)]
    assert cv.stratified_folds(items, 5, 0) != cv.stratified_folds(items, 5, 1)


@pytest.mark.parametrize("k", [0, 1, 4])
def test_fold_counts_outside_two_to_n_are_refused(k: int) -> None:
    with pytest.raises(ValueError, match="folds"):
        cv.stratified_folds([("a", "t"), ("b", "t"), ("c", "t")], k, 0)


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        cv.stratified_folds([("a", "t"), ("a", "u")], 2, 0)


def _item(i: int, group: str = "t", **systems: tuple[float, float]) -> cv.Item:
    return cv.Item(f"q{i}", group, {s: {"p": p, "t": t} for s, (p, t) in systems.items()})


def test_select_takes_the_best_primary_then_the_tiebreak_then_the_first_listed() -> None:
    items = [_item(0, a=(1.0, 0.0), b=(1.0, 1.0), c=(0.5, 1.0))]
    assert cv.select(items, ["a", "b", "c"], "p", "t") == "b"  # primary tied: tiebreak decides
    same = [_item(0, a=(1.0, 1.0), b=(1.0, 1.0))]
    assert cv.select(same, ["a", "b"], "p", "t") == "a"
    assert cv.select(same, ["b", "a"], "p", "t") == "b"
    assert cv.select([_item(0, a=(0.2, 1.0), b=(0.3, 0.0))], ["a", "b"], "p", "t") == "b"


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=20))
def test_the_selected_system_has_the_highest_mean_primary(rows: list[tuple[float, float, float]]) -> None:
    items = [_item(i, a=(a, 0.0), b=(b, 0.0), c=(c, 0.0)) for i, (a, b, c) in enumerate(rows)]
    chosen = cv.select(items, ["a", "b", "c"], "p", "t")
    means = {s: cv.mean_of(items, s)["p"] for s in "abc"}
    assert means[chosen] >= max(means.values()) - 1e-9


def test_a_setting_that_only_wins_by_chance_is_not_credited_with_its_in_sample_score() -> None:
    # "lucky" is perfect on exactly one question per type and useless elsewhere; "steady" scores 0.5 everywhere.
    # In sample, picking per data would overstate; held out, each fold's choice is scored on unseen questions.
    items = []
    for i in range(20):
        lucky = 1.0 if i % 10 == 0 else 0.45
        items.append(cv.Item(f"q{i}", "t", {"steady": {"p": 0.5, "t": 0}, "lucky": {"p": lucky, "t": 0}}))
    res = cv.cross_validate(items, ["steady", "lucky"], k=5, seed=3, primary="p", tiebreak="t")
    assert res.in_sample["default"]["system"] == "steady"
    assert res.in_sample["default"]["overall"]["p"] == pytest.approx(0.5)
    # Mean "lucky" = (2 * 1.0 + 18 * 0.45) / 20 = 0.505 > 0.5, so in-sample the best is "lucky".
    assert res.in_sample["best_in_sample"]["system"] == "lucky"
    # The folds holding a lucky question train without it, so they choose "steady" and score 0.5 there.
    assert res.held_out["p"]["mean"] < res.in_sample["best_in_sample"]["overall"]["p"]
    assert {f.chosen for f in res.folds} == {"steady", "lucky"}


@given(labelled_ids(), st.integers(0, 1000), st.data())
@settings(max_examples=40)
def test_held_out_figures_score_each_question_once_by_its_own_fold_choice(
    case: tuple[list[tuple[str, str]], int], seed: int, draw: st.DataObject
) -> None:
    ids, k = case
    values = st.floats(0, 1)
    items = [
        cv.Item(i, g, {s: {"p": draw.draw(values), "t": draw.draw(values)} for s in ("x", "y")})
        for i, g in ids
    ]
    res = cv.cross_validate(items, ["x", "y"], k=k, seed=seed, primary="p", tiebreak="t")
    assert sum(f.n_test for f in res.folds) == len(items)
    assert all(f.n_train + f.n_test == len(items) for f in res.folds)
    by_id = {it.id: it for it in items}
    folds = cv.stratified_folds(ids, k, seed)
    pooled = [by_id[x].scores[f.chosen]["p"] for f, fold in zip(res.folds, folds, strict=True) for x in fold]
    assert res.pooled["p"] == pytest.approx(sum(pooled) / len(pooled))
    for f, fold in zip(res.folds, folds, strict=True):
        train = [it for it in items if it.id not in set(fold)]
        assert f.chosen == cv.select(train, ["x", "y"], "p", "t")
        assert f.test["p"] == pytest.approx(sum(by_id[x].scores[f.chosen]["p"] for x in fold) / len(fold))
    spread = res.held_out["p"]
    assert spread["min"] - 1e-9 <= spread["mean"] <= spread["max"] + 1e-9
    assert sum(int(g["n"]) for g in res.pooled_by_group.values()) == len(items)
    assert Counter(g for _, g in ids) == {g: int(m["n"]) for g, m in res.pooled_by_group.items()}


def test_a_candidate_without_scores_is_named() -> None:
    items = [_item(0, a=(1.0, 0.0)), _item(1, a=(1.0, 0.0), b=(0.0, 0.0))]
    with pytest.raises(ValueError, match="b"):
        cv.cross_validate(items, ["a", "b"], k=2, seed=0, primary="p", tiebreak="t")


def test_the_report_puts_held_out_beside_in_sample_per_group() -> None:
    items = [_item(i, "even" if i % 2 else "odd", a=(i % 3 / 2, 1.0), b=(0.4, 0.0)) for i in range(12)]
    res = cv.cross_validate(items, ["a", "b"], k=3, seed=1, primary="p", tiebreak="t")
    md = cv.render_markdown(res.as_dict(), ["p"], group_label="kind")
    assert "| p | " in md and "in-sample default" in md
    assert "| even | 6 |" in md and "| odd | 6 |" in md
