"""``store.space``: a write that found no room is told apart from other failures, and says what is full."""

from __future__ import annotations

import resource
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphrecall.store.space import file_size_limit, is_io_failure, no_room

KUZU_EFBIG = (
    "IO exception: Cannot write to file. path: /x/ana.kuzu fileDescriptor: 3 offsetToWrite: 5758976 "
    "numBytesToWrite: 4096 numBytesWritten: -1. Error: File too large"
)


def sqlite_error(message: str, name: str) -> sqlite3.OperationalError:
    e = sqlite3.OperationalError(message)
    e.sqlite_errorname = name  # type: ignore[attr-defined]  # what sqlite3 sets on errors it raises
    return e


@pytest.fixture
def file_size_limit_of(tmp_path: Path) -> Iterator[int]:
    """A real soft RLIMIT_FSIZE for this process (1 GiB: far above anything the test suite writes), restored after."""
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit = 1 << 30
    if old[0] != resource.RLIM_INFINITY and old[0] < limit:
        pytest.skip("this process already runs under a smaller file-size limit")
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, old[1]))
    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)


def test_enospc_in_either_engine_names_the_full_file_system(tmp_path: Path) -> None:
    db = tmp_path / "u.log.sqlite"
    for error in (
        sqlite_error("database or disk is full", "SQLITE_FULL"),
        RuntimeError("IO exception: Cannot write to file. Error: No space left on device"),
        OSError(28, "No space left on device"),
    ):
        reason = no_room(error, [db])
        assert reason is not None and reason.startswith(f"the file system holding {tmp_path} is full, ")
        assert reason.endswith(" free")


def test_a_write_past_the_file_size_limit_names_the_limit_and_the_file(
    tmp_path: Path, file_size_limit_of: int
) -> None:
    assert file_size_limit() == file_size_limit_of
    wal = tmp_path / "u.log.sqlite-wal"
    with wal.open("wb") as f:  # sparse: as big as the limit allows, without using the disk
        f.truncate(file_size_limit_of - 4096)
    reason = no_room(sqlite_error("disk I/O error", "SQLITE_IOERR_WRITE"), [tmp_path / "u.log.sqlite", wal])
    assert reason == (
        "a file reached this process's file-size limit (RLIMIT_FSIZE, `ulimit -f`) of 1.0 GiB: "
        "u.log.sqlite-wal is 1024.0 MiB"
    )
    kuzu = no_room(RuntimeError(KUZU_EFBIG), [tmp_path / "ana.kuzu"])  # EFBIG names itself: any file size
    assert kuzu is not None and kuzu.startswith("a file reached this process's file-size limit")


def test_other_failures_are_not_taken_for_a_full_disk(tmp_path: Path, file_size_limit_of: int) -> None:
    small = tmp_path / "u.log.sqlite"
    small.write_bytes(b"x" * 4096)  # far below the limit, on a disk with room
    assert no_room(sqlite_error("disk I/O error", "SQLITE_IOERR_WRITE"), [small]) is None
    assert no_room(sqlite_error("database is locked", "SQLITE_BUSY"), [small]) is None
    assert no_room(RuntimeError("Copy exception: Found duplicated primary key value s1"), [small]) is None
    assert no_room(RuntimeError("anything"), []) is None


def test_without_a_limit_a_file_too_large_is_blamed_on_the_file_system(tmp_path: Path) -> None:
    if file_size_limit() is not None:
        pytest.skip("this process runs under a file-size limit")
    assert no_room(RuntimeError(KUZU_EFBIG), [tmp_path / "ana.kuzu"]) == (
        f"a file in {tmp_path} reached the largest size its file system allows"
    )


def test_only_kuzus_io_exception_marks_a_database_for_reopening() -> None:
    assert is_io_failure(RuntimeError(KUZU_EFBIG))
    assert not is_io_failure(RuntimeError("Copy exception: Found duplicated primary key value s1"))
    assert not is_io_failure(OSError("IO exception"))
