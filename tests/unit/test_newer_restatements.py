"""``retrieve.updates.newer_first``: within the best hits, a newer round that restates an older one goes above it;
nothing else moves."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.retrieve.updates import newer_first

DAY0 = datetime(2024, 1, 1)


def vec(*xs: float) -> np.ndarray:
    return np.asarray(xs, dtype=np.float32)


def test_the_newer_statement_of_the_same_thing_goes_first() -> None:
    ranked = [("oak", 0.9), ("walk", 0.8), ("navy", 0.7), ("far", 0.1)]
    dates = {"oak": DAY0, "walk": DAY0 + timedelta(days=1), "navy": DAY0 + timedelta(days=90), "far": DAY0}
    vectors = {"oak": vec(1, 0.1, 0), "navy": vec(1, 0, 0.1), "walk": vec(0, 1, 0), "far": vec(1, 0, 0)}
    out = newer_first(ranked, dates, vectors, top=3, min_similarity=0.6)
    # "walk" is newer than "oak" but says something else: it does not move; "navy" restates "oak": it goes above
    assert [rid for rid, _ in out] == ["navy", "oak", "walk", "far"]
    assert [s for _, s in out] == [0.9, 0.8, 0.7, 0.1]  # scores stay with positions: still descending


def test_an_older_restatement_stays_below_and_dissimilar_rounds_never_move() -> None:
    ranked = [("new", 0.9), ("old", 0.8)]
    dates = {"new": DAY0 + timedelta(days=9), "old": DAY0}
    same = {"new": vec(1, 0), "old": vec(1, 0)}
    assert newer_first(ranked, dates, same, top=2, min_similarity=0.5) == ranked
    ranked2 = [("old", 0.9), ("new", 0.8)]
    apart = {"new": vec(1, 0), "old": vec(0, 1)}
    assert newer_first(ranked2, dates, apart, top=2, min_similarity=0.5) == ranked2


def test_a_chain_of_restatements_comes_out_newest_first() -> None:
    ranked = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    dates = {"a": DAY0, "b": DAY0 + timedelta(days=1), "c": DAY0 + timedelta(days=2)}
    vectors = {k: vec(1, 0) for k in "abc"}
    assert [r for r, _ in newer_first(ranked, dates, vectors, top=3, min_similarity=0.9)] == ["c", "b", "a"]


def test_rounds_below_top_or_without_a_vector_stay_where_they_are() -> None:
    ranked = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    dates = {"a": DAY0, "b": DAY0 + timedelta(days=1), "c": DAY0 + timedelta(days=2)}
    assert newer_first(ranked, dates, {"a": vec(1, 0), "c": vec(1, 0)}, top=2, min_similarity=0.5) == ranked
    assert (
        newer_first(ranked, dates, {"a": vec(1, 0), "c": vec(1, 0)}, top=3, min_similarity=0.5)[0][0] == "c"
    )


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[list[tuple[str, float]], dict[str, datetime], dict[str, np.ndarray], int, float]:
    n = draw(st.integers(0, 9))
    ids = [f"r{i}" for i in range(n)]
    scores = sorted(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)), reverse=True)
    dates = {rid: DAY0 + timedelta(days=draw(st.integers(0, 5))) for rid in ids}
    vectors = {
        rid: vec(*draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=3, max_size=3)))
        for rid in ids
        if draw(st.booleans())
    }
    return (
        list(zip(ids, scores, strict=True)),
        dates,
        vectors,
        draw(st.integers(2, 6)),
        draw(st.floats(-1, 1)),
    )


@given(cases())
def test_it_only_permutes_the_head_and_never_puts_a_round_below_an_older_restatement(
    case: tuple[list[tuple[str, float]], dict[str, datetime], dict[str, np.ndarray], int, float],
) -> None:
    ranked, dates, vectors, top, tau = case
    out = newer_first(ranked, dates, vectors, top=top, min_similarity=tau)
    assert [s for _, s in out] == [s for _, s in ranked]  # the scores, position by position
    assert sorted(r for r, _ in out[:top]) == sorted(r for r, _ in ranked[:top]) and out[top:] == ranked[top:]
    head = [r for r, _ in out[:top]]
    for i, a in enumerate(head):
        for b in head[i + 1 :]:
            if a in vectors and b in vectors and dates[b] > dates[a]:
                va, vb = vectors[a], vectors[b]
                na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
                if na and nb:
                    assert (
                        float(va @ vb) / (na * nb) < tau + 1e-6
                    )  # else b, newer and alike, would be above a
