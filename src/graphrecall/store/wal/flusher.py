"""``Flusher``: moves a scope's acknowledged log entries into Kuzu in batches, on its own thread.

Why batches: a Kuzu write costs a transaction and, to be durable beyond Kuzu's own WAL, a checkpoint (~80-130 ms
for a small write on a loaded machine), so one per turn caps a scope at a few turns per second; one transaction per
batch, and one checkpoint per ``checkpoint_age_s``, pay that once for many turns. A batch is due when ``batch_entries`` entries wait or the oldest has waited ``max_age_s``
(entries found in the log at open are due at once: that is the crash replay).

The Kuzu write is the caller's ``apply(entries)``: one transaction, all or nothing. Entries are marked flushed (and
deleted from the log) only once they are durable in Kuzu: right after ``apply`` when there is no ``checkpoint``
hook; with one, ``apply`` only commits (to Kuzu's WAL) and the entries stay in the log, *applied*, until the hook
has checkpointed, so a Kuzu WAL that recovery must set aside (store/recovery.py) loses nothing that the log does not
still hold. A crash or an error anywhere in between leaves entries in the log and they are applied again later;
``apply`` must therefore be idempotent (docs/write-log.md). On failure the
flusher keeps the entries and retries with exponential backoff (with jitter, so many scopes failing together do not
retry in lockstep); ``flush()`` drains synchronously for close, shutdown and tests.

Isolation: each scope has its own flusher, thread and locks, so scopes never wait for each other; readers never
take the flusher's locks (they read Kuzu and the ``TailIndex``), so a slow flush never blocks a search.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence

from graphrecall import telemetry
from graphrecall.config import FLUSH_MAX_AGE_S
from graphrecall.errors import GraphRecallError
from graphrecall.store.wal.entry import WriteEntry
from graphrecall.store.wal.log import WriteLog

log = logging.getLogger(__name__)

Apply = Callable[[Sequence[WriteEntry]], None]

BATCH_ENTRIES = 64
"""A batch is due once this many entries wait (sooner than their age): one Kuzu transaction per 64 turns, and a
burst of turns never waits a whole ``max_age_s``."""
MIN_CHECKPOINT_AGE_S = 1.0
"""The least ``checkpoint_age_s`` that follows from ``max_age_s`` (twice it: about one checkpoint per two batches;
a checkpoint makes every read wait, so never more often than this)."""


class FlushFailed(GraphRecallError):
    """``apply`` failed for a batch; its entries stay in the log (nothing acknowledged is lost)."""

    code = "flush_failed"


class Flusher:
    def __init__(
        self,
        wlog: WriteLog,
        apply: Apply,
        *,
        batch_entries: int = BATCH_ENTRIES,
        max_age_s: float = FLUSH_MAX_AGE_S,
        backoff_s: float = 0.1,
        max_backoff_s: float = 10.0,
        jitter: float = 0.2,
        on_flushed: Callable[[int], None] | None = None,
        checkpoint: Callable[[], None] | None = None,
        checkpoint_age_s: float | None = None,
        hold: Callable[[], bool] | None = None,
        slots: threading.Semaphore | None = None,
        name: str = "",
        start: bool = True,
    ) -> None:
        """``on_flushed(upto_seq)`` runs after entries up to ``upto_seq`` left the log, durable in Kuzu (e.g. to
        trim the tail). ``checkpoint()`` makes what ``apply`` committed durable; entries are deleted from the log
        after it ran, at most ``checkpoint_age_s`` (default: twice ``max_age_s``, at least ``MIN_CHECKPOINT_AGE_S``)
        after the first of them was applied (and on ``flush``).
        ``hold()``, asked whenever a batch could be due, keeps the entries in the log while it returns True: no
        batch by count or age and none at ``close``; only ``flush()`` and ``kick()`` move them (a small scope that
        lives in its log, ``store.logs``). ``slots``, shared by the flushers of a process, bounds how many of them
        write to Kuzu in the background at once (``flush()`` does not take one): a flush is CPU work (~0.2-0.3 s
        for a batch of turns and its checkpoint), and many scopes flushing together took every core from the
        requests (docs/benchmarks.md). ``max_age_s`` is drawn anew for each batch within ``jitter`` below it, so
        scopes written at the same moment do not stay in step."""
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
        self.checkpoint = checkpoint
        self.checkpoint_age_s = (
            checkpoint_age_s if checkpoint_age_s is not None else max(MIN_CHECKPOINT_AGE_S, 2 * max_age_s)
        )
        self.hold = hold
        self.slots = slots
        self._age_s = self._draw_age()
        self.name = name or str(wlog.path)
        # Applied to Kuzu but not yet checkpointed (so still in the log): the highest seq, how many, since when.
        self._applied_seq = 0
        self._applied_count = 0
        self._applied_at: float | None = None
        self._last_batch_at: float | None = None
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
                batch = self.log.pending(self.batch_entries, after=self._applied_seq)
                if not batch:
                    self._make_durable(raise_errors=True)
                    return done
                self._apply(batch, raise_errors=True)
                done += len(batch)

    def close(self, *, flush: bool = True) -> None:
        """Stop the thread (waiting for a batch in progress); then ``flush()`` unless told not to or ``hold``
        keeps the entries. Entries left in the log are replayed by the next open."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if flush and (self._applied_count or not self.held()):
            self.flush()

    def held(self) -> bool:
        """Whether ``hold`` keeps the entries in the log now (a failing ``hold`` holds nothing back)."""
        if self.hold is None:
            return False
        try:
            return self.hold()
        except Exception:
            log.exception("%s: hold() failed; flushing as usual", self.name)
            return False

    # -- the thread ------------------------------------------------------------------------------------------
    def _due_in(self, now: float) -> float | None:
        """Seconds until a batch is due (<= 0: now), or None when nothing waits."""
        if self.log.pending_count == 0:
            return None
        if now < self._retry_at:
            return self._retry_at - now
        if not self._kick and self._applied_count == 0 and self.held():
            return None  # woken again by the next append (notify) or a kick
        waiting = self.log.pending_count - self._applied_count
        durable_in = self._applied_at + self.checkpoint_age_s - now if self._applied_at is not None else None
        if waiting <= 0:
            return durable_in
        # The entries after the applied ones arrived after its last batch: due one age after that batch (the
        # first applied entry's time would make every later write a batch of its own until the checkpoint).
        oldest = self.log.oldest_pending_at if self._applied_count == 0 else self._last_batch_at
        if self._kick or waiting >= self.batch_entries or oldest is None:
            return 0.0
        due = oldest + self._age_s - now
        return due if durable_in is None else min(due, durable_in)

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
                with self.slots or contextlib.nullcontext(), self._io:
                    batch = self.log.pending(self.batch_entries, after=self._applied_seq)
                    if batch:
                        self._apply(batch, raise_errors=False)
                    if self._applied_at is not None and (
                        not batch or time.monotonic() >= self._applied_at + self.checkpoint_age_s
                    ):
                        self._make_durable(raise_errors=False)
            except Exception as e:  # reading the log failed (corrupt entry, I/O): back off, keep running
                self._failed(e, None)
            self._age_s = self._draw_age()

    def _draw_age(self) -> float:
        return self.max_age_s * (1.0 - self.jitter * random.random())

    def _apply(self, batch: Sequence[WriteEntry], *, raise_errors: bool) -> None:
        first, last = batch[0].seq, batch[-1].seq
        try:
            with telemetry.span("graphrecall.flush", {"graphrecall.entries": len(batch)}):
                self.apply(batch)
        except Exception as e:
            self._forget_applied()  # a failed write may have cost Kuzu its uncheckpointed commits too
            self._failed(e, (first, last))
            if raise_errors:
                raise FlushFailed(
                    f"{self.name}: writing log entries seq {first}..{last} to the store failed ({e}); they stay "
                    "in the log and will be retried"
                ) from e
            return
        self.batches += 1
        if self.checkpoint is not None:
            self._applied_seq = last
            self._applied_count += len(batch)
            self._last_batch_at = time.monotonic()
            if self._applied_at is None:
                self._applied_at = self._last_batch_at
            self._succeeded()
            return
        try:
            self.log.mark_flushed(last)
        except Exception as e:  # in Kuzu but still in the log: replayed later, harmless (idempotent)
            self._failed(e, (first, last))
            if raise_errors:
                raise
            return
        self._succeeded()
        self._flushed(last)

    def _make_durable(self, *, raise_errors: bool) -> None:
        """Checkpoint what was applied, then delete it from the log and tell ``on_flushed`` (caller holds
        ``_io``). Until then the entries stay in the tail too: a Kuzu WAL set aside after a failure would otherwise
        leave them searchable nowhere."""
        if self._applied_at is None or self.checkpoint is None:
            return
        upto = self._applied_seq
        try:
            self.checkpoint()
            self.log.mark_flushed(upto)
        except Exception as e:
            # Still in the log. Whether Kuzu kept them is unknown (after a failed checkpoint the store may set its
            # WAL aside), so they are applied again (idempotent) before the next checkpoint.
            self._forget_applied()
            self._failed(e, None)
            if raise_errors:
                raise FlushFailed(
                    f"{self.name}: checkpointing the entries up to seq {upto} failed ({e}); they stay in the log "
                    "and will be applied again"
                ) from e
            return
        self._forget_applied()
        self._succeeded()
        self._flushed(upto)

    def _forget_applied(self) -> None:
        self._applied_seq = 0
        self._applied_count = 0
        self._applied_at = None

    def _succeeded(self) -> None:
        self.failures = 0
        self.last_error = None
        self._retry_at = 0.0

    def _flushed(self, upto: int) -> None:
        self.flushed_seq = upto
        if self.on_flushed is not None:
            try:
                self.on_flushed(upto)
            except Exception:  # a listener's bug must not stop flushing; the entries are in Kuzu already
                log.exception("%s: on_flushed(%d) failed", self.name, upto)

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
