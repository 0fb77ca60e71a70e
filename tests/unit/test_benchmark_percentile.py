"""The benchmarks' one percentile definition (``benchmarks/percentile.py``), against values worked out by hand.

Type 7: sort, take the fractional rank h = p / 100 * (n - 1) (0-based), interpolate between the values at floor(h)
and floor(h) + 1.
"""

from __future__ import annotations

import statistics

import pytest
from benchmarks.percentile import percentile, percentiles


def test_one_value_is_every_percentile() -> None:
    assert percentiles([7.0], [0, 50, 99, 100]) == [7.0, 7.0, 7.0, 7.0]


def test_two_values_interpolate_between_them() -> None:
    # h = 0.95 * 1 = 0.95: 10 + 0.95 * (20 - 10)
    assert percentile([20.0, 10.0], 95) == pytest.approx(19.5)
    assert percentile([20.0, 10.0], 50) == pytest.approx(15.0)


def test_an_even_sample_has_the_mean_of_its_middle_pair_as_p50() -> None:
    # 1, 2, 3, 4: h = 1.5 -> 2 + 0.5 * (3 - 2)
    assert percentile([4, 1, 3, 2], 50) == pytest.approx(2.5)
    # h = 0.25 * 3 = 0.75 -> 1 + 0.75 * (2 - 1)
    assert percentile([4, 1, 3, 2], 25) == pytest.approx(1.75)


def test_the_ends_are_the_minimum_and_the_maximum() -> None:
    assert percentiles([5, 3, 9, 1], [0, 100]) == [1.0, 9.0]


def test_p99_of_forty_samples_is_not_the_maximum() -> None:
    """The write-path benchmarks time 40 turns: nearest-rank definitions returned the maximum as their p99."""
    sample = [float(i) for i in range(1, 41)]  # 1..40
    # h = 0.99 * 39 = 38.61 -> value 39 (rank 38) + 0.61 * (40 - 39)
    assert percentile(sample, 99) == pytest.approx(39.61)
    # h = 0.95 * 39 = 37.05 -> 38 + 0.05 * 1
    assert percentile(sample, 95) == pytest.approx(38.05)


def test_a_skewed_sample() -> None:
    sample = [1.0, 1.0, 2.0, 2.0, 100.0]
    # h = 0.9 * 4 = 3.6 -> 2 + 0.6 * (100 - 2)
    assert percentile(sample, 90) == pytest.approx(60.8)
    assert percentile(sample, 50) == pytest.approx(2.0)


def test_ties_and_generators() -> None:
    assert percentile((x for x in [3.0, 3.0, 3.0]), 75) == 3.0


@pytest.mark.parametrize(
    "sample",
    [[1.0], [2.0, 1.0], [5.0, 1.0, 4.0], [0.3, 9.1, 2.2, 7.7, 4.0, 4.0], [float(i % 7) for i in range(51)]],
)
def test_p50_is_the_median_the_reports_print_elsewhere(sample: list[float]) -> None:
    assert percentile(sample, 50) == pytest.approx(statistics.median(sample))


def test_no_values_is_an_error_not_a_zero() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


@pytest.mark.parametrize("p", [-1, 100.5])
def test_a_percentile_outside_0_to_100_is_an_error(p: float) -> None:
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0, 2.0], p)
