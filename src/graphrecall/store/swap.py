"""A scope's files replaced by those of a copy rebuilt beside them, all or nothing across a crash (``graphrecall
reembed``, ``graphrecall.reembed``).

A scope is several files (its Kuzu database, the derived indexes' folder, its write log and SQLite's companions),
so no single ``rename`` swaps it. The swap is journaled instead, and every step can be done again:

1. the rebuilt scope is complete and closed in ``<root>/.reembed/build/<org>/``; the journal
   ``<root>/.reembed/swap.json`` (the scope and the names of the files that arrive) is written and synced. This is
   the commit point: before it the old scope is the scope, after it the rebuilt one is;
2. every old file of the scope is moved aside into ``<root>/.reembed/old/<org>/``, then every rebuilt file into
   ``<root>/<org>/`` (``os.replace``: the same file system, since the work folder is inside the root);
3. the folder is synced, the journal removed, the old files deleted.

A process killed during 2 or 3 leaves the journal; the next ``Memory.open`` of the root (``DatabasePool``) or the
next ``reembed`` finishes it before it opens anything (``finish``), unless the scope's process lock
(``store.proclock``) is held: then the process doing the swap is alive, and finishes it itself. A journal whose
rebuilt files are gone (deleted by hand) is rolled back: the old files return. ``.reembed`` cannot be a scope's
organisation (identifiers never start with a dot), so no walk of the root mistakes it for one.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from graphrecall.errors import StoreBusy
from graphrecall.index.manifest import fsync_dir
from graphrecall.models import Scope
from graphrecall.store import proclock
from graphrecall.store.wal.log import log_path

log = logging.getLogger(__name__)

WORK = ".reembed"
JOURNAL = "swap.json"
# What a scope may hold beside its database, by suffix after the user id (``DatabasePool.drop``, ``store.wal``). Not
# the write log's process lock (``<user>.log.sqlite.lock``): it is held for the whole run, and moving it would let a
# second process take a fresh one.
SCOPE_SUFFIXES = (
    ".kuzu", ".kuzu.wal", ".kuzu.lock", ".kuzu.shadow", ".kuzu.fts-rebuild", ".kuzu.idx",
    ".log.sqlite", ".log.sqlite-wal", ".log.sqlite-shm",
)  # fmt: skip

OnMove = Callable[[], None]


def work_dir(root: Path) -> Path:
    """Where scopes are rebuilt (``build/``), old files wait to be deleted (``old/``) and the journal lives."""
    return Path(root) / WORK


def scope_files(root: Path, scope: Scope) -> list[Path]:
    """The scope's files under ``root`` that a swap replaces."""
    org = Path(root) / scope.org_id
    return [p for p in (org / f"{scope.user_id}{s}" for s in SCOPE_SUFFIXES) if p.exists()]


def swap(root: Path, scope: Scope, *, on_move: OnMove | None = None, empty: bool = False) -> None:
    """Put the scope rebuilt under ``work_dir(root)/build`` in place of the scope under ``root`` (module docstring).
    The caller holds the scope's process lock and has closed both. ``empty``: the scope held nothing, so the
    rebuilt one may have no files (the old ones are then removed: a scope with no files reads as empty)."""
    work = work_dir(root)
    arriving = sorted(p.name for p in scope_files(work / "build", scope))
    if not empty and not any(n.endswith((".kuzu", ".log.sqlite")) for n in arriving):
        raise RuntimeError(f"the rebuilt scope {scope} has no files under {work / 'build'}")
    _sync_write(
        work / JOURNAL,
        json.dumps({"org_id": scope.org_id, "user_id": scope.user_id, "arriving": arriving}),
    )
    _finish(root, on_move)


def finish(root: Path) -> Scope | None:
    """Finish (or roll back) a swap a killed process left half done; the scope it finished, or None when there
    was none, or when the process doing it is alive. Cheap when there is nothing to do: one ``stat``."""
    if not (work_dir(root) / JOURNAL).exists():
        return None
    return _finish(root, None)


def _finish(root: Path, on_move: OnMove | None) -> Scope | None:
    work = work_dir(root)
    journal = work / JOURNAL
    try:
        plan = json.loads(journal.read_text())
    except FileNotFoundError:
        return None  # finished meanwhile by the process that owns it
    scope = Scope(org_id=plan["org_id"], user_id=plan["user_id"])
    arriving: Sequence[str] = plan["arriving"]
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
        if gone:
            _roll_back(scope, old_dir, target, arriving, gone)
            journal.unlink()
            return None
        for suffix in SCOPE_SUFFIXES:  # 2a: the old files aside (an arrived file is no longer in the build)
            name = f"{scope.user_id}{suffix}"
            if (target / name).exists() and (name not in arriving or (new_dir / name).exists()):
                _move(target / name, old_dir / name, on_move)
        for name in arriving:  # 2b: the rebuilt ones in
            if (new_dir / name).exists():
                _move(new_dir / name, target / name, on_move)
        fsync_dir(target)
        journal.unlink()
        fsync_dir(work)
        shutil.rmtree(work / "old", ignore_errors=True)
        log.info("scope %s: its rebuilt files are in place", scope)
        return scope
    finally:
        proclock.release(lock)


def _roll_back(
    scope: Scope, old_dir: Path, target: Path, arriving: Sequence[str], gone: Sequence[str]
) -> None:
    """The rebuilt files are gone (deleted by hand): the old ones return, and any rebuilt one that had arrived
    leaves (into ``old_dir``'s place, so the two never mix)."""
    log.error(
        "scope %s: the rebuilt files %s are gone; the swap is rolled back to the old files", scope, gone
    )
    stray = old_dir.parent.parent / "stray" / scope.org_id
    stray.mkdir(parents=True, exist_ok=True)
    for name in arriving:
        if (target / name).exists() and (old_dir / name).exists():
            os.replace(target / name, stray / name)
    for p in old_dir.iterdir():
        if not (target / p.name).exists():
            os.replace(p, target / p.name)
    fsync_dir(target)


def _move(src: Path, dst: Path, on_move: OnMove | None) -> None:
    if dst.is_dir():
        shutil.rmtree(dst)
    os.replace(src, dst)
    if on_move is not None:
        on_move()


def _sync_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
