"""A scope replaced by a copy rebuilt beside the store, all or nothing across a crash (``graphrecall reembed``,
``graphrecall.reembed``).

A scope is rows in a bucket (``store.buckets``: one folder of buckets per embedder) and files of its own (its derived
indexes' folder, its write log and SQLite's companions), so no single ``rename`` swaps it. The swap is journaled, and
every step can be done again:

1. the rebuilt scope is complete and closed in ``<root>/.reembed/build`` (a store of its own: its rows in a bucket of
   the new embedder, its own files beside); the journal ``<root>/.reembed/swap.json`` (the scope, both embedders,
   the names of the files that arrive, whether the rebuild holds rows) is written and synced. This is the commit
   point: before it the old scope is the scope, after it the rebuilt one is;
2. the rebuilt rows are copied into the root's bucket of the new embedder, in one transaction (``store.move``),
   unless that bucket holds the scope already, whole (a copy done before a crash; one that Kuzu tore, its ``COPY``
   lost in a checkpoint cut off by the crash, is dropped and made again: ``store.move.torn``);
3. every old file of the scope is moved aside into ``<root>/.reembed/old/<org>/``, then every rebuilt file into
   ``<root>/<org>/`` (``os.replace``: the same file system, since the work folder is inside the root);
4. the scope's rows leave the old embedder's bucket (one transaction), the folder is synced, the journal removed,
   the old files deleted.

A process killed during 2-4 leaves the journal; the next ``Memory.open`` of the root (``DatabasePool``) or the next
``reembed`` finishes it before it opens anything (``finish``), unless the scope's process lock (``store.proclock``)
is held or a bucket it needs is open in another process: then that process is alive, and the swap waits for it. A
journal whose rebuilt files are gone (deleted by hand) is rolled back: the old files return and rows already copied
leave the new bucket. ``.reembed`` cannot be a scope's organisation (identifiers never start with a dot), so no walk of
the root mistakes it for one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from graphrecall.config import BUCKETS_PER_ORG
from graphrecall.errors import StoreBusy
from graphrecall.index.manifest import fsync_dir, write_synced
from graphrecall.models import Scope
from graphrecall.store import buckets, proclock
from graphrecall.store.database import BucketDatabase
from graphrecall.store.move import BucketSource, copy_scope, drop_torn
from graphrecall.store.wal.log import log_path

log = logging.getLogger(__name__)

WORK = ".reembed"
JOURNAL = "swap.json"
# What a scope may hold beside its rows, by suffix after the user id (``DatabasePool.drop``, ``store.wal``; a
# database per scope of earlier code, ``store.legacy``). Not the write log's process lock
# (``<user>.log.sqlite.lock``): it is held for the whole run, and moving it would let a second process take a fresh one.
SCOPE_SUFFIXES = (
    ".kuzu", ".kuzu.wal", ".kuzu.lock", ".kuzu.shadow", ".kuzu.fts-rebuild", ".kuzu.idx",
    ".log.sqlite", ".log.sqlite-wal", ".log.sqlite-shm",
)  # fmt: skip
SWAP_BUFFER_POOL = 64 << 20  # the buckets a swap opens: it copies one scope's rows a page at a time

OnMove = Callable[
    [], None
]  # called after each step of a swap: the rows' copy, each file moved, the rows' drop
Embedder = tuple[str, int]


def work_dir(root: Path) -> Path:
    """Where scopes are rebuilt (``build/``), old files wait to be deleted (``old/``) and the journal lives."""
    return Path(root) / WORK


def scope_files(root: Path, scope: Scope) -> list[Path]:
    """The scope's own files under ``root`` that a swap replaces (its rows are in a bucket)."""
    org = Path(root) / scope.org_id
    return [p for p in (org / f"{scope.user_id}{s}" for s in SCOPE_SUFFIXES) if p.exists()]


