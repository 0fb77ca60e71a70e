"""Peak resident memory per benchmark phase, sampled by a background thread.

``ru_maxrss`` only gives the whole-process peak; sampling lets each phase (ingest, build, search) report its own.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

MB = 1 << 20


class RssWatch:
    def __init__(self, interval_s: float = 0.05) -> None:
        self._proc = psutil.Process()
        self._interval = interval_s
        self._peak = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-watch", daemon=True)
        self.phases: dict[str, dict[str, float]] = {}

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self._proc.memory_info().rss
            with self._lock:
                self._peak = max(self._peak, rss)
            self._stop.wait(self._interval)

    def start(self) -> RssWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Record the RSS at the start and the peak RSS during the block (MiB)."""
        start = self._proc.memory_info().rss
        with self._lock:
            self._peak = start
        t0 = time.perf_counter()
        try:
            yield
        finally:
            end = self._proc.memory_info()
            with self._lock:
                peak = max(self._peak, end.rss)
            self.phases[name] = {
                "rss_start_mib": start / MB,
                "rss_peak_mib": peak / MB,
                "rss_end_mib": end.rss / MB,
                "vms_end_gib": end.vms / (1 << 30),
                "seconds": time.perf_counter() - t0,
                "loadavg_1min_end": os.getloadavg()[0],
            }

    @staticmethod
    def process_peak_mib() -> float:
        """Whole-process peak RSS so far (Linux reports ``ru_maxrss`` in KiB)."""
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
