"""``WriteLog``: the durable per-scope append log that acknowledges writes before they reach Kuzu.

Why SQLite: it is in the standard library, a commit in WAL journal mode with ``synchronous=FULL`` is one append to
the ``-wal`` file plus one fsync (an acknowledged write survives a power loss, not only a killed process), and its
recovery after a crash is its own, tested for decades. One file per scope, beside the scope's Kuzu database
(``<root>/<org>/<user>.log.sqlite``): scopes share nothing, so appends to different users never wait for each
other, and forgetting a user deletes its log with its database.

Layout: ``entries(seq INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT, vectors BLOB, crc INTEGER)``. AUTOINCREMENT
makes ``seq`` strictly increasing for the life of the file, also after every entry was flushed and deleted, so a
sequence number is never reused. ``crc`` (CRC-32 of payload and vectors) turns a damaged row into a clear error
naming its ``seq`` instead of silently wrong rows in Kuzu.

Contract: ``append`` returns only after the entry's transaction committed (fsync'd); an exception from it means
nothing was acknowledged and nothing was stored. ``pending`` returns the unflushed entries in ``seq`` order;
``mark_flushed(upto)`` deletes them once the caller has them in Kuzu. An entry may be applied to Kuzu more than once
(a crash between the Kuzu commit and ``mark_flushed``), which is why entries must be idempotent to replay (see
``docs/write-log.md``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sqlite3
import threading
import time
import zlib
from pathlib import Path
from types import TracebackType

from graphrecall.errors import GraphRecallError, StorageFull
from graphrecall.models import Scope
from graphrecall.store.space import no_room
from graphrecall.store.wal.entry import WriteEntry

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log.sqlite"
FILE_FORMAT = 1  # PRAGMA user_version of the log file
# The -wal file is folded back into the database after this many pages (SQLite's default is 1000 = 4 MB); small,
# because a scope's log is meant to stay small (entries leave it at every flush).
WAL_AUTOCHECKPOINT_PAGES = 256
WAL_SIZE_LIMIT = 64 * 1024


class WriteLogError(GraphRecallError):
    """An append could not be made durable (disk full, I/O error, log closed): nothing was acknowledged."""

    code = "write_log"


class WriteLogFull(WriteLogError, StorageFull):
    """An append found no room (a full file system, the file-size limit, the log's ``max_bytes`` cap): nothing was
    acknowledged. A ``StorageFull`` too, so that callers and the HTTP layer (507) need not know about the log."""

    code = StorageFull.code


class WriteLogCorrupt(WriteLogError):
    """A stored entry cannot be read back; the message names its ``seq`` and the log file."""

    code = "write_log_corrupt"


def log_path(root: Path, scope: Scope) -> Path:
    """Where a scope's log lives: beside its Kuzu database ``<root>/<org>/<user>.kuzu``."""
    return Path(root) / scope.org_id / f"{scope.user_id}{LOG_SUFFIX}"


def _crc(payload: str, blob: bytes) -> int:
    return zlib.crc32(blob, zlib.crc32(payload.encode("utf-8")))


class WriteLog:
    """One scope's append log. Thread-safe: one SQLite connection behind a lock (an append is one short
    transaction, so the lock is held for one fsync at most)."""

    def __init__(self, path: str | Path, *, max_bytes: int | None = None) -> None:
        """Open (creating if needed) the log at ``path``. ``max_bytes`` caps the file: an append that would grow it
        past the cap fails like a full disk (back-pressure when flushing is failing for long)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        new = not self.path.exists()
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        except sqlite3.Error as e:
            raise self._error(e, f"cannot open write log {self.path}: ", str(e)) from e
        try:
            self._setup(max_bytes)
        except sqlite3.Error as e:
            self._db.close()
            raise self._error(e, f"cannot open write log {self.path}: ", str(e)) from e
        if new:
            _fsync_dir(self.path.parent)
        # A second connection for ``pending``: in WAL mode a reader never blocks the writer, so the flusher reading a
        # batch never delays an append (the two locks are separate).
        self._read_lock = threading.Lock()
        self._reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        self._reader.execute(
            "PRAGMA query_only=1"
        )  # the new file's directory entry must survive a power loss too
        row = self._db.execute("SELECT count(*), min(seq), max(seq) FROM entries").fetchone()
        self._pending = int(row[0])
        last = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name='entries'").fetchone()
        self._last_seq = int(last[0]) if last else 0
        # Monotonic time of the oldest unflushed append, for flushing by age; entries found on open are due now.
        self._oldest: float | None = -math.inf if self._pending else None
        self._closed = False
        if self._pending:
            log.info(
                "write log %s: %d unflushed entries (seq %s..%s) to replay", self.path, row[0], row[1], row[2]
            )

    def _setup(self, max_bytes: int | None) -> None:
        db = self._db
        # auto_vacuum must be chosen before the first table exists: FULL gives flushed entries' pages back to the
        # file system at each commit, so an idle scope's log is a few KB, not its high-water mark.
        db.execute("PRAGMA auto_vacuum=FULL")
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"journal_mode WAL refused (got {mode})")
        db.execute("PRAGMA synchronous=FULL")  # fsync the WAL at every commit: durable on power loss
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        # After a checkpoint the -wal file is reused from its start; this caps what it keeps on disk meanwhile.
        db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        if max_bytes is not None:
            page = int(db.execute("PRAGMA page_size").fetchone()[0])
            db.execute(f"PRAGMA max_page_count={max(2, max_bytes // page)}")
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > FILE_FORMAT:
            raise sqlite3.DatabaseError(
                f"log file format {version} is newer than this graphrecall reads ({FILE_FORMAT})"
            )
        db.execute(
            "CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT NOT NULL,"
            " vectors BLOB NOT NULL, crc INTEGER NOT NULL)"
        )
        # Facts about the log as a whole (the embedder its vectors came from); older logs get the table on open,
        # and older code never reads it, so the file format stays.
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        if version < FILE_FORMAT:
            db.execute(f"PRAGMA user_version={FILE_FORMAT}")

    def claim(self, key: str, value: str) -> str | None:
        """Record ``value`` under ``key`` unless the log has one: returns the stored value when it differs, else
        None. Why: a scope that lives in its log has no Kuzu ``Meta`` node to say which embedder made its vectors."""
        with self._lock:
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    return None if row[0] == value else str(row[0])
                self._db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))
            except sqlite3.Error as e:
                raise self._error(e, f"write log {self.path}: ", str(e)) from e
        return None

    # -- writing ---------------------------------------------------------------------------------------------
    def append(self, entry: WriteEntry) -> WriteEntry:
        """Store ``entry`` durably and return it with its ``seq``. Raises ``WriteLogError`` (nothing stored) when
        the commit fails: disk full, I/O error, the ``max_bytes`` cap, a closed log."""
        payload, blob = entry.payload_json(), entry.vector_blob()
        with self._lock:
            self._check_open()
            try:
                self._db.execute("BEGIN IMMEDIATE")
                cur = self._db.execute(
                    "INSERT INTO entries (payload, vectors, crc) VALUES (?, ?, ?)",
                    (payload, blob, _crc(payload, blob)),
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise self._error(
                    e,
                    f"write log {self.path}: ",
                    f"the write was not stored ({_describe(e)}); nothing was acknowledged",
                ) from e
            seq = int(cur.lastrowid or 0)
            self._last_seq = seq
            self._pending += 1
            if self._oldest is None:
                self._oldest = time.monotonic()
        return entry.model_copy(update={"seq": seq})

    def mark_flushed(self, upto_seq: int) -> int:
        """Delete every entry with ``seq <= upto_seq`` (they are in Kuzu now); returns how many were deleted."""
        with self._lock:
            self._check_open()
            try:
                deleted = max(0, self._db.execute("DELETE FROM entries WHERE seq <= ?", (upto_seq,)).rowcount)
            except sqlite3.Error as e:
                self._rollback()
                raise WriteLogError(
                    f"write log {self.path}: could not mark seq <= {upto_seq} flushed ({e})"
                ) from e
            # No checkpoint here: it would hold the append lock for an fsync of the database file (measured: append
            # p99 2.5x worse with a flusher running). SQLite's auto-checkpoint and ``compact``/``close`` do it.
            self._pending = max(0, self._pending - deleted)
            if self._pending == 0:
                self._oldest = None
            return deleted

    def compact(self) -> None:
        """Fold the ``-wal`` file into the database and truncate it (for a scope going idle; ``close`` does it)."""
        with self._lock:
            self._check_open()
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as e:
                raise WriteLogError(f"write log {self.path}: checkpoint failed ({e})") from e

    # -- reading ---------------------------------------------------------------------------------------------
    def pending(self, limit: int | None = None, *, after: int = 0) -> list[WriteEntry]:
        """Unflushed entries with ``seq > after`` in ``seq`` order (at most ``limit``). A damaged entry raises
        ``WriteLogCorrupt`` naming its ``seq``: it is never skipped silently."""
        with self._read_lock:
            self._check_open()
            rows = self._reader.execute(
                "SELECT seq, payload, vectors, crc FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, -1 if limit is None else limit),
            ).fetchall()
        out: list[WriteEntry] = []
        for seq, payload, blob, crc in rows:
            try:
                if not isinstance(payload, str) or not isinstance(blob, bytes):
                    raise ValueError("payload or vectors column has the wrong type")
                if _crc(payload, blob) != crc:
                    raise ValueError("checksum mismatch")
                out.append(WriteEntry.from_stored(int(seq), payload, blob))
            except ValueError as e:  # pydantic's ValidationError and json's JSONDecodeError are ValueErrors
                raise WriteLogCorrupt(
                    f"write log {self.path}: entry seq {seq} is unreadable ({_first_line(e)}); move the file "
                    "aside to open the store without it (its unflushed writes are then lost)"
                ) from e
        return out

    @property
    def pending_count(self) -> int:
        return self._pending

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` ever assigned in this file (0 for a new log)."""
        return self._last_seq

    @property
    def oldest_pending_at(self) -> float | None:
        """``time.monotonic()`` of the oldest unflushed append (-inf for entries found on open), None if none."""
        return self._oldest

    def size_bytes(self) -> int:
        """The log's footprint on disk: the database file and its ``-wal``."""
        total = 0
        for p in self._files():
            with contextlib.suppress(FileNotFoundError):
                total += p.stat().st_size
        return total

    # -- lifecycle -------------------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock, self._read_lock:
            if self._closed:
                return
            self._closed = True
            self._reader.close()
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as e:  # the data is safe in the -wal file; SQLite folds it back on next open
                log.warning("write log %s: checkpoint on close failed (%s)", self.path, e)
            self._db.close()

    def __enter__(self) -> WriteLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _error(self, e: sqlite3.Error, head: str, tail: str) -> WriteLogError:
        """``WriteLogFull`` naming what is full when the write found no room, else ``WriteLogError``: the message is
        ``head``, that explanation if any, then ``tail`` (SQLite's own words)."""
        if (
            self.max_bytes is not None
            and getattr(e, "sqlite_errorname", "") == "SQLITE_FULL"
            and self.size_bytes() + (64 << 10) >= self.max_bytes
        ):
            reason: str | None = (
                f"the log reached its cap of {self.max_bytes} bytes (max_bytes; writes into the store have "
                "been failing for a while)"
            )
        else:
            reason = no_room(e, self._files())
        if reason is None:
            return WriteLogError(head + tail)
        return WriteLogFull(f"{head}no room for the write: {reason}; {tail}")

    def _files(self) -> list[Path]:
        return [self.path, self.path.with_name(self.path.name + "-wal")]

    def _check_open(self) -> None:
        if self._closed:
            raise WriteLogError(f"write log {self.path} is closed")

    def _rollback(self) -> None:
        # SQLite may have rolled back already (SQLITE_FULL does); nothing was committed either way.
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")


def _describe(e: sqlite3.Error) -> str:
    """SQLite's message with its error name: "disk I/O error, SQLITE_IOERR_WRITE" says what failed."""
    name = getattr(e, "sqlite_errorname", "")
    return f"{e}, {name}" if name else str(e)


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
