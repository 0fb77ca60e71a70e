"""Writes to a scope whose storage fills up: the writer gets a clear error, nothing acknowledged is lost, and the
store opens (and takes writes) once there is room again.

Most of the tests give the writing process a real file-size limit (``RLIMIT_FSIZE``; CPython ignores SIGXFSZ, so a
write past it fails with EFBIG, the way a write to a full disk fails with ENOSPC), which needs no privilege. The
limit is set below the size the scope's Kuzu file already has and a little above its write log's, so every write
Kuzu makes fails at once, as on a full disk, and the log fills after a few dozen turns. One test fills a real small
file system (tmpfs) instead, where the test may mount one, and is skipped where it may not. Kuzu leaves a database
whose commit failed unusable (a retry crashed the process) and aborts the process when it closes one on a full file
system (``store/space.py``, ``store/pool.py``); the tests also show that no process crashes.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from graphrecall import Memory, Scope, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.server.errors import STORAGE_FULL_MESSAGE
from graphrecall.server.testing import ServerProcess
from graphrecall.store.wal import WriteLog, log_path


@pytest.fixture(autouse=True)
def _scopes_in_kuzu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scope gets its Kuzu database at its first write, in this process and the ones it starts: these
    tests are about what a full disk does to Kuzu (a small scope would otherwise live in its write log, store/logs.py)."""
    monkeypatch.setenv("GRAPHRECALL_RESIDENT_ROUNDS", "0")


SCOPE = Scope(org_id="acme", user_id="ana")
# What the write log may still grow by before the "disk" is full. The seed's log is deleted when its Memory closes
# (empty, its scope in Kuzu: store.logs._close), so the child's first write makes a new one (SQLite's header, its
# tables and WAL) in this room too: 256 KB held 9 turns then, 10 before.
ROOM = 320 * 1024


def turn(i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"turn {i}: remember parcel {1000 + i} for Lisbon"},
        {"role": "assistant", "content": "Noted. " * 40},
    ]


def log_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "acme").glob("ana.log.sqlite*"))


def bucket(root: Path) -> Path:
    """The bucket file that holds the scope's rows."""
    found = testing.bucket_path(root, SCOPE, HashingEmbedder(64).id, 64)
    assert found is not None
    return found


