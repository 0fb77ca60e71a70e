"""``graphrecall serve --maintain``: maintenance passes over every scope, on a thread of the server.

Each pass asks every scope to ``maintain`` itself (``services.maintenance``: only a scope that changed and has been
idle does anything), with one LLM budget for the whole pass, then sleeps ``every_s``. A failure on one scope is
logged and the pass goes on: one damaged scope must not stop everyone else's upkeep.
"""

from __future__ import annotations

import logging
import threading

from graphrecall.memory import Memory

log = logging.getLogger(__name__)


class MaintenanceLoop:
    def __init__(
        self, memory: Memory, *, every_s: float = 300.0, idle_s: float = 1800.0, max_llm_calls: int = 20
    ) -> None:
        self.memory = memory
        self.every_s, self.idle_s, self.max_llm_calls = every_s, idle_s, max_llm_calls
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.passes = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="graphrecall-maintain", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def run_pass(self) -> int:
        """One pass over every scope; how many were maintained."""
        budget, ran = self.max_llm_calls, 0
        for scope in self.memory.scopes():
            if self._stop.is_set():
                break
            try:
                m = self.memory.maintain(scope, idle_s=self.idle_s, max_llm_calls=budget)
            except Exception:
                log.exception("maintenance of %s failed; the pass goes on", scope)
                continue
            if m.run is not None:
                ran += 1
                budget = max(0, budget - m.run.llm_calls)
                log.info("maintained %s: %s", scope, m.run.model_dump_json())
            if m.compaction is not None and m.compaction.compacted:
                log.info("compacted the bucket of %s: %s", scope, m.compaction.model_dump_json())
        self.passes += 1
        return ran

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.run_pass()
