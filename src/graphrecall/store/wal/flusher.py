"""``Flusher``: moves a scope's acknowledged log entries into Kuzu in batches, on its own thread.

Why batches: every Kuzu write transaction checkpoints at commit (~0.2 s, kuzu-notes.md), so one transaction per
turn caps a scope at a few turns per second and grows the file per write; one transaction per batch pays that once
for many turns. A batch is due when ``batch_entries`` entries wait or the oldest has waited ``max_age_s``
(entries found in the log at open are due at once: that is the crash replay).

The Kuzu write is the caller's ``apply(entries)``: one transaction, all or nothing. Entries are marked flushed (and
deleted from the log) only after ``apply`` returned, so a crash or an error in between leaves them in the log and
they are applied again later; ``apply`` must therefore be idempotent (docs/write-log.md). On failure the
flusher keeps the entries and retries with exponential backoff (with jitter, so many scopes failing together do not
retry in lockstep); ``flush()`` drains synchronously for close, shutdown and tests.

Isolation: each scope has its own flusher, thread and locks, so scopes never wait for each other; readers never
take the flusher's locks (they read Kuzu and the ``TailIndex``), so a slow flush never blocks a search.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence

from graphrecall.errors import GraphRecallError
from graphrecall.store.wal.entry import WriteEntry
from graphrecall.store.wal.log import WriteLog

log = logging.getLogger(__name__)

Apply = Callable[[Sequence[WriteEntry]], None]


class FlushFailed(GraphRecallError):
    """``apply`` failed for a batch; its entries stay in the log (nothing acknowledged is lost)."""

    code = "flush_failed"


class Flusher:
    def __init__(
        self,
        wlog: WriteLog,
        apply: Apply,
        *,
        batch_entries: int = 64,
        max_age_s: float = 0.5,
        backoff_s: float = 0.1,
        max_backoff_s: float = 10.0,
        jitter: float = 0.2,
        on_flushed: Callable[[int], None] | None = None,
        name: str = "",
        start: bool = True,
    ) -> None:
        """``on_flushed(upto_seq)`` runs after entries up to ``upto_seq`` left the log (e.g. to trim the tail)."""
        if batch_entries < 1 or max_age_s < 0 or backoff_s <= 0 or max_backoff_s < backoff_s:
            raise ValueError(
                "batch_entries >= 1, max_age_s >= 0 and 0 < backoff_s <= max_backoff_s are required"
            )
        self.log = wlog
        self.apply = apply
        self.batch_entries = batch_entries
        self.max_age_s = max_age_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.jitter = jitter
        self.on_flushed = on_flushed
        self.name = name or str(wlog.path)
        # _io serializes batches (background thread vs flush()); _cond only guards the wake-up state below.
        self._io = threading.Lock()
        self._cond = threading.Condition()
        self._stop = False
        self._kick = False
        self._retry_at = 0.0
        self.failures = 0  # consecutive failed attempts (0 after a success)
        self.last_error: BaseException | None = None
        self.flushed_seq = 0
        self.batches = 0
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    # -- control ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"graphrecall-flush {self.name}", daemon=True
            )
            self._thread.start()

    def notify(self) -> None:
        """Call after an append: wakes the thread if a batch became due by count (age is checked on its own)."""
        with self._cond:
            self._cond.notify()

    def kick(self) -> None:
        """Flush in the background now, whatever the batch size and age (the backoff still applies)."""
        with self._cond:
            self._kick = True
            self._cond.notify()

    def flush(self) -> int:
        """Apply every pending entry now, on the caller's thread; returns how many were applied. Raises
        ``FlushFailed`` at the first batch that fails (that batch and the rest stay in the log)."""
        done = 0
        while True:
            with self._io:
                batch = self.log.pending(self.batch_entries)
                if not batch:
                    return done
                self._apply(batch, raise_errors=True)
                done += len(batch)

    def close(self, *, flush: bool = True) -> None:
        """Stop the thread (waiting for a batch in progress); then ``flush()`` unless told not to. Entries left
        in the log are replayed by the next open."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if flush:
            self.flush()

    # -- the thread ------------------------------------------------------------------------------------------
    def _due_in(self, now: float) -> float | None:
        """Seconds until a batch is due (<= 0: now), or None when nothing waits."""
        if self.log.pending_count == 0:
            return None
        if now < self._retry_at:
            return self._retry_at - now
        oldest = self.log.oldest_pending_at
        if self._kick or self.log.pending_count >= self.batch_entries or oldest is None:
            return 0.0
        return oldest + self.max_age_s - now

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop:
                    wait = self._due_in(time.monotonic())
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stop:
                    return
                self._kick = False
            try:
                with self._io:
                    batch = self.log.pending(self.batch_entries)
                    if batch:
                        self._apply(batch, raise_errors=False)
            except Exception as e:  # reading the log failed (corrupt entry, I/O): back off, keep running
                self._failed(e, None)

    def _apply(self, batch: Sequence[WriteEntry], *, raise_errors: bool) -> None:
        first, last = batch[0].seq, batch[-1].seq
        try:
            self.apply(batch)
        except Exception as e:
            self._failed(e, (first, last))
            if raise_errors:
                raise FlushFailed(
                    f"{self.name}: writing log entries seq {first}..{last} to the store failed ({e}); they stay "
                    "in the log and will be retried"
                ) from e
            return
        try:
            self.log.mark_flushed(last)
        except Exception as e:  # in Kuzu but still in the log: replayed later, harmless (idempotent)
            self._failed(e, (first, last))
            if raise_errors:
                raise
            return
        self.failures = 0
        self.last_error = None
        self._retry_at = 0.0
        self.flushed_seq = last
        self.batches += 1
        if self.on_flushed is not None:
            try:
                self.on_flushed(last)
            except Exception:  # a listener's bug must not stop flushing; the entries are in Kuzu already
                log.exception("%s: on_flushed(%d) failed", self.name, last)

    def _failed(self, e: BaseException, seqs: tuple[int, int] | None) -> None:
        self.failures += 1
        self.last_error = e
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (self.failures - 1))
        delay *= 1.0 + self.jitter * random.random()
        self._retry_at = time.monotonic() + delay
        where = f"entries seq {seqs[0]}..{seqs[1]}" if seqs else "reading the log"
        log.warning(
            "%s: flush of %s failed (attempt %d, retry in %.2fs): %s",
            self.name,
            where,
            self.failures,
            delay,
            e,
        )