def seed(root: Path) -> int:
    """A scope with one session in Kuzu; returns the file-size limit that leaves the log ``ROOM`` bytes."""
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        mem.add_session(SCOPE, turn(-1), session_id="seed", date="2024-01-01")
    limit = log_bytes(root) + ROOM
    assert bucket(root).stat().st_size > limit  # Kuzu cannot grow or rewrite past the limit
    return limit


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    from graphrecall import Memory, Scope
    from graphrecall.embed import HashingEmbedder

    root, limit = Path(sys.argv[1]), int(sys.argv[2])
    scope = Scope(org_id="acme", user_id="ana")

    def report(kind, e):
        print(json.dumps({"kind": kind, "type": type(e).__name__, "code": getattr(e, "code", None), "message": str(e)}),
              flush=True)

    mem = Memory.open(root, embedder=HashingEmbedder(64))
    if limit:  # else the file system itself is small and nearly full
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    for i in range(5000):
        turn = [{"role": "user", "content": f"turn {i}: remember parcel {1000 + i} for Lisbon"},
                {"role": "assistant", "content": "Noted. " * 40}]
        try:
            mem.add_session(scope, turn, session_id=f"s{i}", date="2024-01-02")
        except Exception as e:
            report("write", e)
            break
        print(json.dumps({"kind": "ack", "session_id": f"s{i}"}), flush=True)
    try:
        mem.stats(scope)  # needs the log moved into Kuzu first
        print(json.dumps({"kind": "stats"}), flush=True)
    except Exception as e:
        report("stats", e)
    try:  # reads go on: from the log's tail, and from the store as of its last good commit
        hits = mem.search(scope, "parcel Lisbon", k=5)
        print(json.dumps({"kind": "search", "hits": len(hits)}), flush=True)
    except Exception as e:
        report("search", e)
    try:
        mem.close()  # the disk is still full: what cannot be moved into Kuzu stays in the log
        print(json.dumps({"kind": "closed"}), flush=True)
    except Exception as e:
        report("close", e)
    """
)


def fill_until_full(
    tmp_path: Path, root: Path, limit: int
) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """Run ``CHILD`` on ``root`` (under the file-size ``limit``; 0: none) and check what holds however the disk
    fills: no crash (also not when the Memory closes), a ``WriteLogFull`` that says nothing was acknowledged, the
    reads that need Kuzu failing with the reason, every acknowledged turn waiting in the log. Returns the
    acknowledged session ids, the write's error and what the search after it returned."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run(
        [sys.executable, str(script), str(root), str(limit)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # no crash, also while Kuzu's writes were failing
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    acked = [e["session_id"] for e in events if e["kind"] == "ack"]
    (write,) = [e for e in events if e["kind"] == "write"]
    assert len(acked) >= 10, events[-3:]
    assert (write["type"], write["code"]) == ("WriteLogFull", "storage_full")
    assert write["message"].endswith("nothing was acknowledged")
    (stats,) = [e for e in events if e["kind"] == "stats"]
    assert stats["code"] in ("flush_failed", "storage_full") and "no room" in stats["message"]
    assert [e["type"] for e in events if e["kind"] == "close"] == ["FlushFailed"], (
        events[-4:],
        proc.stderr[-2000:],
    )
    with WriteLog(log_path(root, SCOPE)) as log:  # Kuzu took none of them: they all wait in the log
        assert [e.sessions[0].id for e in log.pending()] == acked
    (search,) = [e for e in events if e["kind"] == "search"]
    return acked, write, search


def reopen_and_check(root: Path, acked: list[str]) -> None:
    """With room again: the store opens, replays the log, holds every acknowledged turn and takes new writes."""
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        assert sorted(s.id for s in mem.sessions(SCOPE, limit=10_000)) == sorted(["seed", *acked])
        first = mem.get_session(SCOPE, acked[-1]).messages[0]
        assert first.content.startswith(f"turn {len(acked) - 1}:")
        mem.add_session(SCOPE, turn(9999), session_id="after", date="2024-01-03")
        mem.flush()
        assert mem.stats(SCOPE).sessions == len(acked) + 2
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        assert mem.search(SCOPE, "parcel 10999", k=1)[0].session_id == "after"


def test_a_full_disk_fails_the_write_clearly_loses_nothing_acknowledged_and_the_store_opens_afterwards(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    acked, write, search = fill_until_full(tmp_path, root, seed(root))
    assert (
        "no room for the write: a file reached this process's file-size limit (RLIMIT_FSIZE"
        in write["message"]
    )
    assert search == {"kind": "search", "hits": 5}
    reopen_and_check(root, acked)  # a process without the limit: the room is back


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 MiB file system (tmpfs) where the test may mount one (root with CAP_SYS_ADMIN); skipped elsewhere."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_real_full_file_system_enospc_the_same(tmp_path: Path, small_fs: Path) -> None:
    """ENOSPC for every file at once, not a per-file limit: the same clear error (naming the file system), and
    everything acknowledged is there once space is freed. Here Kuzu cannot even write its WAL, and closing such a
    database aborts the process (Kuzu 0.11.3: before, ``Memory.close`` did), so the Memory closes without closing
    it."""
    root = small_fs / "store"
    seed(root)
    free = shutil.disk_usage(small_fs).free
    ballast = small_fs / "ballast"  # the rest of the disk belongs to someone else
    ballast.write_bytes(b"x" * (free - ROOM))
    acked, write, search = fill_until_full(tmp_path, root, 0)
    assert f"no room for the write: the file system holding {root / 'acme'} is full" in write["message"]
    assert search == {"kind": "search", "hits": 5}
    ballast.unlink()
    reopen_and_check(root, acked)


IN_PROCESS = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from graphrecall import Memory, Scope
    from graphrecall.embed import HashingEmbedder

    root, ballast = Path(sys.argv[1]), Path(sys.argv[2])
    scope = Scope(org_id="acme", user_id="ana")
    out = {"acked": []}
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        for i in range(5000):
            try:
                mem.add_session(scope, [{"role": "user", "content": f"s{i}: parcel for Lisbon " * 20}],
                                session_id=f"s{i}", date="2024-01-02")
            except Exception as e:
                out["write"] = type(e).__name__
                break
            out["acked"].append(f"s{i}")
        try:
            mem.stats(scope)
        except Exception as e:
            out["stats"] = getattr(e, "code", type(e).__name__)
        out["hits"] = len(mem.search(scope, "parcel", k=3))
        ballast.unlink()  # space is freed while the process runs
        mem.flush()
        out["stored"] = sorted(s.id for s in mem.sessions(scope, limit=10_000))
        mem.add_session(scope, [{"role": "user", "content": "after the disk was full"}], session_id="after",
                        date="2024-01-03")
        mem.flush()
        out["sessions"] = mem.stats(scope).sessions
    print(json.dumps(out))
    """
)


def test_a_process_whose_disk_filled_up_takes_writes_again_once_space_is_freed(
    tmp_path: Path, small_fs: Path
) -> None:
    """ENOSPC in a running process, then space freed while it runs: its next flush opens the scope's store afresh
    and moves every acknowledged turn into it. (Closing the database whose commit had failed, instead, wrote that
    commit's primary keys without its rows, measured: the scope then refused to store those sessions for good.)"""
    root = small_fs / "store"
    seed(root)
    ballast = small_fs / "ballast"
    ballast.write_bytes(b"x" * (shutil.disk_usage(small_fs).free - ROOM))
    script = tmp_path / "child.py"
    script.write_text(IN_PROCESS)
    proc = subprocess.run(
        [sys.executable, str(script), str(root), str(ballast)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["write"] == "WriteLogFull" and len(out["acked"]) >= 5
    assert out["stats"] in ("flush_failed", "storage_full") and out["hits"] == 3
    assert out["stored"] == sorted(["seed", *out["acked"]])
    assert out["sessions"] == len(out["acked"]) + 2
    assert list(
        bucket(root).parent.glob(f"{bucket(root).name}.wal.failed-*")
    )  # the failed commit, kept aside
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        assert mem.get_session(SCOPE, "after").messages[0].content == "after the disk was full"


def test_the_server_answers_507_while_its_disk_is_full_and_recovers_when_space_returns(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    limit = seed(root)
    base = "/v1/scopes/acme/ana"
    server = ServerProcess(root, extra_args=["--insecure-local"], embedder="hashing:64").start()
    try:
        assert server.proc is not None
        resource.prlimit(server.proc.pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        acked: list[str] = []
        with httpx.Client(base_url=server.url, timeout=60) as c:
            for i in range(5000):
                r = c.post(f"{base}/sessions", json={"session_id": f"s{i}", "messages": turn(i)})
                if r.status_code != 200:
                    break
                acked.append(f"s{i}")
            assert len(acked) >= 10
            assert r.status_code == 507, r.text
            assert r.json() == {
                "error": {"code": "storage_full", "message": STORAGE_FULL_MESSAGE, "field": None}
            }
            listing = c.get(f"{base}/sessions")  # it reads Kuzu, which has no room for the log's turns either
            assert listing.status_code == 507 and listing.json()["error"]["code"] == "storage_full"
            found = c.get(f"{base}/search", params={"query": "parcel Lisbon"})  # reads go on
            assert found.status_code == 200 and len(found.json()["hits"]) > 0, found.text
            space = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            resource.prlimit(
                server.proc.pid, resource.RLIMIT_FSIZE, space
            )  # room again, the server still running
            after = c.post(f"{base}/sessions", json={"session_id": "after", "messages": turn(9999)})
            assert after.status_code == 200, after.text
            listed = c.get(f"{base}/sessions", params={"limit": 10_000})
            assert listed.status_code == 200, listed.text
            assert sorted(s["id"] for s in listed.json()["sessions"]) == sorted(["seed", *acked, "after"])
        assert "out of storage space" in server.log() and "Traceback" not in server.log()
    finally:
        server.stop()
    assert "Application shutdown complete" in server.log()  # a clean stop: uvicorn re-raises SIGTERM to exit
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:  # and it opens after the server is gone
        assert len(mem.sessions(SCOPE, limit=10_000)) == len(acked) + 2


KUZU_FILLS = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    from graphrecall import Memory, Scope, Settings
    from graphrecall.embed import HashingEmbedder

    root, limit, seconds = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    scope = Scope(org_id="acme", user_id="ana")
    # Flushes (and checkpoints) every few tenths of a second, so that Kuzu runs out of room within the run.
    mem = Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root, flush_max_age_s=0.2))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    acked, start = [], time.monotonic()
    while time.monotonic() - start < seconds:  # the flusher meanwhile fails, backs off and retries
        sid = f"s{len(acked)}"
        mem.add_session(scope, [{"role": "user", "content": f"{sid}: parcel for Lisbon"}], session_id=sid,
                        date="2024-01-02")
        acked.append(sid)
        time.sleep(0.02)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # room again
    mem.flush()
    print(json.dumps({"acked": acked, "stored": sorted(s.id for s in mem.sessions(scope, limit=10_000))}))
    mem.close()
    """
)


def test_a_commit_cut_by_a_full_disk_does_not_crash_later_flushes_and_all_lands_once_there_is_room(
    tmp_path: Path,
) -> None:
    """Kuzu runs out of room in the middle of a commit while the write log still has room: turns keep being
    acknowledged, the flusher's retries fail cleanly (before, the retry on the same database object failed on
    duplicated keys and then crashed the process with SIGSEGV), and once there is room the same process moves
    every acknowledged turn into Kuzu."""
    root = tmp_path / "store"
    seed(root)
    limit = bucket(root).stat().st_size + 700 * 1024  # a commit or two fit, then one is cut
    script = tmp_path / "child.py"
    script.write_text(KUZU_FILLS)
    proc = subprocess.run(
        [sys.executable, str(script), str(root), str(limit), "5"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "File too large" in proc.stderr  # Kuzu's writes did fail
    out = json.loads(proc.stdout)
    assert len(out["acked"]) >= 20
    assert out["stored"] == sorted(["seed", *out["acked"]])
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        assert mem.stats(SCOPE).sessions == len(out["acked"]) + 1
        assert mem.search(SCOPE, "s3: parcel", k=1)[0].session_id == "s3"


CREATE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import kuzu
    from graphrecall.errors import StorageFull
    from graphrecall.store import database

    path, ballast, room = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    database.CREATE_ROOM_BYTES = room
    out = {}
    try:
        database.create_bucket(path, "hashing-64", 64)
        out["first"] = "created"
    except StorageFull as e:
        out["first"] = str(e)
    ballast.unlink()  # room again, in the same process
    database.create_bucket(path, "hashing-64", 64)
    conn = kuzu.Connection(kuzu.Database(str(path), buffer_pool_size=64 << 20, max_db_size=1 << 30))
    out["bucket_rows"] = conn.execute("MATCH (b:Scope) RETURN count(*)").get_next()[0]
    out["files"] = sorted(p.name for p in path.parent.iterdir())
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("checked", [True, False], ids=["room-checked-first", "room-taken-while-creating"])
def test_a_bucket_created_on_a_full_file_system_fails_clearly_and_is_created_once_there_is_room(
    tmp_path: Path, small_fs: Path, checked: bool
) -> None:
    """1 MB left: a new bucket is refused with ``StorageFull`` naming the file system, before Kuzu writes anything
    (``CREATE_ROOM_BYTES``); and where the room went while Kuzu was writing (the check set to 0), its failed write
    still ends in ``StorageFull``, not a hang: Kuzu 0.11.3's ``Database.close`` never returned on such a database
    (stop 34's CI stopped there), so it is left unclosed. Once there is room the same process creates the bucket
    whole, with nothing of the failed try left beside it."""
    path = small_fs / "b000.kuzu"
    ballast = small_fs / "ballast"
    ballast.write_bytes(b"x" * (shutil.disk_usage(small_fs).free - (1 << 20)))
    script = tmp_path / "create.py"
    script.write_text(CREATE)
    room = 8 << 20 if checked else 0
    proc = subprocess.run(
        [sys.executable, str(script), str(path), str(ballast), str(room)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["first"].startswith(
        f"no room to create the bucket b000.kuzu: the file system holding {small_fs}"
    )
    assert out["bucket_rows"] == 1
    assert out["files"] == ["b000.kuzu", "b000.kuzu.creating.lock"]
