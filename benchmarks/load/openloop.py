"""Open-loop arrivals: requests sent on a schedule fixed before the run, whatever earlier requests take.

Why not a closed loop alone: N clients that each send their next request when the previous answer arrives slow
their own arrival rate down whenever the server slows down. Their latency is then mostly time spent queueing
behind the other clients, and a server that stalls receives fewer requests during the stall than real users would
send, so the stall barely shows in the percentiles ("coordinated omission"). Here the send times are drawn up
front (a fixed interval or a Poisson process at ``rate``), the dispatcher hands each request to a worker at its
time, and latency is measured from that *scheduled* time. When the client itself is late (every worker busy, or
the dispatcher woke up late on a loaded machine) the delay counts against the latency, as a user would feel it,
and is also reported separately as lag, so that a reader can tell a slow server from a client that fell behind.

Pure standard library and no I/O of its own: the request is a callable, so the scheduler is tested without a
server (``tests/unit/test_openloop.py``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

R = TypeVar("R")

Arrivals = Literal["poisson", "fixed"]

# The first send is scheduled this long after the run starts, so that starting the pool is not counted as lag.
LEAD_S = 0.05


def arrival_times(rate: float, duration: float, *, arrivals: Arrivals, rng: random.Random) -> list[float]:
    """Send times in seconds after the start, in ``[0, duration)``, at ``rate`` requests per second on average.

    ``poisson``: exponential gaps (independent users, bursts included: the realistic default); ``fixed``: exactly
    ``1 / rate`` apart (the same count, no bursts, easier to read).
    """
    if rate <= 0 or duration <= 0:
        raise ValueError("rate and duration must be positive")
    if arrivals == "fixed":
        return [i / rate for i in range(int(rate * duration))]
    times: list[float] = []
    t = rng.expovariate(rate)
    while t < duration:
        times.append(t)
        t += rng.expovariate(rate)
    return times


@dataclass(frozen=True)
class Timing:
    """When one request was due, sent and answered, in seconds after the run's start."""

    index: int
    scheduled: float
    started: float
    finished: float

    @property
    def latency(self) -> float:
        """From the scheduled send time: what the user waited, the client's own delay included."""
        return self.finished - self.scheduled

    @property
    def service(self) -> float:
        """From the actual send: the server's answer time plus transport."""
        return self.finished - self.started

    @property
    def lag(self) -> float:
        """How late the client sent it (0 when on time)."""
        return max(0.0, self.started - self.scheduled)


@dataclass
class OpenLoopRun(Generic[R]):
    """What ``run_open_loop`` measured: one ``(Timing, result)`` per request sent, in schedule order."""

    results: list[tuple[Timing, R]]
    scheduled: int  # arrivals in the schedule (more than were sent when the run was stopped early)
    elapsed: float  # from the start to the last answer
    send_window: float  # from the start to the last send
    workers: int
    peak_in_flight: int

    @property
    def sent(self) -> int:
        return len(self.results)

    @property
    def saturated(self) -> bool:
        """Every worker was busy at some point: later requests may have waited in the client."""
        return self.peak_in_flight >= self.workers

    def late(self, tolerance: float) -> int:
        """Requests sent more than ``tolerance`` seconds after their scheduled time."""
        return sum(1 for t, _ in self.results if t.lag > tolerance)


@dataclass
class _Gauge:
    """Requests in flight, and the most there ever were."""

    now: int = 0
    peak: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


def run_open_loop(
    times: Sequence[float],
    request: Callable[[int], R],
    *,
    workers: int,
    stop: threading.Event | None = None,
) -> OpenLoopRun[R]:
    """Call ``request(i)`` at ``times[i]`` seconds after the start, on up to ``workers`` threads at once.

    The dispatcher (the calling thread) never waits for an answer, only for the next send time, so a slow answer
    delays no later send. ``workers`` bounds the client's concurrency; size it above rate x worst latency so the
    client is never the bottleneck, and check ``saturated`` and ``late()`` afterwards. Setting ``stop`` ends the
    sending early (what was not sent yet is dropped); requests in flight still finish. ``request`` should turn
    its own failures into a result (an HTTP error is a measurement); an exception it raises is re-raised here
    after every request finished.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    gauge = _Gauge()
    clock = time.perf_counter
    start = clock() + LEAD_S

    def one(index: int, due: float) -> tuple[Timing, R]:
        started = clock() - start
        gauge.enter()
        try:
            result = request(index)
        finally:
            gauge.leave()
        return Timing(index, due, started, clock() - start), result

    futures: list[Future[tuple[Timing, R]]] = []
    last_send = 0.0
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="open-loop") as pool:
        for i, due in enumerate(times):
            wait = start + due - clock()
            if stop is not None:
                if stop.wait(max(0.0, wait)):
                    break
            elif wait > 0:
                time.sleep(wait)
            futures.append(pool.submit(one, i, due))
            last_send = clock() - start
        results = [f.result() for f in futures]
    elapsed = max((t.finished for t, _ in results), default=0.0)
    return OpenLoopRun(
        results=results,
        scheduled=len(times),
        elapsed=elapsed,
        send_window=last_send,
        workers=workers,
        peak_in_flight=gauge.peak,
    )
