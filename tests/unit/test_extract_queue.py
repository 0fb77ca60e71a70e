"""The durable extraction queue with a fake runner (no LLM): runs, dedupes, retries with backoff, fails after three
attempts with the reason, is re-queued, bounds concurrency, serializes a scope, and survives a crash."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from graphrecall.errors import InvalidInput
from graphrecall.extract.queue import ExtractionQueue, QueueError, RetryLater
from graphrecall.models import Scope

ANA = Scope(org_id="acme", user_id="ana")
BOB = Scope(org_id="acme", user_id="bob")


class FakeRunner:
    """Records calls; ``fail[sid]`` = how many of its next calls raise; ``gate`` holds every call until set."""

    def __init__(self, fail: dict[str, int] | None = None, gate: threading.Event | None = None) -> None:
        self.fail = dict(fail or {})
        self.gate = gate
        self.calls: list[tuple[str, str, float]] = []
        self.running: set[tuple[str, str]] = set()
        self.peak = 0
        self.overlap_in_scope = False
        self._lock = threading.Lock()

    def __call__(self, scope: Scope, session_id: str) -> None:
        with self._lock:
            self.calls.append((str(scope), session_id, time.monotonic()))
            if any(s == str(scope) for s, _ in self.running):
                self.overlap_in_scope = True
            self.running.add((str(scope), session_id))
            self.peak = max(self.peak, len(self.running))
        try:
            if self.gate is not None:
                assert self.gate.wait(30)
            else:
                time.sleep(0.02)
            with self._lock:
                if self.fail.get(session_id, 0) > 0:
                    self.fail[session_id] -= 1
                    raise TimeoutError(f"LLM timed out on {session_id}")
        finally:
            with self._lock:
                self.running.discard((str(scope), session_id))

    def sessions(self) -> list[str]:
        return [sid for _, sid, _ in self.calls]


def until(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_enqueued_sessions_are_extracted_and_marked_done(tmp_path: Path) -> None:
    run = FakeRunner()
    with ExtractionQueue(tmp_path, run, workers=2) as q:
        job = q.enqueue(ANA, "s1")
        # A fast worker may have finished it before enqueue read its status back.
        assert job.status in ("pending", "running", "done") and job.session_id == "s1" and job.scope == ANA
        q.enqueue(BOB, "s1")
        assert q.wait(20)
        assert sorted(run.sessions()) == ["s1", "s1"]
        done = q.status(ANA, "s1")
        assert done is not None and (done.status, done.attempts, done.reason) == ("done", 1, None)
        assert q.counts() == {"pending": 0, "running": 0, "done": 2, "failed": 0}
    assert (tmp_path / "extract-queue.sqlite").exists()


def test_asking_again_while_pending_queues_no_second_copy(tmp_path: Path) -> None:
    run = FakeRunner()
    with ExtractionQueue(tmp_path, run, workers=1, start=False) as q:
        for _ in range(3):
            q.enqueue(ANA, "s1")
        assert len(q.jobs()) == 1
        q.start()
        assert q.wait(20)
    assert run.sessions() == ["s1"]


def test_asking_while_it_runs_runs_it_once_more_afterwards(tmp_path: Path) -> None:
    gate = threading.Event()
    run = FakeRunner(gate=gate)
    with ExtractionQueue(tmp_path, run, workers=1) as q:
        q.enqueue(ANA, "s1")
        until(lambda: len(run.calls) == 1)
        assert q.enqueue(ANA, "s1").status == "running"  # new turns arrived during the extraction
        gate.set()
        assert q.wait(20)
        assert run.sessions() == ["s1", "s1"]
        job = q.status(ANA, "s1")
        assert job is not None and job.status == "done"


def test_a_transient_failure_is_retried_after_a_backoff(tmp_path: Path) -> None:
    run = FakeRunner(fail={"s1": 1})
    with ExtractionQueue(tmp_path, run, workers=1, backoff_s=0.3) as q:
        q.enqueue(ANA, "s1")
        until(lambda: len(run.calls) == 1)
        until(
            lambda: (j := q.status(ANA, "s1")) is not None and j.status == "pending" and j.reason is not None
        )
        waiting = q.status(ANA, "s1")
        assert (
            waiting is not None
            and waiting.attempts == 1
            and "TimeoutError: LLM timed out" in str(waiting.reason)
        )
        assert waiting.next_attempt_at is not None
        assert q.wait(20)
        (first, second) = [t for _, _, t in run.calls]
        assert second - first >= 0.3
        job = q.status(ANA, "s1")
        assert job is not None and (job.status, job.attempts, job.reason) == ("done", 2, None)


def test_three_failures_mark_the_job_failed_with_its_reason_and_it_can_be_requeued(tmp_path: Path) -> None:
    run = FakeRunner(fail={"s1": 3})
    with ExtractionQueue(tmp_path, run, workers=1, backoff_s=0.1, max_backoff_s=1.0) as q:
        q.enqueue(ANA, "s1")
        q.enqueue(ANA, "s2")
        assert q.wait(30)
        failed = q.status(ANA, "s1")
        assert failed is not None and failed.status == "failed" and failed.attempts == 3
        assert failed.reason == "TimeoutError: LLM timed out on s1"
        times = [t for _, sid, t in run.calls if sid == "s1"]
        assert len(times) == 3
        assert times[1] - times[0] >= 0.1 and times[2] - times[1] >= 0.2  # backoff 0.1 s, then 0.2 s
        assert [j.session_id for j in q.jobs(status="failed")] == ["s1"]
        s2 = q.status(ANA, "s2")
        assert s2 is not None and s2.status == "done"
        again = q.requeue(ANA, "s1")
        assert again.attempts == 0 and again.reason is None
        assert q.wait(20)
        done = q.status(ANA, "s1")
        assert done is not None and (done.status, done.attempts) == ("done", 1)
        with pytest.raises(QueueError, match="no extraction job for session 'nope'"):
            q.requeue(ANA, "nope")


def test_settle_resolves_failed_and_older_pending_jobs_but_not_newer_or_running_ones(tmp_path: Path) -> None:
    """``Memory.extract`` (the ``graphrecall extract`` command) extracted a session outside the queue: a failed job
    and a job asked for before that run began are done now; a job asked for after it, or running, is not."""
    run = FakeRunner(fail={"failed": 1})
    with ExtractionQueue(tmp_path, run, workers=1, max_attempts=1) as q:
        q.enqueue(ANA, "failed")
        assert q.wait(20)
        before = q.status(ANA, "failed")
        assert before is not None and before.status == "failed"
        q.stop()
        q.enqueue(ANA, "old")
        run_began = time.time()
        time.sleep(0.01)
        q.enqueue(ANA, "new")  # new turns arrived after the run read the session: still to do
        assert q.settle(ANA, "failed", asked_before=run_began)
        assert q.settle(ANA, "old", asked_before=run_began)
        assert not q.settle(ANA, "new", asked_before=run_began)
        assert not q.settle(ANA, "unknown", asked_before=run_began)
        assert {j.session_id: (j.status, j.reason) for j in q.jobs()} == {
            "failed": ("done", None), "old": ("done", None), "new": ("pending", None),
        }  # fmt: skip
        gate = threading.Event()
        run.gate = gate
        q.start()
        until(lambda: run.sessions()[-1:] == ["new"])
        assert not q.settle(ANA, "new", asked_before=time.time())  # its worker finishes it
        gate.set()
        assert q.wait(20) and run.sessions() == ["failed", "new"]


class Unavailable:
    """A runner whose LLM cannot answer now for the first ``times`` calls (``RetryLater``), then works."""

    def __init__(self, times: int) -> None:
        self.left = times
        self.calls: list[float] = []

    def __call__(self, scope: Scope, session_id: str) -> None:
        self.calls.append(time.monotonic())
        if self.left > 0:
            self.left -= 1
            raise RetryLater("LLMTimeout: openai local: timed out, no answer within 900s")


def test_a_deferral_is_not_an_attempt_and_is_retried_after_a_growing_backoff(tmp_path: Path) -> None:
    run = Unavailable(times=4)  # more than max_attempts: a slow model must not use up the session's tries
    with ExtractionQueue(tmp_path, run, workers=1, max_attempts=3, backoff_s=0.1, max_deferrals=5) as q:
        q.enqueue(ANA, "s1")
        until(
            lambda: (j := q.status(ANA, "s1")) is not None and j.status == "pending" and j.reason is not None
        )
        waiting = q.status(ANA, "s1")
        assert waiting is not None and waiting.attempts == 0 and waiting.next_attempt_at is not None
        assert waiting.reason == (
            "could not be done now, retried later (1 of 5): LLMTimeout: openai local: timed out, no answer within 900s"
        )
        assert q.wait(30)
        job = q.status(ANA, "s1")
        assert job is not None and (job.status, job.attempts, job.reason) == ("done", 1, None)
    gaps = [b - a for a, b in zip(run.calls, run.calls[1:], strict=False)]
    assert len(gaps) == 4
    for n, gap in enumerate(gaps):  # 0.1, 0.2, 0.4, 0.8 s
        assert gap >= 0.1 * 2**n - 0.01, gaps


def test_a_job_deferred_too_often_in_a_row_ends_failed_with_the_reason(tmp_path: Path) -> None:
    run = Unavailable(times=100)
    with ExtractionQueue(tmp_path, run, workers=1, backoff_s=0.0, max_deferrals=3) as q:
        q.enqueue(ANA, "s1")
        assert q.wait(20)
        job = q.status(ANA, "s1")
        assert job is not None and job.status == "failed" and len(run.calls) == 4
        assert job.reason == (
            "could not be done 4 times in a row; gave up: LLMTimeout: openai local: timed out, no answer within 900s"
        )
        run.left = 0
        # Retriable like any failure (the worker may already have finished it when requeue reads the status back).
        assert q.requeue(ANA, "s1").status in ("pending", "running", "done")
        assert q.wait(20)
        done = q.status(ANA, "s1")
        assert done is not None and done.status == "done" and len(run.calls) == 5


def test_a_queue_file_from_before_deferrals_opens_and_keeps_its_jobs(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "extract-queue.sqlite")
    db.execute(
        "CREATE TABLE jobs (org TEXT NOT NULL, user TEXT NOT NULL, session_id TEXT NOT NULL,"
        " status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, reason TEXT, next_attempt_at REAL,"
        " rerun INTEGER NOT NULL DEFAULT 0, enqueued_at REAL NOT NULL, updated_at REAL NOT NULL,"
        " PRIMARY KEY (org, user, session_id))"
    )
    db.execute("INSERT INTO jobs VALUES ('acme', 'ana', 's1', 'pending', 1, 'boom', 0, 0, 0, 0)")
    db.commit()
    db.close()
    run = Unavailable(times=1)
    with ExtractionQueue(tmp_path, run, workers=1, backoff_s=0.0) as q:
        assert q.wait(20)
        job = q.status(ANA, "s1")
        assert job is not None and (job.status, job.attempts) == ("done", 2) and len(run.calls) == 2


def test_requeue_failed_takes_every_failed_job_of_a_scope(tmp_path: Path) -> None:
    run = FakeRunner(fail={"a": 1, "b": 1, "c": 1})
    with ExtractionQueue(tmp_path, run, workers=1, max_attempts=1) as q:
        q.enqueue(ANA, "a")
        q.enqueue(ANA, "b")
        q.enqueue(BOB, "c")
        assert q.wait(20) and q.counts()["failed"] == 3
        assert q.requeue_failed(ANA) == 2
        assert q.wait(20)
        assert {(str(j.scope), j.session_id, j.status) for j in q.jobs()} == {
            ("acme/ana", "a", "done"), ("acme/ana", "b", "done"), ("acme/bob", "c", "failed"),
        }  # fmt: skip


def test_the_pool_is_bounded_and_a_scope_runs_one_job_at_a_time(tmp_path: Path) -> None:
    gate = threading.Event()
    run = FakeRunner(gate=gate)
    with ExtractionQueue(tmp_path, run, workers=2) as q:
        for user in ("u1", "u2", "u3"):
            for sid in ("s1", "s2"):
                q.enqueue(Scope(org_id="o", user_id=user), sid)
        until(lambda: len(run.calls) == 2)
        time.sleep(0.3)
        assert len(run.calls) == 2 and q.counts()["running"] == 2
        gate.set()
        assert q.wait(30)
    assert len(run.calls) == 6 and run.peak == 2 and not run.overlap_in_scope


def test_wait_gives_up_after_its_timeout(tmp_path: Path) -> None:
    gate = threading.Event()
    with ExtractionQueue(tmp_path, FakeRunner(gate=gate), workers=1) as q:
        q.enqueue(ANA, "s1")
        t0 = time.monotonic()
        assert q.wait(0.3) is False
        assert time.monotonic() - t0 < 5
        gate.set()
        assert q.wait(20)


def test_jobs_survive_a_restart_and_stop_leaves_pending_jobs_queued(tmp_path: Path) -> None:
    with ExtractionQueue(tmp_path, FakeRunner(), workers=1, start=False) as q:
        q.enqueue(ANA, "s1")
        q.enqueue(ANA, "s2")
    run = FakeRunner()
    with ExtractionQueue(tmp_path, run, workers=1) as q:
        assert q.wait(20)
    assert sorted(run.sessions()) == ["s1", "s2"]


CRASH_WHILE_RUNNING = textwrap.dedent(
    """
    import sys, time
    from graphrecall.extract.queue import ExtractionQueue
    from graphrecall.models import Scope

    def run(scope, sid):
        print("RUNNING", sid, flush=True)
        time.sleep(600)

    q = ExtractionQueue(sys.argv[1], run, workers=1)
    q.enqueue(Scope(org_id="acme", user_id="ana"), "s1")
    time.sleep(600)
    """
)


def test_a_job_cut_off_by_kill_9_is_resumed_and_the_cut_attempt_counts(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CRASH_WHILE_RUNNING)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().split() == ["RUNNING", "s1"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run = FakeRunner()
    with ExtractionQueue(tmp_path, run, workers=0) as q:
        job = q.status(ANA, "s1")
        assert job is not None and job.status == "pending" and job.attempts == 1
        assert job.reason is not None and "interrupted" in job.reason
        q.workers = 1
        q.start()
        assert q.wait(20)
        done = q.status(ANA, "s1")
        assert done is not None and (done.status, done.attempts) == ("done", 2)


def test_a_session_that_kills_the_process_every_time_ends_failed(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CRASH_WHILE_RUNNING)
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert line.split() == ["RUNNING", "s1"]
    run = FakeRunner()
    with ExtractionQueue(tmp_path, run, workers=1, max_attempts=3) as q:
        job = q.status(ANA, "s1")
        assert job is not None and (job.status, job.attempts) == ("failed", 3)
        assert job.reason == "interrupted: the process ended while it ran (attempt 3)"
        assert q.wait(5) and run.calls == []  # not tried a fourth time
        assert q.requeue(ANA, "s1").status in ("pending", "running", "done")  # retriable by hand
        assert q.wait(20) and run.sessions() == ["s1"]


def test_bad_options_and_session_ids_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        ExtractionQueue(tmp_path, FakeRunner(), max_attempts=0)
    with pytest.raises(ValueError, match="max_deferrals"):
        ExtractionQueue(tmp_path, FakeRunner(), max_deferrals=-1)
    with (
        ExtractionQueue(tmp_path, FakeRunner(), workers=0) as q,
        pytest.raises(InvalidInput, match="session_id: session_id must not be empty"),
    ):
        q.enqueue(ANA, "")
