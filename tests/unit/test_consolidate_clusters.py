"""extract/clusters.py: which facts a consolidation groups (no chains, entities respected, seeds first), and how
old sessions fall into windows; the LLM answers' lenient parsing."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from graphrecall.extract.clusters import (
    FactPoint,
    duplicate_clusters,
    same_text,
    seed_order,
    session_windows,
    summary_id,
)
from graphrecall.extract.schema import MergeDecision, PeriodSummaryAnswer


def point(
    fid: str, text: str, *, kind: str = "attribute", ents: tuple[str, ...] = (), r: int = 1
) -> FactPoint:
    return FactPoint(fid, text, kind, frozenset(ents), r)


def vectors(*angles_deg: float) -> np.ndarray:
    """Unit vectors in a plane: the cosine of two is the cosine of their angle difference."""
    a = np.radians(angles_deg)
    return np.stack([np.cos(a), np.sin(a)], axis=1)


def test_clusters_are_stars_around_a_seed_not_chains() -> None:
    # a ~ b (cos 20 deg = 0.94), b ~ c (0.94), a vs c 40 deg (0.77): with a threshold of 0.9, c is not pulled
    # into a's cluster through b
    facts = [point("a", "one", r=3), point("b", "two"), point("c", "three")]
    assert duplicate_clusters(facts, vectors(0, 20, 40), 0.9) == [[0, 1]]


def test_only_the_same_kind_and_a_shared_entity_or_none_link() -> None:
    same = vectors(0, 0, 0, 0, 0)
    facts = [
        point("seed", "x", ents=("berlin",), r=5),
        point("other_kind", "x", kind="plan", ents=("berlin",)),
        point("shares", "x", ents=("berlin", "germany")),
        point("disjoint", "x", ents=("germany",)),
        point("none", "x"),
    ]
    assert duplicate_clusters(facts, same, 0.5) == [[0, 2]]
    both_none = [point("a", "x"), point("b", "y")]
    assert duplicate_clusters(both_none, vectors(0, 0), 0.5) == [[0, 1]]


def test_the_same_normalized_text_links_whatever_the_vectors() -> None:
    facts = [point("a", "The user is vegetarian."), point("b", "the User is vegetarian")]
    assert duplicate_clusters(facts, vectors(0, 90), 0.99) == [[0, 1]]
    assert same_text(facts) and not same_text([*facts, point("c", "The user eats fish.")])


def test_seeds_are_the_most_reinforced_then_the_longest() -> None:
    facts = [point("short", "ab"), point("long", "abcdef"), point("strong", "a", r=2)]
    assert [facts[i].id for i in seed_order(facts)] == ["strong", "long", "short"]


def test_windows_are_weeks_and_only_those_that_ended() -> None:
    sessions = [
        ("s3", datetime(2024, 1, 14, 23)),  # Sunday: still the week of Monday 2024-01-08
        ("s1", datetime(2024, 1, 8, 9)),
        ("s4", datetime(2024, 1, 15, 0)),  # Monday: the next week
        ("s5", datetime(2024, 2, 1)),
    ]
    windows = session_windows(sessions, window_days=7, ended_by=datetime(2024, 1, 25))
    assert [(w.start, w.session_ids) for w in windows] == [
        (datetime(2024, 1, 8), ("s1", "s3")),
        (datetime(2024, 1, 15), ("s4",)),
    ]  # the week of s5 has not ended by the 25th
    assert summary_id(windows[0]) == "fsum_20240108_7d"
    with pytest.raises(ValueError):
        session_windows(sessions, window_days=0, ended_by=datetime(2024, 1, 25))


def test_model_answers_are_read_leniently() -> None:
    d = MergeDecision.model_validate({"decision": " merge ", "keep": "F2", "text": "null"})
    assert (d.decision, d.keep, d.text) == ("MERGE", "F2", None)
    assert MergeDecision.model_validate({"decision": "separate", "keep": ""}).keep is None
    assert (
        PeriodSummaryAnswer.model_validate({"summary": "  The user\n moved. "}).summary == "The user moved."
    )
    assert PeriodSummaryAnswer.model_validate({"summary": None}).summary == ""
