"""``ExtractionQueue``: a durable queue of sessions to extract, run by a bounded pool of worker threads.

Why: LLM extraction takes seconds to minutes (a 1.5B local model answered at 2.5 tokens/s on a loaded machine), so
it must never run inside the request that stored the turn, and a session that cannot be extracted now must be
retried later, not lost. The queue is one SQLite file under the store root (``<root>/extract-queue.sqlite``, WAL,
``synchronous=FULL``): a job survives a crash, a restart and a shutdown.

A job is ``(scope, session_id)``, at most one per session (the primary key): asking again while it is pending
changes nothing, so a slow model never gets three copies of the same request; asking while it runs marks it to run
once more afterwards (new turns arrived during the extraction); asking after it is done or failed queues it again.

Life of a job: ``pending`` -> ``running`` (``attempts`` + 1) -> ``done``; or, when ``run`` raises, back to
``pending`` with ``next_attempt_at`` pushed out exponentially (``backoff_s * 2**(attempts-1)``, capped), and
``failed`` with the reason once ``max_attempts`` attempts failed (``requeue`` makes it pending again with a fresh
count). A job found ``running`` on open was cut off by a crash: it is pending again, and that attempt counts, so a
session that kills the process every time ends ``failed`` instead of looping.

A failure that says nothing about the session (the LLM timed out, is unreachable, overloaded or rate-limited) is
not an attempt: ``run`` raises ``RetryLater`` and the job is pending again after the same exponential backoff,
its ``attempts`` unchanged, so a model that is slow or down for a while does not use up a session's three tries;
after ``max_deferrals`` such deferrals in a row it is ``failed`` with the reason (a session too long for the
server would otherwise keep it busy forever).

Workers never run two jobs of one scope at once (extraction of a scope is sequential: later sessions version the
facts of earlier ones), and one busy scope never holds back others beyond the pool's size.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from graphrecall.errors import GraphRecallError, InvalidInput
from graphrecall.models import ExtractionJob, JobStatus, Scope, validate_identifier

log = logging.getLogger(__name__)

QUEUE_FILE = "extract-queue.sqlite"
Run = Callable[[Scope, str], None]


class QueueError(GraphRecallError):
    code = "extract_queue"


class RetryLater(Exception):
    """Raised by ``run`` when the job could not be done now for a reason outside the session (the LLM timed out,
    is unreachable or overloaded): the job is deferred, not failed (module docstring)."""


def _dt(t: float) -> datetime:
    """Unix time (as stored) to the naive UTC the models use."""
    return datetime.fromtimestamp(t, UTC).replace(tzinfo=None)


class ExtractionQueue:
    def __init__(
        self,
        root: str | Path,
        run: Run,
        *,
        workers: int = 2,
        max_attempts: int = 3,
        backoff_s: float = 30.0,
        max_backoff_s: float = 3600.0,
        max_deferrals: int = 10,
        start: bool = True,
        path: str | Path | None = None,
    ) -> None:
        """``run(scope, session_id)`` extracts one session and raises on failure (its message becomes the job's
        reason; ``RetryLater`` defers it instead). ``workers`` bounds how many extractions run at once (match it
        to the LLM server's slots)."""
        if workers < 0 or max_attempts < 1 or backoff_s < 0 or max_backoff_s < backoff_s or max_deferrals < 0:
            raise ValueError(
                "workers >= 0, max_attempts >= 1, max_deferrals >= 0 and 0 <= backoff_s <= max_backoff_s "
                "are required"
            )
        self.path = Path(path) if path is not None else Path(root) / QUEUE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run = run
        self.workers = workers
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_deferrals = max_deferrals
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._stop = False
        self._threads: list[threading.Thread] = []
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS jobs (org TEXT NOT NULL, user TEXT NOT NULL, session_id TEXT NOT NULL,"
                " status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, reason TEXT, next_attempt_at REAL,"
                " rerun INTEGER NOT NULL DEFAULT 0, enqueued_at REAL NOT NULL, updated_at REAL NOT NULL,"
                " PRIMARY KEY (org, user, session_id))"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS jobs_due ON jobs (status, next_attempt_at)")
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}
            if "deferrals" not in columns:  # a queue file from before deferrals existed
                self._db.execute("ALTER TABLE jobs ADD COLUMN deferrals INTEGER NOT NULL DEFAULT 0")
            now = time.time()
            resumed = self._db.execute(
                "UPDATE jobs SET status = CASE WHEN attempts >= ? THEN 'failed' ELSE 'pending' END,"
                " next_attempt_at = CASE WHEN attempts >= ? THEN NULL ELSE ? END,"
                " reason = 'interrupted: the process ended while it ran (attempt ' || attempts || ')',"
                " updated_at = ? WHERE status = 'running'",
                (max_attempts, max_attempts, now, now),
            ).rowcount
        except sqlite3.Error as e:
            raise QueueError(f"cannot open the extraction queue {self.path}: {e}") from e
        if resumed:
            log.warning(
                "extraction queue %s: %d job(s) interrupted by the end of a process resumed",
                self.path,
                resumed,
            )
        if start:
            self.start()

    # -- jobs ------------------------------------------------------------------------------------------------
    def enqueue(self, scope: Scope, session_id: str) -> ExtractionJob:
        """Queue a session for extraction (see the module docstring for what asking again does)."""
        try:
            validate_identifier(session_id, "session_id")
        except ValueError as e:
            raise InvalidInput(str(e), where="session_id") from None
        now = time.time()
        with self._lock:
            self._exec(
                "INSERT INTO jobs (org, user, session_id, status, attempts, next_attempt_at, enqueued_at, updated_at)"
                " VALUES (?, ?, ?, 'pending', 0, ?, ?, ?)"
                " ON CONFLICT (org, user, session_id) DO UPDATE SET"
                "  rerun = CASE WHEN status = 'running' THEN 1 ELSE rerun END,"
                "  attempts = CASE WHEN status IN ('done', 'failed') THEN 0 ELSE attempts END,"
                "  deferrals = CASE WHEN status IN ('done', 'failed') THEN 0 ELSE deferrals END,"
                "  reason = CASE WHEN status IN ('done', 'failed') THEN NULL ELSE reason END,"
                "  next_attempt_at = CASE WHEN status IN ('done', 'failed') THEN excluded.next_attempt_at"
                "   ELSE next_attempt_at END,"
                "  enqueued_at = CASE WHEN status IN ('done', 'failed') THEN excluded.enqueued_at ELSE enqueued_at END,"
                "  updated_at = excluded.updated_at,"
                "  status = CASE WHEN status IN ('done', 'failed') THEN 'pending' ELSE status END",
                (scope.org_id, scope.user_id, session_id, now, now, now),
            )
        self._wake()
        job = self.status(scope, session_id)
        assert job is not None
        return job

    def requeue(self, scope: Scope, session_id: str) -> ExtractionJob:
        """Run a failed (or done) session again with a fresh attempt count."""
        if self.status(scope, session_id) is None:
            raise QueueError(f"no extraction job for session {session_id!r} in scope {scope}")
        return self.enqueue(scope, session_id)

    def requeue_failed(self, scope: Scope | None = None) -> int:
        """Every failed job (of one scope, or all) back to pending; returns how many."""
        now = time.time()
        where, args = ("status = 'failed'", [])
        if scope is not None:
            where += " AND org = ? AND user = ?"
            args = [scope.org_id, scope.user_id]
        with self._lock:
            n = self._exec(
                "UPDATE jobs SET status = 'pending', attempts = 0, deferrals = 0, reason = NULL,"
                f" next_attempt_at = ?, updated_at = ? WHERE {where}",
                (now, now, *args),
            ).rowcount
        self._wake()
        return n

    def settle(self, scope: Scope, session_id: str, *, asked_before: float) -> bool:
        """Mark a job done because its session was extracted outside the queue (``Memory.extract``, the
        ``graphrecall extract`` command) by a run that started at ``asked_before`` (unix time). Without this a
        failed job would keep showing ``failed`` over a session that is in fact extracted, and a pending one
        would send the model the same session again. Only a failed job, or a pending one last asked for before
        that run began (so the run saw every turn it was asked for), is settled; a running job is left to its
        worker. Returns whether the job changed."""
        now = time.time()
        with self._lock:
            n = self._exec(
                "UPDATE jobs SET status = 'done', reason = NULL, next_attempt_at = NULL, rerun = 0, updated_at = ?"
                " WHERE org = ? AND user = ? AND session_id = ?"
                " AND (status = 'failed' OR (status = 'pending' AND updated_at <= ?))",
                (now, scope.org_id, scope.user_id, session_id, asked_before),
            ).rowcount
        if n:
            self._wake()
        return bool(n)

    def status(self, scope: Scope, session_id: str) -> ExtractionJob | None:
        rows = self._select(
            "WHERE org = ? AND user = ? AND session_id = ?", (scope.org_id, scope.user_id, session_id)
        )
        return rows[0] if rows else None

    def jobs(self, scope: Scope | None = None, status: JobStatus | None = None) -> list[ExtractionJob]:
        clauses, args = [], []
        if scope is not None:
            clauses.append("org = ? AND user = ?")
            args += [scope.org_id, scope.user_id]
        if status is not None:
            clauses.append("status = ?")
            args.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return self._select(f"{where} ORDER BY enqueued_at, org, user, session_id", tuple(args))

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._exec("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
        return {"pending": 0, "running": 0, "done": 0, "failed": 0, **{r[0]: int(r[1]) for r in rows}}

    def forget(self, scope: Scope) -> int:
        """Drop every job of a scope (the scope was erased)."""
        with self._lock:
            return int(
                self._exec(
                    "DELETE FROM jobs WHERE org = ? AND user = ?", (scope.org_id, scope.user_id)
                ).rowcount
            )

    def forget_sessions(self, scope: Scope, session_ids: Sequence[str]) -> int:
        """Drop the jobs of erased sessions (a running one finds its session gone and fails harmlessly)."""
        with self._lock:
            return sum(
                int(
                    self._exec(
                        "DELETE FROM jobs WHERE org = ? AND user = ? AND session_id = ?",
                        (scope.org_id, scope.user_id, sid),
                    ).rowcount
                )
                for sid in session_ids
            )

    # -- workers ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        with self._cond:
            self._stop = False
        while len(self._threads) < self.workers:
            t = threading.Thread(
                target=self._work, name=f"graphrecall-extract-{len(self._threads)}", daemon=True
            )
            self._threads.append(t)
            t.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no job is pending or running (all done or failed); False if ``timeout`` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                c = self.counts()
                if c["pending"] == 0 and c["running"] == 0:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.5 if left is None else min(0.5, left))

    def stop(self) -> None:
        """Let running jobs finish and stop the workers; pending jobs stay queued for the next start."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._threads:
            t.join()
        self._threads = []

    def close(self) -> None:
        self.stop()
        with self._lock:
            self._db.close()

    def __enter__(self) -> ExtractionQueue:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _work(self) -> None:
        while True:
            with self._cond:
                if self._stop:
                    return
            try:
                job, wait_s = self._claim()
            except QueueError as e:  # the queue file failed: back off, keep the thread
                log.warning("%s", e)
                job, wait_s = None, 1.0
            if job is None:
                with self._cond:
                    if not self._stop:
                        self._cond.wait(wait_s)
                continue
            try:
                self.run(job.scope, job.session_id)
            except RetryLater as e:
                self._finish(job, error=str(e) or "retry later", later=True)
            except Exception as e:
                self._finish(job, error=f"{type(e).__name__}: {e}")
            else:
                self._finish(job, error=None)

    def _claim(self) -> tuple[ExtractionJob | None, float]:
        """Take the next due job of a scope with nothing running; else None and how long to sleep."""
        now = time.time()
        with self._lock:
            self._exec("BEGIN IMMEDIATE")
            try:
                row = self._exec(
                    "SELECT org, user, session_id FROM jobs j WHERE status = 'pending' AND next_attempt_at <= ?"
                    " AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.status = 'running' AND r.org = j.org"
                    " AND r.user = j.user) ORDER BY next_attempt_at, enqueued_at LIMIT 1",
                    (now,),
                ).fetchone()
                if row is not None:
                    self._exec(
                        "UPDATE jobs SET status = 'running', attempts = attempts + 1, rerun = 0, updated_at = ?"
                        " WHERE org = ? AND user = ? AND session_id = ?",
                        (now, *row),
                    )
                nxt = self._exec("SELECT min(next_attempt_at) FROM jobs WHERE status = 'pending'").fetchone()[
                    0
                ]
                self._exec("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise
        if row is None:
            wait_s = 1.0 if nxt is None else max(0.01, min(1.0, float(nxt) - now))
            return None, wait_s
        job = self.status(Scope(org_id=row[0], user_id=row[1]), row[2])
        return job, 0.0

    def _backoff(self, n: int) -> float:
        """Delay before the next try after the ``n``-th failure (1-based): exponential, capped."""
        return min(self.max_backoff_s, self.backoff_s * 2.0 ** (n - 1))

    def _finish(self, job: ExtractionJob, *, error: str | None, later: bool = False) -> None:
        now = time.time()
        key = (job.scope.org_id, job.scope.user_id, job.session_id)
        with self._lock:
            cur = self._exec(
                "SELECT attempts, rerun, deferrals FROM jobs WHERE org = ? AND user = ? AND session_id = ?",
                key,
            ).fetchone()
            if cur is None:  # forgotten while it ran
                return
            attempts, rerun, deferrals = int(cur[0]), bool(cur[1]), int(cur[2])
            if error is None and rerun:
                status, reason, nxt, attempts = "pending", None, now, 0  # new turns came in: extract again
                deferrals = 0
            elif error is None:
                status, reason, nxt, deferrals = "done", None, None, 0
            elif later and deferrals < self.max_deferrals:
                attempts, deferrals = attempts - 1, deferrals + 1  # the session was not the problem
                status, nxt = "pending", now + self._backoff(deferrals)
                reason = (
                    f"could not be done now, retried later ({deferrals} of {self.max_deferrals}): {error}"
                )
            elif later:
                status, nxt = "failed", None
                reason = f"could not be done {deferrals + 1} times in a row; gave up: {error}"
            elif attempts >= self.max_attempts:
                status, reason, nxt = "failed", error, None
            else:
                status, reason = "pending", error
                nxt = now + self._backoff(attempts)
            self._exec(
                "UPDATE jobs SET status = ?, reason = ?, next_attempt_at = ?, attempts = ?, deferrals = ?,"
                " rerun = 0, updated_at = ? WHERE org = ? AND user = ? AND session_id = ?",
                (status, reason, nxt, attempts, deferrals, now, *key),
            )
        if later and status == "pending":
            log.warning(
                "extraction of %s/%s deferred (%d of %d): %s",
                job.scope, job.session_id, deferrals, self.max_deferrals, error,
            )  # fmt: skip
        elif error is not None:
            log.warning(
                "extraction of %s/%s failed (attempt %d of %d): %s",
                job.scope, job.session_id, attempts, self.max_attempts, error,
            )  # fmt: skip
        self._wake()

    # -- sqlite ----------------------------------------------------------------------------------------------
    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _exec(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, args)
        except sqlite3.Error as e:
            raise QueueError(f"extraction queue {self.path}: {e}") from e

    def _select(self, where: str, args: tuple[object, ...]) -> list[ExtractionJob]:
        with self._lock:
            rows = self._exec(
                "SELECT org, user, session_id, status, attempts, reason, next_attempt_at, enqueued_at, updated_at"
                f" FROM jobs {where}",
                args,
            ).fetchall()
        return [
            ExtractionJob(
                scope=Scope(org_id=r[0], user_id=r[1]),
                session_id=r[2],
                status=r[3],
                attempts=r[4],
                reason=r[5],
                next_attempt_at=_dt(r[6]) if r[3] == "pending" and r[6] is not None else None,
                enqueued_at=_dt(r[7]),
                updated_at=_dt(r[8]),
            )
            for r in rows
        ]
