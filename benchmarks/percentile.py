"""The one percentile every benchmark reports: linear interpolation between the two nearest ranks.

Why one definition: a p99 from one report and a p99 from another must be the same statistic, or comparing them
compares definitions. Before this module the benchmarks used four (numpy's default, ``sorted[int(q * n)]``, which
is also the upper median ``sorted[n // 2]``, ``sorted[round(q * (n - 1))]`` and ``sorted[int(q * (n - 1))]``), and
at the sample sizes the write-path benchmarks use they differ: over 40 turns two of them give the maximum as p99.

Why this definition (Hyndman and Fan's type 7: numpy's default, ``statistics.quantiles(method="inclusive")``,
spreadsheets' PERCENTILE.INC): the value at fractional rank ``p / 100 * (n - 1)`` of the sorted sample, interpolated
between its two neighbours.

- Its p50 is the median ``statistics.median`` gives, so a report's "p50" and its "median" agree.
- Most figures already recorded in docs/benchmarks.md (the HTTP load test, the index and store-size latencies, the
  write log) were computed with it, so the fewest figures had to be re-stated.
- It moves continuously with the data; nearest-rank definitions jump from one sample to the next, and over fewer
  than 100 samples they make p99 the maximum, a figure the reports already show in its own column.

What to keep in mind reading one: the value need not be a latency that was observed, and a tail percentile of a
small sample rests on its top few values (every report gives the sample size next to it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


def percentiles(values: Iterable[float], ps: Sequence[float]) -> list[float]:
    """The ``ps``-th percentiles (each in 0..100) of ``values``, in the order asked.

    A percentile of no values is undefined, so an empty sample is an error (a caller that has a figure to print
    for "no requests" says so itself) rather than a 0 that would read as a measurement.
    """
    a = np.asarray(list(values), dtype=np.float64)
    if a.size == 0:
        raise ValueError("a percentile of no values is undefined")
    if any(not 0 <= p <= 100 for p in ps):
        raise ValueError(f"percentiles lie in 0..100, got {list(ps)}")
    return [float(x) for x in np.percentile(a, list(ps), method="linear")]


def percentile(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile (0..100) of ``values``; see ``percentiles``."""
    return percentiles(values, [p])[0]
