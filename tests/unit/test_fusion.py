"""Rank fusion: reciprocal rank fusion and weighted min-max fusion, as properties over arbitrary ranked lists."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.retrieve.fusion import fuse, interleave, minmax, order, rrf, scale_for_store_size, weighted

Ranked = list[tuple[str, float]]

item_ids = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
scores = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@st.composite
def ranked_list(draw: st.DrawFn, min_size: int = 0) -> Ranked:
    """A generator's output: unique ids, descending scores."""
    ids = draw(st.lists(item_ids, unique=True, min_size=min_size, max_size=12))
    vals = sorted(draw(st.lists(scores, min_size=len(ids), max_size=len(ids))), reverse=True)
    return list(zip(ids, vals, strict=True))


lists_by_name = st.dictionaries(
    st.sampled_from(["vector", "bm25", "fact", "event"]), ranked_list(), max_size=4
)
weights_by_name = st.dictionaries(
    st.sampled_from(["vector", "bm25", "fact", "event"]), st.floats(min_value=0, max_value=5), max_size=4
)
FUSIONS = {"rrf": lambda lists, w: rrf(lists, w), "weighted": weighted}


def test_rrf_is_the_sum_of_reciprocal_ranks() -> None:
    fused = rrf({"a": [("x", 9.0), ("y", 1.0)], "b": [("y", 0.3)]}, k=60)
    assert fused["x"] == pytest.approx(1 / 61)
    assert fused["y"] == pytest.approx(1 / 62 + 1 / 61)


def test_rrf_ignores_raw_scores_and_uses_only_ranks() -> None:
    a = rrf({"v": [("x", 0.99), ("y", 0.98)], "b": [("y", 120.0), ("x", 0.001)]})
    b = rrf({"v": [("x", 5.0), ("y", -3.0)], "b": [("y", 1.0), ("x", 0.5)]})
    assert a == b


def test_weighted_fusion_scales_each_list_to_unit_range() -> None:
    fused = weighted({"v": [("x", 0.9), ("y", 0.5), ("z", 0.1)], "b": [("z", 30.0), ("x", 10.0)]})
    assert fused["x"] == pytest.approx(1.0 + 0.0)
    assert fused["y"] == pytest.approx(0.5)
    assert fused["z"] == pytest.approx(0.0 + 1.0)


@pytest.mark.parametrize("fuse", FUSIONS.values(), ids=FUSIONS.keys())
@given(lists=lists_by_name, w=weights_by_name)
def test_fused_scores_are_never_negative(fuse: object, lists: dict[str, Ranked], w: dict[str, float]) -> None:
    fused = fuse(lists, w)  # type: ignore[operator]
    assert all(s >= 0 for s in fused.values())
    assert set(fused) <= {i for lst in lists.values() for i, _ in lst}


@pytest.mark.parametrize("fuse", FUSIONS.values(), ids=FUSIONS.keys())
@given(
    lists=st.dictionaries(st.sampled_from(["vector", "bm25", "fact"]), ranked_list(), min_size=1, max_size=3),
    w=weights_by_name,
    top_score=st.floats(min_value=1e6 + 1, max_value=1e7),
)
def test_an_item_first_in_every_list_gets_the_top_fused_score(
    fuse: object, lists: dict[str, Ranked], w: dict[str, float], top_score: float
) -> None:
    champion = "CHAMPION"
    boosted = {name: [(champion, top_score), *lst] for name, lst in lists.items()}
    fused = fuse(boosted, w)  # type: ignore[operator]
    if champion in fused:
        assert fused[champion] >= max(fused.values())
    if any(w.get(name, 1.0) > 0 for name in boosted):
        assert order(fused)[0][1] == fused[champion]


@pytest.mark.parametrize("fuse", FUSIONS.values(), ids=FUSIONS.keys())
@given(lists=lists_by_name, dropped=ranked_list(min_size=1), w=weights_by_name)
def test_a_zero_weight_drops_its_list(
    fuse: object, lists: dict[str, Ranked], dropped: Ranked, w: dict[str, float]
) -> None:
    without = fuse(lists, w)  # type: ignore[operator]
    with_zero = fuse({**lists, "muted": dropped}, {**w, "muted": 0.0})  # type: ignore[operator]
    assert with_zero == without


@given(st.dictionaries(item_ids, st.sampled_from([0.0, 0.5, 1.0, 2.0]), max_size=20), st.randoms())
def test_order_is_descending_and_independent_of_insertion_order(
    fused: dict[str, float], rnd: random.Random
) -> None:
    items = list(fused.items())
    rnd.shuffle(items)
    ranked = order(fused)
    assert ranked == order(dict(items))
    assert [s for _, s in ranked] == sorted(fused.values(), reverse=True)
    for (a, sa), (b, sb) in itertools.pairwise(ranked):
        assert sa > sb or (sa == sb and a < b)


@given(ranked_list())
def test_minmax_maps_into_the_unit_interval(ranked: Ranked) -> None:
    scaled = minmax(ranked)
    assert set(scaled) == {i for i, _ in ranked}
    assert all(0.0 <= s <= 1.0 for s in scaled.values())
    if ranked:
        assert scaled[ranked[0][0]] == 1.0


# -- lexical weight in small scopes --------------------------------------------------------------------------------


def test_small_scopes_scale_the_lexical_lists_in_proportion_to_their_size() -> None:
    w = {"vector": 1.0, "bm25": 0.7, "bm25_user": 1.0, "fact": 1.0}
    scaled = scale_for_store_size(w, rounds=15, full_at=60)
    assert scaled == pytest.approx({"vector": 1.0, "bm25": 0.7 * 0.25, "bm25_user": 0.25, "fact": 1.0})
    assert w["bm25"] == 0.7  # the caller's weights are not modified


@pytest.mark.parametrize(("rounds", "full_at"), [(60, 60), (500, 60), (5, 0)])
def test_scopes_at_full_size_or_with_scaling_off_keep_their_weights(rounds: int, full_at: int) -> None:
    w = {"vector": 1.0, "bm25": 0.7, "bm25_user": 1.0}
    assert scale_for_store_size(w, rounds, full_at) == w


def test_a_lexical_list_missing_from_the_weights_is_scaled_from_its_implicit_weight_of_one() -> None:
    assert scale_for_store_size({"vector": 1.0}, rounds=30, full_at=60) == {
        "vector": 1.0,
        "bm25": 0.5,
        "bm25_user": 0.5,
    }


def test_a_muted_lexical_list_stays_muted() -> None:
    assert scale_for_store_size({"bm25": 0.0, "bm25_user": 1.0}, 10, 60)["bm25"] == 0.0


# -- one fusion function, one interleaving ----------------------------------------------------------------------------


@given(lists=lists_by_name, w=weights_by_name, k=st.integers(min_value=1, max_value=100))
def test_fuse_is_the_named_method(lists: dict[str, Ranked], w: dict[str, float], k: int) -> None:
    assert fuse(lists, w, method="rrf", k=k) == rrf(lists, w, k)
    assert fuse(lists, w, method="weighted", k=k) == weighted(lists, w)


@given(st.dictionaries(st.sampled_from(["round", "fact", "event"]), ranked_list(), max_size=3))
def test_interleave_keeps_every_item_once_best_score_first_ties_by_list_then_id(
    lists: dict[str, Ranked],
) -> None:
    merged = interleave(lists)
    assert sorted(merged) == sorted((name, item, s) for name, lst in lists.items() for item, s in lst)
    for (na, a, sa), (nb, b, sb) in itertools.pairwise(merged):
        assert sa > sb or (sa == sb and (na, a) < (nb, b))
