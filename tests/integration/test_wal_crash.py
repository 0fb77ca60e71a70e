"""The write log under a killed process, a file-size limit (real child processes) and a full file system.

An acknowledgement is the child printing a seq after ``append`` returned; the parent then checks, on a reopen,
that every acknowledged entry is there with its content.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message
from graphrecall.store.rows import SessionRow
from graphrecall.store.wal import WriteEntry, WriteLog, WriteLogError


def turn(i: int) -> WriteEntry:
    """One 2-message turn with two 384-d vectors (~4 KB in the log)."""
    sid = f"s{i}"
    rows = message_rows(
        sid, [Message(role="user", content=f"turn {i}"), Message(role="assistant", content="ok")],
        start_idx=0, date=datetime(2024, 1, 1),
    )  # fmt: skip
    rounds = build_rounds(sid, rows)
    rng = np.random.default_rng(i)
    return WriteEntry.from_rows(
        sessions=[SessionRow(sid, datetime(2024, 1, 1))], messages=rows, rounds=rounds,
        user_vectors=rng.random((1, 384)), reply_vectors=rng.random((1, 384)), dim=384,
    )  # fmt: skip


CHILD = textwrap.dedent(
    """
    import resource, signal, sys
    from datetime import datetime
    import numpy as np
    from graphrecall.ingest import build_rounds, message_rows
    from graphrecall.models import Message
    from graphrecall.store.rows import SessionRow
    from graphrecall.store.wal import WriteEntry, WriteLog, WriteLogError

    path, limit = sys.argv[1], int(sys.argv[2])
    if limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    log = WriteLog(path)
    rng = np.random.default_rng(0)
    for i in range(100_000):
        sid = f"s{i}"
        msgs = [Message(role="user", content=f"turn {i}"), Message(role="assistant", content="ok")]
        rows = message_rows(sid, msgs, start_idx=0, date=datetime(2024, 1, 1))
        rounds = build_rounds(sid, rows)
        entry = WriteEntry.from_rows(sessions=[SessionRow(sid, datetime(2024, 1, 1))], messages=rows, rounds=rounds,
                                     user_vectors=rng.random((1, 384)), reply_vectors=rng.random((1, 384)), dim=384)
        try:
            seq = log.append(entry).seq
        except WriteLogError as e:
            print("ERROR", e, flush=True)
            break
        print("ACK", seq, i, flush=True)
    """
)


def child(tmp_path: Path, path: Path, limit: int = 0) -> subprocess.Popen[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return subprocess.Popen(
        [sys.executable, str(script), str(path), str(limit)], stdout=subprocess.PIPE, text=True
    )


def test_kill_9_mid_stream_loses_no_acknowledged_entry(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    proc = child(tmp_path, path)
    assert proc.stdout is not None
    acked: dict[int, int] = {}
    deadline = time.monotonic() + 120
    while len(acked) < 60 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line.startswith("ACK"), line
        _, seq, i = line.split()
        acked[int(seq)] = int(i)
    os.kill(proc.pid, signal.SIGKILL)  # mid-stream: the child is appending as fast as it can
    rest = proc.stdout.read()  # acknowledgements printed before the kill landed count too
    proc.wait()
    for line in rest.splitlines():
        _, seq, i = line.split()
        acked[int(seq)] = int(i)
    assert proc.returncode == -signal.SIGKILL and len(acked) >= 60
    with WriteLog(path) as log:
        stored = {e.seq: e for e in log.pending()}
    missing = sorted(set(acked) - set(stored))
    assert not missing, f"acknowledged but lost: {missing}"
    for seq, i in acked.items():
        assert stored[seq].messages[0].text == f"turn {i}" and stored[seq].rounds[0].id == f"s{i}@0"
    # at most the one append in flight when the kill landed is stored without having been printed
    assert len(stored) - len(acked) <= 1


def test_a_file_size_limit_fails_appends_clearly_and_the_log_opens_afterwards(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    proc = child(tmp_path, path, limit=200_000)  # like a full disk: writes past 200 KB fail (EFBIG)
    out, _ = proc.communicate(timeout=120)
    lines = out.splitlines()
    assert proc.returncode == 0, out[-500:]
    assert lines[-1].startswith("ERROR") and "nothing was acknowledged" in lines[-1], lines[-1]
    acked = [int(line.split()[1]) for line in lines if line.startswith("ACK")]
    assert len(acked) > 5
    with WriteLog(path) as log:  # without the limit now
        assert [e.seq for e in log.pending()] == acked
        assert log.append(log.pending()[0].model_copy(update={"seq": 0})).seq > acked[-1]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 512 KB file system (tmpfs), where the machine lets the test mount one (root with CAP_SYS_ADMIN)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_full_file_system_fails_appends_and_flush_marks_and_all_recovers_when_space_returns(
    small_fs: Path,
) -> None:
    ballast = small_fs / "ballast"
    ballast.write_bytes(b"x" * 256 * 1024)  # the rest of the disk belongs to someone else
    path = small_fs / "u.log.sqlite"
    log = WriteLog(path)
    acked: list[int] = []
    with pytest.raises(WriteLogError, match=r"SQLITE_FULL\); nothing was acknowledged"):
        for i in range(500):
            acked.append(log.append(turn(i)).seq)
    assert len(acked) >= 3
    with pytest.raises(WriteLogError, match="could not mark"):  # deleting needs WAL space too: entries stay
        log.mark_flushed(acked[-1])
    log.close()
    with WriteLog(path) as again:  # the disk is still full: it opens, with every acknowledged entry
        assert [e.seq for e in again.pending()] == acked
    ballast.unlink()
    with WriteLog(path) as freed:
        assert [e.seq for e in freed.pending()] == acked
        assert freed.mark_flushed(acked[-1]) == len(acked)
        assert freed.append(turn(999)).seq == acked[-1] + 1
