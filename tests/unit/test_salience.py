"""Salience (retrieve/salience.py): bounded, decays with time since last seen, grows sublinearly with
reinforcement, and never depends on anything else."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.models import Fact
from graphrecall.retrieve.salience import recency, salience, strength

NOW = datetime(2025, 6, 1)
ages = st.floats(min_value=0.0, max_value=20_000.0, allow_nan=False)
counts = st.integers(min_value=1, max_value=10_000)
half_lives = st.floats(min_value=0.5, max_value=3650.0, allow_nan=False)


def fact(age_days: float, reinforcement: int) -> Fact:
    return Fact(id="f", text="t", last_seen=NOW - timedelta(days=age_days), reinforcement=reinforcement)


@given(age=ages, r=counts, half=half_lives)
def test_bounded(age: float, r: int, half: float) -> None:
    s = salience(fact(age, r), NOW, half)
    assert 0.0 <= s < 1.0


@given(a=ages, b=ages, r=counts, half=half_lives)
def test_non_increasing_in_time_since_last_seen(a: float, b: float, r: int, half: float) -> None:
    young, old = sorted((a, b))
    assert salience(fact(old, r), NOW, half) <= salience(fact(young, r), NOW, half)


@given(age=ages, a=counts, b=counts, half=half_lives)
def test_non_decreasing_in_reinforcement(age: float, a: int, b: int, half: float) -> None:
    few, many = sorted((a, b))
    assert salience(fact(age, few), NOW, half) <= salience(fact(age, many), NOW, half)


@given(r=st.integers(min_value=2, max_value=1_000))
def test_reinforcement_gains_shrink(r: int) -> None:
    # sublinear: each further observation adds less than the one before it
    before = strength(r, 2.0) - strength(r - 1, 2.0)
    after = strength(r + 1, 2.0) - strength(r, 2.0)
    assert 0.0 < after <= before


@given(age=ages, r=counts, a=half_lives, b=half_lives)
def test_a_longer_half_life_forgets_more_slowly(age: float, r: int, a: float, b: float) -> None:
    short, long = sorted((a, b))
    assert salience(fact(age, r), NOW, short) <= salience(fact(age, r), NOW, long)


def test_values_that_the_docs_quote() -> None:
    assert salience(fact(0, 1), NOW) == pytest.approx(1 / 3)
    assert salience(fact(90, 1), NOW) == pytest.approx(1 / 6)  # one half-life: half as salient
    assert salience(fact(0, 2), NOW) == pytest.approx(0.5)
    assert salience(fact(0, 8), NOW) == pytest.approx(0.8)


def test_dates_missing_or_in_the_future() -> None:
    assert recency(None, NOW, 90) == 1.0
    assert recency(NOW + timedelta(days=3), NOW, 90) == 1.0  # a future last_seen counts as now
    only_recorded = Fact(id="f", text="t", recorded_at=NOW - timedelta(days=180))
    assert salience(only_recorded, NOW) == pytest.approx(0.25 / 3)  # falls back on recorded_at
    with pytest.raises(ValueError, match="half_life_days"):
        recency(NOW, NOW, 0)
    with pytest.raises(ValueError, match="reinforcement_half"):
        strength(1, 0)
