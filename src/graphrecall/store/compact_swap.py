"""A bucket's file replaced by its rewrite (``store.compact``), all or nothing across a crash.

The rewrite is made in ``<bucket>.compact/new.kuzu``, beside the bucket (the same file system, so a ``rename`` moves
it). The steps, each of which a process killed at any moment leaves in a state that the next open of the bucket
settles (``finish``, which ``BucketDatabase`` runs before it opens the file):

1. the work folder is made and claimed (this process's set of buckets it compacts, and a process lock on the folder,
   ``store.proclock``); the bucket is still open in this process, so Kuzu's file lock keeps other processes out;
2. every row is copied into ``new.kuzu``, which is checked (the same count of rows and edges in every table), closed
   and synced. Killed up to here: the work folder holds no journal, and ``finish`` deletes it; the bucket is its old
   file, with Kuzu's WAL if it had one (replayed as after any crash);
3. the bucket is closed (cleanly: its WAL folded into the file and removed) and this process takes the file's lock
   itself (``fcntl.lockf`` on the file, the lock Kuzu takes), so that no other process opens the old file between
   its close and the rename; one that got in first makes the compaction give up;
4. ``journal.json`` is written and synced: the commit point. From here the rewrite is the bucket: ``finish`` puts it
   in place whoever runs it;
5. ``new.kuzu`` is renamed over the bucket's file, the folder synced, the work folder deleted.

Why the old file is never written after the journal: every opener of a bucket goes through ``finish``, which waits
for (``StoreBusy``) or finishes a compaction in progress before Kuzu opens the file. Should the old file have a WAL
or a shadow file at step 5 anyway (something opened it past this protocol), its writes would be lost or, replayed
into the rewrite, corrupt it: the swap is then rolled back instead (the rewrite deleted, the old file kept), with an
error in the log. ``tests/integration/test_compact_crash.py`` kills a compacting process at every step and during
the copy, and checks that the bucket reopens whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from graphrecall.errors import StoreBusy
from graphrecall.index.manifest import fsync_dir, write_synced
from graphrecall.store import proclock

log = logging.getLogger(__name__)

WORK_SUFFIX = ".compact"
NEW = "new.kuzu"
JOURNAL = "journal.json"
# What Kuzu keeps beside a database file while it has uncheckpointed work (recovery.py, pool.py).
SIDE_FILES = (".wal", ".shadow")

_active: set[Path] = set()  # buckets this process is compacting
_active_lock = threading.Lock()


def work_dir(path: Path) -> Path:
    """Where the rewrite of the bucket at ``path`` is made, and its journal written."""
    return Path(f"{path}{WORK_SUFFIX}")


def new_file(path: Path) -> Path:
    return work_dir(path) / NEW


@contextlib.contextmanager
def claimed(path: Path) -> Iterator[Path]:
    """Step 1 and the cleanup: this process's claim on compacting the bucket at ``path`` (open in this process) and
    an empty work folder. On exit the folder is gone: applied (``commit``), or given up."""
    path = Path(path)
    with _active_lock:
        if path in _active:
            raise StoreBusy(f"bucket {path} is being compacted already")
        _active.add(path)
    try:
        work = work_dir(path)
        proclock.acquire(work, f"bucket {path} (compacted by another process)")
        try:
            if (work / JOURNAL).exists():  # settled when the bucket was opened (``finish``): never here
                raise RuntimeError(
                    f"bucket {path}: a committed compaction was left unapplied under an open bucket"
                )
            shutil.rmtree(work, ignore_errors=True)  # a rewrite given up by a killed process
            work.mkdir()
            try:
                yield work
            finally:
                if work.exists() and not (work / JOURNAL).exists():
                    shutil.rmtree(work)  # given up before the commit point: the old file is the bucket
        finally:
            proclock.release(work)
    finally:
        with _active_lock:
            _active.discard(path)


def commit(path: Path, about: dict[str, Any], *, on_journal: Callable[[], None] | None = None) -> None:
    """Steps 3-5, once the rewrite is complete and closed and the bucket closed by the caller (inside ``claimed``):
    the old file locked against other processes, the journal written (the commit point), the rewrite put in place.
    ``about`` goes into the journal (what was copied: read by a person after a crash); ``on_journal`` is called
    once it is written (the crash tests)."""
    path = Path(path)
    new = new_file(path)
    left = [s for s in SIDE_FILES if Path(f"{path}{s}").exists() or Path(f"{new}{s}").exists()]
    if left:
        raise RuntimeError(f"bucket {path}: a database was not closed cleanly ({left}); not compacted")
    _sync(new)
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            raise StoreBusy(
                f"bucket {path} was opened by another process while it was compacted: {e}"
            ) from None
        write_synced(work_dir(path) / JOURNAL, json.dumps(about, sort_keys=True))
        if on_journal is not None:
            on_journal()
        _apply(path)
    finally:
        os.close(fd)  # the lock was on the old file, which is gone now


def finish(path: Path) -> None:
    """Before the bucket at ``path`` is opened: settle a compaction that a killed process left (the rewrite put in
    place after its commit point, deleted before it). ``StoreBusy`` while one is running, here or in another
    process. Cheap when there is nothing to do: one ``stat``."""
    path = Path(path)
    work = work_dir(path)
    if not work.exists():
        return
    with _active_lock:
        if path in _active:
            raise StoreBusy(f"bucket {path} is being compacted; retry in a moment")
    proclock.acquire(work, f"bucket {path} (being compacted by another process; retry in a moment)")
    try:
        _settle(path)
    finally:
        proclock.release(work)


def _settle(path: Path) -> None:
    """The work folder of a compaction no process runs any more: applied if it reached its commit point, else
    deleted (the caller holds the folder's process lock)."""
    work = work_dir(path)
    if not work.exists():
        return
    if (work / JOURNAL).exists():
        log.warning(
            "bucket %s: finishing its compaction, which a stopped process left after its commit", path
        )
        _apply(path)
    else:
        log.warning("bucket %s: deleting an unfinished compaction (the bucket keeps its file)", path)
        shutil.rmtree(work)


def _apply(path: Path) -> None:
    """Step 5: the rewrite in place of the old file (done already if it is no longer in the work folder)."""
    work, new = work_dir(path), new_file(path)
    left = [s for s in SIDE_FILES if Path(f"{path}{s}").exists()]
    if new.exists() and left:
        log.error(
            "bucket %s: its old file has %s beside it, written after its compaction's commit point; the "
            "compaction is rolled back (the rewrite deleted) so that those writes are kept",
            path,
            left,
        )
    elif new.exists():
        os.replace(new, path)
        fsync_dir(path.parent)
    shutil.rmtree(work)
    fsync_dir(path.parent)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
