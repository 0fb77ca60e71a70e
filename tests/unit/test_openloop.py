"""The open-loop scheduler of the HTTP load test (benchmarks/load/openloop.py), with a fake request instead of a
server: sends follow the schedule whatever earlier requests take, and latency counts from the scheduled time.

Timing assertions are one-sided where the machine's load could break them (a loaded machine only makes things
later), so they hold on a busy shared box.
"""

from __future__ import annotations

import itertools
import random
import statistics
import threading
import time

import pytest
from benchmarks.load.openloop import arrival_times, run_open_loop


def test_fixed_arrivals_are_evenly_spaced_over_the_duration() -> None:
    times = arrival_times(20, 2.0, arrivals="fixed", rng=random.Random(1))
    assert len(times) == 40
    assert times == pytest.approx([i * 0.05 for i in range(40)])


def test_poisson_arrivals_have_the_asked_rate_and_stay_inside_the_window() -> None:
    times = arrival_times(200, 50.0, arrivals="poisson", rng=random.Random(3))
    assert times == sorted(times)
    assert times[0] > 0 and times[-1] < 50.0
    assert abs(len(times) - 10_000) < 400  # 4 standard deviations of a Poisson count
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.mean(gaps) == pytest.approx(1 / 200, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / 200, rel=0.1)  # exponential: sd = mean
    assert arrival_times(200, 50.0, arrivals="poisson", rng=random.Random(3)) == times  # seeded: reproducible


def test_sends_keep_to_the_schedule_while_earlier_requests_are_still_running() -> None:
    times = [i * 0.05 for i in range(10)]
    seen: list[int] = []

    def slow(i: int) -> str:
        seen.append(i)
        time.sleep(1.0)  # far longer than the 50 ms between sends
        return f"r{i}"

    run = run_open_loop(times, slow, workers=32)
    assert [r for _, r in run.results] == [f"r{i}" for i in range(10)]
    assert sorted(seen) == list(range(10))
    timings = [t for t, _ in run.results]
    assert all(t.started >= t.scheduled for t in timings)  # never early
    # A closed loop would send the second request only after the first answer (1 s); here all ten go out first.
    assert max(t.started for t in timings) < min(t.finished for t in timings)
    assert run.peak_in_flight == 10 and not run.saturated
    assert all(t.lag < 0.5 for t in timings)
    assert run.sent == run.scheduled == 10


def test_latency_counts_from_the_scheduled_time_when_the_client_falls_behind() -> None:
    times = [i * 0.02 for i in range(5)]  # one every 20 ms, but a single worker needs 100 ms per request

    def slow(i: int) -> int:
        time.sleep(0.1)
        return i

    run = run_open_loop(times, slow, workers=1)
    timings = [t for t, _ in run.results]
    for i, t in enumerate(timings):
        # Request i cannot start before the i requests ahead of it finished: it waited in the client, and that
        # wait is part of its latency (no coordinated omission), not hidden in a shorter service time.
        assert t.started >= i * 0.1 - 0.005
        assert t.latency >= (i + 1) * 0.1 - i * 0.02 - 0.005
        assert t.latency == pytest.approx(t.lag + t.service)
        assert t.service >= 0.1 - 0.005
    assert timings[-1].latency > 2 * timings[-1].service
    assert run.saturated
    assert run.late(0.05) >= 3  # requests 1..4 started 80, 160, 240, 320 ms late at best


def test_stop_ends_the_sending_early_and_lets_requests_in_flight_finish() -> None:
    stop = threading.Event()
    times = [i * 0.05 for i in range(200)]  # 10 s of schedule

    def request(i: int) -> int:
        if i == 3:
            stop.set()
        time.sleep(0.05)
        return i

    run = run_open_loop(times, request, workers=8, stop=stop)
    assert run.scheduled == 200
    assert 4 <= run.sent < 200
    assert [r for _, r in run.results] == list(range(run.sent))
    assert run.elapsed < 5


def test_an_exception_from_the_request_is_raised_after_the_run() -> None:
    def broken(i: int) -> int:
        if i == 1:
            raise RuntimeError("boom")
        return i

    with pytest.raises(RuntimeError, match="boom"):
        run_open_loop([0.0, 0.01, 0.02], broken, workers=2)
