"""Telling a write that found no room from other write failures, in words the person who must act can use.

Why: the two engines report a full disk badly. SQLite says "database or disk is full" for ENOSPC but a bare "disk
I/O error" (SQLITE_IOERR_WRITE) for a write past the process's file-size limit (EFBIG, ``ulimit -f``); Kuzu says
"IO exception: Cannot write to file ... Error: File too large" or "No space left on device". A writer, or an HTTP
client, needs to know that nothing is broken but space (HTTP 507: free space and retry), and an operator needs to
know which file system or limit to look at. ``no_room`` looks at the error text, the free space of the file system
and the file-size limit, and returns that explanation, or None when the failure was something else.

Kuzu also leaves a database whose commit failed with an I/O error unusable in memory (a retried write then reports
duplicated primary keys, a write-write conflict, and finally crashes the process: measured with Kuzu 0.11.3 under a
file-size limit), so ``is_io_failure`` tells the pool to replace such a database with a fresh one
(``store/pool.py``), and ``short_of_room`` tells it when there is room to write into the store again.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
from collections.abc import Iterable
from pathlib import Path

# Below this much free space a failed write is taken to be the full disk's doing.
LOW_FREE_BYTES = 1 << 20
_FULL_WORDS = ("no space left on device", "database or disk is full", "disk quota exceeded", "sqlite_full")
_WRITE_WORDS = ("disk i/o error", "sqlite_ioerr", "cannot write to file", "io exception", "file too large")


def is_io_failure(error: BaseException) -> bool:
    """Whether ``error`` is Kuzu's I/O exception (after which that database object must not be used again)."""
    return isinstance(error, RuntimeError) and str(error).lstrip().lower().startswith("io exception")


def no_room(error: BaseException, files: Iterable[Path]) -> str | None:
    """Why a write to ``files`` (the files the failing operation writes: a database and its journal) failed for
    lack of room, or None when it failed for another reason."""
    text = f"{error} {getattr(error, 'sqlite_errorname', '')}".lower()
    paths = [Path(f) for f in files]
    if not paths:
        return None
    folder = paths[0].parent
    free = _free_bytes(folder)
    if any(w in text for w in _FULL_WORDS) or (
        free is not None and free < LOW_FREE_BYTES and any(w in text for w in _WRITE_WORDS)
    ):
        left = "" if free is None else f", {_size(free)} free"
        return f"the file system holding {folder} is full{left}"
    if "file too large" in text or any(w in text for w in _WRITE_WORDS):
        limit = file_size_limit()
        if limit is not None:
            biggest = max(paths, key=_file_size)
            if "file too large" in text or _file_size(biggest) + LOW_FREE_BYTES >= limit:
                return (
                    f"a file reached this process's file-size limit (RLIMIT_FSIZE, `ulimit -f`) of {_size(limit)}: "
                    f"{biggest.name} is {_size(_file_size(biggest))}"
                )
        if "file too large" in text:
            return f"a file in {folder} reached the largest size its file system allows"
    return None


def short_of_room(path: Path, need: int) -> str | None:
    """Why ``need`` more bytes cannot be written to ``path`` now (the file system's free space, the process's
    file-size limit), or None when they can."""
    folder = path.parent
    free = _free_bytes(folder)
    if free is not None and free < need:
        return f"the file system holding {folder} has {_size(free)} free"
    limit = file_size_limit()
    if limit is not None and _file_size(path) + need > limit:
        return f"this process's file-size limit (RLIMIT_FSIZE, `ulimit -f`) of {_size(limit)} leaves no room in {path.name}"
    return None


def file_size_limit() -> int | None:
    """The process's soft file-size limit in bytes, or None when there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _free_bytes(folder: Path) -> int | None:
    with contextlib.suppress(OSError):
        return shutil.disk_usage(folder).free
    return None


def _file_size(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.stat().st_size
    return 0


def _size(n: int) -> str:
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