def swap(
    root: Path,
    scope: Scope,
    *,
    old: Embedder,
    new: Embedder,
    on_move: OnMove | None = None,
    empty: bool = False,
) -> None:
    """Put the scope rebuilt under ``work_dir(root)/build`` with the embedder ``new`` in place of the scope under
    ``root`` written with ``old`` (module docstring). The caller holds the scope's process lock and has closed both
    stores. ``empty``: the scope held nothing, so the rebuild may have no rows and no files (the old ones are then
    removed: a scope with nothing reads as empty)."""
    work = work_dir(root)
    arriving = sorted(p.name for p in scope_files(work / "build", scope))
    rows = _holds(work / "build", scope, new)
    if not empty and not rows and not any(n.endswith(".log.sqlite") for n in arriving):
        raise RuntimeError(
            f"the rebuilt scope {scope} has neither rows nor a write log under {work / 'build'}"
        )
    write_synced(
        work / JOURNAL,
        json.dumps(
            {
                "org_id": scope.org_id,
                "user_id": scope.user_id,
                "arriving": arriving,
                "rows": rows,
                "old": list(old),
                "new": list(new),
            }
        ),
    )
    _finish(root, on_move)


def finish(root: Path) -> Scope | None:
    """Finish (or roll back) a swap a killed process left half done; the scope it finished, or None when there
    was none, or when the process doing it is alive. Cheap when there is nothing to do: one ``stat``."""
    if not (work_dir(root) / JOURNAL).exists():
        return None
    return _finish(root, None)


def _bucket(root: Path, scope: Scope, embedder: Embedder, *, create: bool = False) -> BucketDatabase | None:
    """The bucket of ``embedder`` that holds (or, with ``create``, is to hold) the scope's rows under ``root``,
    open; None when there is none. The caller closes it."""
    if create:
        known = buckets.manifests(root, scope.org_id)  # the organisation keeps its number of buckets
        count = known[0].buckets if known else BUCKETS_PER_ORG
        m: buckets.Manifest | None = buckets.ensure_manifest(
            root, scope.org_id, embedder[0], embedder[1], count
        )
    else:
        m = buckets.manifest(root, scope.org_id, embedder[0], embedder[1])
    if m is None or not (create or m.path_for(scope.user_id).exists()):
        return None
    return BucketDatabase(
        m.path_for(scope.user_id), embedder_id=embedder[0], dim=embedder[1], buffer_pool_size=SWAP_BUFFER_POOL
    )


def _holds(root: Path, scope: Scope, embedder: Embedder) -> bool:
    bucket = _bucket(root, scope, embedder)
    if bucket is None:
        return False
    try:
        return bucket.member(scope.user_id) is not None
    finally:
        bucket.close()


def _finish(root: Path, on_move: OnMove | None) -> Scope | None:
    work = work_dir(root)
    journal = work / JOURNAL
    try:
        plan: dict[str, Any] = json.loads(journal.read_text())
    except FileNotFoundError:
        return None  # finished meanwhile by the process that owns it
    scope = Scope(org_id=plan["org_id"], user_id=plan["user_id"])
    arriving: Sequence[str] = plan["arriving"]
    old: Embedder = (plan["old"][0], int(plan["old"][1]))
    new: Embedder = (plan["new"][0], int(plan["new"][1]))
    lock = log_path(root, scope)
    try:
        proclock.acquire(lock, f"scope {scope}")
    except StoreBusy:
        return None  # the process swapping it is alive (or serves it: it finished the swap when it opened)
    try:
        new_dir, old_dir, target = (
            work / "build" / scope.org_id,
            work / "old" / scope.org_id,
            root / scope.org_id,
        )
        old_dir.mkdir(parents=True, exist_ok=True)
        target.mkdir(parents=True, exist_ok=True)
        gone = [n for n in arriving if not (new_dir / n).exists() and not (target / n).exists()]
        placed = _holds(root, scope, new) and not _dropped_torn(root, scope, new)
        if plan["rows"] and not placed and not _holds(work / "build", scope, new):
            gone.append("the rebuilt rows")
        if gone:
            _roll_back(root, scope, new, old_dir, target, arriving, gone)
            journal.unlink()
            return None
        if plan["rows"] and not placed:  # 2: the rebuilt rows into the root's bucket of the new embedder
            _copy_rows(root, scope, new)
            if on_move is not None:
                on_move()
        for suffix in SCOPE_SUFFIXES:  # 3a: the old files aside (an arrived file is no longer in the build)
            name = f"{scope.user_id}{suffix}"
            if (target / name).exists() and (name not in arriving or (new_dir / name).exists()):
                _move(target / name, old_dir / name, on_move)
        for name in arriving:  # 3b: the rebuilt ones in
            if (new_dir / name).exists():
                _move(new_dir / name, target / name, on_move)
        if old != new:  # 4: the old rows out
            _drop(root, scope, old)
            if on_move is not None:
                on_move()
        fsync_dir(target)
        journal.unlink()
        fsync_dir(work)
        shutil.rmtree(work / "old", ignore_errors=True)
        log.info("scope %s: its rebuilt rows and files are in place", scope)
        return scope
    except StoreBusy as e:  # a bucket it needs is open in another process (a server): the swap waits for it
        log.warning("scope %s: the swap of its rebuilt copy waits: %s", scope, e)
        return None
    finally:
        proclock.release(lock)


