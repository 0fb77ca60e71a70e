"""The flusher: batches by count and by age, retries with backoff, replays on open, and never makes readers or
other scopes wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message
from graphrecall.store.rows import SessionRow
from graphrecall.store.wal import Flusher, FlushFailed, ScopeLog, WriteEntry, WriteLog

DIM = 8


def turn(i: int, text: str = "") -> WriteEntry:
    sid = f"s{i}"
    msgs = [Message(role="user", content=text or f"turn {i}"), Message(role="assistant", content="ok")]
    rows = message_rows(sid, msgs, start_idx=0, date=datetime(2024, 1, 1))
    rounds = build_rounds(sid, rows)
    vec = np.eye(DIM)[[i % DIM]]
    return WriteEntry.from_rows(
        sessions=[SessionRow(sid, datetime(2024, 1, 1))], messages=rows, rounds=rounds, user_vectors=vec,
        reply_vectors=vec, dim=DIM,
    )  # fmt: skip


class FakeStore:
    """Stands in for Kuzu: records each applied batch; ``fail`` makes the next n calls raise."""

    def __init__(self, fail: int = 0) -> None:
        self.batches: list[list[int]] = []
        self.fail = fail
        self.attempts = 0
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def __call__(self, entries: Sequence[WriteEntry]) -> None:
        self.attempts += 1
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        if self.fail:
            self.fail -= 1
            raise OSError("store unavailable")
        self.batches.append([e.seq for e in entries])

    @property
    def applied(self) -> list[int]:
        return [s for b in self.batches for s in b]


def until(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_batches_by_count_and_the_rest_waits_for_its_age_or_flush(tmp_path: Path) -> None:
    store = FakeStore()
    with ScopeLog(tmp_path / "u.log.sqlite", dim=DIM, apply=store, batch_entries=5, max_age_s=3600) as sl:
        for i in range(12):
            sl.append(turn(i))
        until(lambda: len(store.batches) == 2)
        time.sleep(0.2)
        assert store.batches == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]  # 11 and 12 are too few and too young
        assert sl.log.pending_count == 2 and [r.id for r in sl.tail.snapshot().rounds()] == ["s10@0", "s11@0"]
        assert sl.flush() == 2
        assert store.applied == list(range(1, 13)) and sl.log.pending_count == 0 and len(sl.tail) == 0


def test_a_lone_entry_is_flushed_when_it_is_old_enough(tmp_path: Path) -> None:
    store = FakeStore()
    with ScopeLog(tmp_path / "u.log.sqlite", dim=DIM, apply=store, batch_entries=100, max_age_s=0.3) as sl:
        t0 = time.monotonic()
        sl.append(turn(0))
        until(lambda: store.applied == [1])
        # Not before its age: each batch's age is drawn within ``jitter`` (0.2 by default) below ``max_age_s``.
        assert time.monotonic() - t0 >= 0.3 * (1 - 0.2)


def test_a_failing_store_keeps_the_entries_and_retries_with_backoff_until_it_works(tmp_path: Path) -> None:
    store = FakeStore(fail=2)
    with ScopeLog(
        tmp_path / "u.log.sqlite", dim=DIM, apply=store, batch_entries=3, max_age_s=0, backoff_s=0.2, jitter=0
    ) as sl:
        t0 = time.monotonic()
        for i in range(3):
            sl.append(turn(i))
        until(lambda: store.attempts >= 1)
        assert sl.log.pending_count == 3 and len(sl.tail) == 3  # nothing lost, still searchable
        until(lambda: store.applied == [1, 2, 3])
        assert store.attempts == 3  # failed, failed, then the same batch went through
        assert time.monotonic() - t0 >= 0.2 + 0.4  # waited 0.2 s, then 0.4 s
        until(lambda: len(sl.tail) == 0)  # trimmed: the last step of a successful batch
        assert sl.log.pending_count == 0 and sl.flusher.failures == 0 and sl.flusher.last_error is None


def test_a_synchronous_flush_reports_the_failure_and_loses_nothing(tmp_path: Path) -> None:
    store = FakeStore(fail=1)
    path = tmp_path / "u.log.sqlite"
    sl = ScopeLog(path, dim=DIM, apply=store, start=False)
    sl.append(turn(0))
    with pytest.raises(FlushFailed, match=r"seq 1\.\.1 .*store unavailable.*stay in the log"):
        sl.flush()
    assert sl.log.pending_count == 1 and sl.flusher.failures == 1
    assert sl.flush() == 1 and store.applied == [1]
    sl.close()


def test_entries_left_by_a_crash_are_replayed_on_open_before_any_new_write(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    first = FakeStore(fail=1000)  # the process "dies" before any flush succeeds
    sl = ScopeLog(path, dim=DIM, apply=first, batch_entries=1000, max_age_s=3600)
    for i in range(4):
        sl.append(turn(i))
    sl.close(flush=False)
    assert first.applied == []
    second = FakeStore()
    opened = threading.Event()

    def apply_after_the_check(entries):  # type: ignore[no-untyped-def]
        opened.wait(10)  # hold the replay until the tail was looked at (else a fast flush empties it first)
        second(entries)

    with ScopeLog(path, dim=DIM, apply=apply_after_the_check, batch_entries=1000, max_age_s=3600) as sl2:
        assert [r.id for r in sl2.tail.snapshot().rounds()] == ["s0@0", "s1@0", "s2@0", "s3@0"]
        opened.set()
        until(lambda: second.applied == [1, 2, 3, 4])  # due at once, although young and few


def test_close_flushes_what_is_left(tmp_path: Path) -> None:
    store = FakeStore()
    path = tmp_path / "u.log.sqlite"
    with ScopeLog(path, dim=DIM, apply=store, batch_entries=1000, max_age_s=3600) as sl:
        sl.append(turn(0))
        sl.append(turn(1))
    assert store.applied == [1, 2]
    with WriteLog(path) as log:
        assert log.pending() == []


def test_a_slow_flush_blocks_neither_searches_nor_appends_nor_another_scope(tmp_path: Path) -> None:
    slow, fast = FakeStore(), FakeStore()
    slow.gate = threading.Event()
    a = ScopeLog(tmp_path / "a.log.sqlite", dim=DIM, apply=slow, batch_entries=1, max_age_s=0)
    b = ScopeLog(tmp_path / "b.log.sqlite", dim=DIM, apply=fast, batch_entries=1, max_age_s=0)
    try:
        a.append(turn(0, "my dog Biscuit"))
        assert slow.entered.wait(10)  # scope a's flush is now stuck inside the store
        t0 = time.monotonic()
        a.append(turn(1, "a second turn while the flush hangs"))  # a writer of the same scope
        hits = a.tail.snapshot().bm25_search("Biscuit", 5)  # a reader of the same scope
        b.append(turn(2))
        b.flush()  # another scope, all the way into its store
        assert time.monotonic() - t0 < 5
        assert [h for h, _ in hits] == ["s0@0"] and fast.applied == [1]
    finally:
        slow.gate.set()
        a.close()
        b.close()
    assert slow.applied == [1, 2]


def test_options_are_checked(tmp_path: Path) -> None:
    with WriteLog(tmp_path / "u.log.sqlite") as log, pytest.raises(ValueError, match="batch_entries"):
        Flusher(log, FakeStore(), batch_entries=0, start=False)


def test_with_a_checkpoint_hook_applied_entries_stay_in_the_log_until_the_checkpoint(tmp_path: Path) -> None:
    """Kuzu commits without checkpointing are durable only in Kuzu's WAL, which recovery may set aside: the log
    keeps the entries (applied, not pending for the next batch) until the hook checkpointed them."""
    path = tmp_path / "u.log.sqlite"
    store, checkpoints = FakeStore(), []
    trimmed: list[int] = []
    wlog = WriteLog(path)
    for i in range(3):
        wlog.append(turn(i))
    f = Flusher(
        wlog, store, batch_entries=2, max_age_s=0.0, checkpoint=lambda: checkpoints.append(wlog.pending_count),
        checkpoint_age_s=3600, on_flushed=trimmed.append, start=False,
    )  # fmt: skip
    f._apply(wlog.pending(2), raise_errors=True)
    f._apply(wlog.pending(2, after=f._applied_seq), raise_errors=True)
    assert store.batches == [[1, 2], [3]]  # applied once each
    assert (
        wlog.pending_count == 3 and checkpoints == [] and trimmed == []
    )  # but the log (and tail) still hold them
    assert f._due_in(time.monotonic()) > 3000  # nothing new to apply; the checkpoint is due in an hour
    wlog.append(turn(3))
    assert f.flush() == 1  # flush applies what is new, then checkpoints everything applied
    assert store.applied == [1, 2, 3, 4] and checkpoints == [4] and wlog.pending_count == 0 and trimmed == [4]
    wlog.close()


def test_a_failed_checkpoint_makes_the_flusher_apply_its_entries_again(tmp_path: Path) -> None:
    """After a failed checkpoint the store may have set its WAL aside with the applied commits in it: the entries
    must be applied again, not marked flushed by the next checkpoint that succeeds on the fresh store."""
    wlog = WriteLog(tmp_path / "u.log.sqlite")
    store, fails = FakeStore(), [1]

    def checkpoint() -> None:
        if fails and fails.pop():
            raise OSError("no room")

    f = Flusher(wlog, store, checkpoint=checkpoint, checkpoint_age_s=3600, start=False)
    wlog.append(turn(0))
    wlog.append(turn(1))
    with pytest.raises(FlushFailed, match="applied again"):
        f.flush()
    assert wlog.pending_count == 2
    assert f.flush() == 2  # applied a second time, then checkpointed
    assert store.applied == [1, 2, 1, 2] and wlog.pending_count == 0
    wlog.close()


def test_entries_applied_but_not_checkpointed_are_applied_again_after_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    first, checkpoints = FakeStore(), []
    sl = ScopeLog(path, dim=DIM, apply=first, checkpoint=lambda: checkpoints.append(1), checkpoint_age_s=3600,
                  batch_entries=1, max_age_s=0.0)  # fmt: skip
    for i in range(3):
        sl.append(turn(i))
    until(lambda: first.applied == [1, 2, 3])
    sl.close(flush=False)  # "dies" before its checkpoint
    assert checkpoints == []
    second = FakeStore()
    with ScopeLog(path, dim=DIM, apply=second, checkpoint=lambda: checkpoints.append(2), checkpoint_age_s=0.05,
                  batch_entries=10, max_age_s=3600) as sl2:  # fmt: skip
        until(lambda: second.applied == [1, 2, 3])  # idempotent replay of everything the log still held
        until(lambda: checkpoints == [2] and sl2.log.pending_count == 0)  # by age, without a flush() call


def test_hold_keeps_entries_in_the_log_past_their_age_and_close_until_it_lets_go(tmp_path: Path) -> None:
    """A scope that lives in its log (``store.logs``): no batch by age or at close while ``hold`` says so, a
    batch as soon as it stops holding, and ``flush()`` moves them whatever it says."""
    path = tmp_path / "u.log.sqlite"
    store = FakeStore()
    holding = True
    with ScopeLog(
        path,
        dim=DIM,
        apply=store,
        batch_entries=2,
        max_age_s=0.01,
        hold=lambda tail: holding and len(tail) < 3,
    ) as sl:
        sl.append(turn(0))
        sl.append(turn(1))  # a full batch by count, and old enough: held all the same
        time.sleep(0.2)
        assert store.applied == [] and len(sl.tail) == 2
    assert store.applied == []  # close did not flush either

    # Like store.logs: held while the store has nothing yet ("no database") and the tail is small.
    def small(tail: object) -> bool:
        return not store.batches and len(tail) < 3  # type: ignore[arg-type]

    with ScopeLog(path, dim=DIM, apply=store, batch_entries=2, max_age_s=0.01, hold=small) as sl:
        time.sleep(0.2)
        assert store.applied == [] and len(sl.tail) == 2  # nor does a reopen replay them
        sl.append(turn(2))  # the hold lets go at three rounds
        until(lambda: store.applied == [1, 2, 3])
    store2 = FakeStore()
    with ScopeLog(path, dim=DIM, apply=store2, max_age_s=3600, hold=lambda tail: True) as sl:
        sl.append(turn(3))
        assert sl.flush() == 1 and store2.applied == [4]  # an explicit flush is never held


def test_new_writes_after_a_batch_wait_their_own_age_until_the_checkpoint(tmp_path: Path) -> None:
    """With a checkpoint hook, entries written after a batch are due one age after that batch: not each on its own
    as soon as the first applied entry is older than the age (which made every write a Kuzu transaction of its
    own between a batch and its checkpoint)."""
    wlog = WriteLog(tmp_path / "u.log.sqlite")
    store = FakeStore()
    f = Flusher(
        wlog, store, batch_entries=100, max_age_s=10.0, jitter=0.0, checkpoint=lambda: None,
        checkpoint_age_s=3600, start=False,
    )  # fmt: skip
    wlog.append(turn(0))
    f._apply(wlog.pending(100), raise_errors=True)
    f._applied_at = time.monotonic() - 60  # the first batch was applied a minute ago
    wlog.append(turn(1))
    assert f._due_in(time.monotonic()) > 5  # the new entry waits for its age, not for the first entry's
    f._last_batch_at = time.monotonic() - 11
    assert f._due_in(time.monotonic()) <= 0
    wlog.close()


def test_ages_are_drawn_below_the_maximum_so_scopes_written_together_drift_apart(tmp_path: Path) -> None:
    wlog = WriteLog(tmp_path / "u.log.sqlite")
    f = Flusher(wlog, FakeStore(), max_age_s=10.0, jitter=0.2, start=False)
    ages = {f._draw_age() for _ in range(50)}
    assert all(8.0 <= a <= 10.0 for a in ages) and len(ages) > 1
    wlog.close()


def test_shared_slots_bound_how_many_scopes_flush_at_once_and_all_still_flush(tmp_path: Path) -> None:
    """A flush is CPU work; scopes that flush together took every core from requests. With one slot between
    them, four scopes' background flushes run one at a time, and all of them get done."""
    slots = threading.BoundedSemaphore(1)
    running, peak, lock = 0, 0, threading.Lock()
    applied: list[int] = []

    def slow_apply(entries: Sequence[WriteEntry]) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
            applied.extend(e.seq for e in entries)

    logs = [
        ScopeLog(tmp_path / f"u{i}.log.sqlite", dim=DIM, apply=slow_apply, max_age_s=0.0, slots=slots)
        for i in range(4)
    ]
    try:
        for sl in logs:
            for i in range(3):
                sl.append(turn(i))
        until(lambda: len(applied) == 12)
        assert peak == 1
    finally:
        for sl in logs:
            sl.close()