def _copy_rows(root: Path, scope: Scope, new: Embedder) -> None:
    source = _bucket(work_dir(root) / "build", scope, new)
    assert source is not None
    try:
        member = source.member(scope.user_id)
        assert member is not None
        marks = dict(member.marks)  # read from its Scope row when the bucket was opened, just above
        target = _bucket(root, scope, new, create=True)
        assert target is not None
        try:
            copy_scope(target, scope.user_id, BucketSource(source, scope.user_id), marks)
        finally:
            target.close()
    finally:
        source.close()


def _dropped_torn(root: Path, scope: Scope, new: Embedder) -> bool:
    """Whether the rows a killed swap copied into the root's bucket (step 2) were torn by Kuzu (``store.move``: the
    ``Scope`` row kept, rows a ``COPY`` wrote lost) and so dropped, to be copied again from the rebuild. A rebuild
    that no longer holds the scope cannot be compared with: the copy stands."""
    source = _bucket(work_dir(root) / "build", scope, new)
    if source is None:
        return False
    try:
        if source.member(scope.user_id) is None:
            return False
        target = _bucket(root, scope, new)
        assert target is not None
        try:
            return drop_torn(target, scope.user_id, BucketSource(source, scope.user_id), f"scope {scope}")
        finally:
            target.close()
    finally:
        source.close()


def _drop(root: Path, scope: Scope, embedder: Embedder) -> None:
    bucket = _bucket(root, scope, embedder)
    if bucket is not None:
        try:
            bucket.drop_scope(scope.user_id)
        finally:
            bucket.close()


def _roll_back(
    root: Path,
    scope: Scope,
    new: Embedder,
    old_dir: Path,
    target: Path,
    arriving: Sequence[str],
    gone: Sequence[str],
) -> None:
    """The rebuilt files are gone (deleted by hand): the old ones return, any rebuilt one that had arrived leaves
    (into ``old_dir``'s place, so the two never mix), and rows copied into the new embedder's bucket leave it."""
    log.error(
        "scope %s: the rebuilt files %s are gone; the swap is rolled back to the old files", scope, list(gone)
    )
    stray = old_dir.parent.parent / "stray" / scope.org_id
    stray.mkdir(parents=True, exist_ok=True)
    for name in arriving:
        if (target / name).exists() and (old_dir / name).exists():
            os.replace(target / name, stray / name)
    for p in old_dir.iterdir():
        if not (target / p.name).exists():
            os.replace(p, target / p.name)
    _drop(root, scope, new)
    fsync_dir(target)


def _move(src: Path, dst: Path, on_move: OnMove | None) -> None:
    if dst.is_dir():
        shutil.rmtree(dst)
    os.replace(src, dst)
    if on_move is not None:
        on_move()
