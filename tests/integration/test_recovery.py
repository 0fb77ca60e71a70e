"""Opening a database after its owner died: the WAL is replayed, or, when replaying it would crash the process,
moved aside with a warning, and the database opens either way."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graphrecall import Memory, Scope, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.store import recovery
from graphrecall.store.database import ScopeDatabase


@pytest.fixture(autouse=True)
def _scopes_in_kuzu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scope gets its Kuzu database at its first write, in this process and the ones it starts: these
    tests are about Kuzu's recovery (a small scope would otherwise live in its write log, store/logs.py)."""
    monkeypatch.setenv("GRAPHRECALL_RESIDENT_ROUNDS", "0")


SCOPE = Scope(org_id="acme", user_id="ana")

WRITE_THEN_DIE = """
import os, signal, sys
from graphrecall import Memory, Scope, testing
from graphrecall.embed import HashingEmbedder
m = Memory(sys.argv[1], embedder=HashingEmbedder(64))
s = Scope(org_id="acme", user_id="ana")
for i in range(3):
    m.add_session(s, [{"role": "user", "content": f"note {i}"}], session_id=f"s{i}", date="2024-01-01")
# Die with a committed transaction still only in the WAL, as a crash between commit and checkpoint leaves it
# (graphrecall's durable writes checkpoint before they return; one that is not durable, as the write log's flusher
# makes them, with auto-checkpoint off, does not).
with testing.database(m, s) as db, db.write(durable=False) as txn:
    txn.execute("CALL auto_checkpoint=false")
with testing.database(m, s) as db, db.write(durable=False) as txn:
    txn.execute(
        "MATCH (sc:Scope {key: $scope}) CREATE (sc)-[:OWNS]->(:Session {key: $k, id: 's-wal', "
        "started_at: timestamp('2024-01-02'), extract_status: 'none'})",
        {"k": txn.key("s-wal")},
    )
print("acked", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def bucket(root: Path) -> Path:
    """The bucket file that holds the scope's rows (store.buckets)."""
    found = testing.bucket_path(root, SCOPE, HashingEmbedder(64).id, 64)
    assert found is not None
    return found


def _kill_during_life(root: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", WRITE_THEN_DIE, str(root)], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "acked" in proc.stdout


def test_a_database_whose_owner_was_killed_reopens_with_every_acknowledged_write(tmp_path: Path) -> None:
    _kill_during_life(tmp_path)
    path = bucket(tmp_path)
    assert recovery.wal_path(path).exists(), "a killed owner leaves its WAL behind"
    with Memory(tmp_path, embedder=HashingEmbedder(64)) as m:
        assert {s.id for s in m.sessions(SCOPE)} == {"s0", "s1", "s2", "s-wal"}
    assert not list(path.parent.glob("*.corrupt-*")), "a replayable WAL is never moved aside"


def test_a_wal_whose_replay_crashes_is_moved_aside_and_the_database_opens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _kill_during_life(tmp_path)
    path = bucket(tmp_path)
    crashing_probe = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    with caplog.at_level(logging.WARNING):
        moved = recovery.recover(path, probe=crashing_probe)
    assert moved is not None and moved.exists() and moved.stat().st_size > 0
    assert not recovery.wal_path(path).exists()
    assert "could not be replayed" in caplog.text and str(moved) in caplog.text
    db = ScopeDatabase.standalone(path, embedder_id=HashingEmbedder(64).id, dim=64)
    try:
        assert db.query("RETURN 1") == [[1]]
    finally:
        db.close()


def test_an_ordinary_probe_failure_touches_nothing(tmp_path: Path) -> None:
    _kill_during_life(tmp_path)
    path = bucket(tmp_path)
    before = sorted(os.listdir(path.parent))
    assert recovery.recover(path, probe="raise SystemExit(1)") is None
    assert sorted(os.listdir(path.parent)) == before


def test_a_replay_that_finds_its_keys_already_stored_moves_the_wal_aside(tmp_path: Path) -> None:
    """What Kuzu 0.11.3 says when a checkpoint was cut off after writing the WAL's transactions into the file: the
    WAL is quarantined like a torn one (the file holds the checkpoint, store/recovery.py)."""
    _kill_during_life(tmp_path)
    path = bucket(tmp_path)
    probe = "import sys; sys.exit('Runtime exception: Found duplicated primary key value 0:s1')"
    moved = recovery.recover(path, probe=probe)
    assert moved is not None and moved.exists() and not recovery.wal_path(path).exists()
    with Memory(tmp_path, embedder=HashingEmbedder(64)) as m:
        assert {"s0", "s1", "s2"} <= {s.id for s in m.sessions(SCOPE)}  # checkpointed before: kept


def test_a_bucket_whose_wal_was_set_aside_is_rewritten_from_its_rows_before_anyone_uses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint cut off by a kill can leave a primary-key index holding keys whose rows are not in the file
    (every later insert of such a key fails: the write log could never replay that scope). So the pool rewrites a
    bucket whose WAL recovery set aside (store/pool.py, ``_rewrite_recovered``): its indexes built again from its
    rows, every row kept, and the scope takes writes as before."""
    _kill_during_life(tmp_path)
    path = bucket(tmp_path)
    probe = "import sys; sys.exit('Runtime exception: Found duplicated primary key value 0:s1')"
    real = recovery.recover
    monkeypatch.setattr("graphrecall.store.database.recover", lambda p: real(p, probe=probe))
    with caplog.at_level(logging.WARNING), Memory(tmp_path, embedder=HashingEmbedder(64)) as m:
        assert {"s0", "s1", "s2"} <= {s.id for s in m.sessions(SCOPE)}
        m.add_session(
            SCOPE, [{"role": "user", "content": "after the crash"}], session_id="s3", date="2024-01-03"
        )
        assert "s3" in {s.id for s in m.sessions(SCOPE)}
        assert m.search(SCOPE, "after the crash", 3)
    assert "rewritten after its recovery" in caplog.text
    assert Path(str(path) + ".rewritten.json").exists()  # store.freespace's record of a rewrite
    assert len(list(path.parent.glob("*.wal.corrupt-*"))) == 1  # set aside, kept


def test_a_bucket_opens_as_it_is_when_there_is_no_room_to_rewrite_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _kill_during_life(tmp_path)
    path = bucket(tmp_path)
    probe = "import sys; sys.exit('Runtime exception: Found duplicated primary key value 0:s1')"
    real = recovery.recover
    monkeypatch.setattr("graphrecall.store.database.recover", lambda p: real(p, probe=probe))
    monkeypatch.setattr("graphrecall.store.pool.short_of_room", lambda where, need: "the disk is full")
    with caplog.at_level(logging.WARNING), Memory(tmp_path, embedder=HashingEmbedder(64)) as m:
        assert {"s0", "s1", "s2"} <= {s.id for s in m.sessions(SCOPE)}
    assert "not rewritten after its recovery (the disk is full)" in caplog.text
    assert not Path(str(path) + ".rewritten.json").exists()


def test_a_cleanly_closed_database_needs_no_probe(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=HashingEmbedder(64)) as m:
        m.add_session(SCOPE, [{"role": "user", "content": "hello"}], session_id="s", date="2024-01-01")
    path = bucket(tmp_path)
    assert not recovery.wal_path(path).exists()
    assert recovery.recover(path, probe="raise SystemExit('must not run')") is None


def test_a_bucket_whose_creation_was_cut_off_is_created_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kuzu runs DDL a statement at a time, so a process killed while earlier code created a bucket in place left
    tables without the bucket row (a killed ``graphrecall reembed``): the next open creates it again. A bucket is
    now made whole beside its name and renamed in; a leftover of that is deleted."""
    import kuzu

    from graphrecall.store import schema
    from graphrecall.store.database import CREATING, BucketDatabase

    half = tmp_path / "half.kuzu"
    db = kuzu.Database(str(half))
    conn = kuzu.Connection(db)
    for stmt in schema.bucket_tables(64)[:5]:
        conn.execute(stmt)
    db.close()
    leftover = tmp_path / f"fresh.kuzu{CREATING}"
    leftover.write_bytes(b"cut off")

    with caplog.at_level(logging.WARNING):
        for path in (half, tmp_path / "fresh.kuzu"):
            b = BucketDatabase(path, embedder_id="hashing-64", dim=64)
            try:
                b.create_scope("ana")
                assert b.member("ana") is not None
            finally:
                b.close()
    assert [r.getMessage() for r in caplog.records if "half created" in r.getMessage()] == [
        f"bucket {half} was left half created by a killed process (tables without the bucket row, no rows): "
        "created again"
    ]
    assert not leftover.exists()


def test_a_database_with_rows_but_no_bucket_row_is_refused_untouched(tmp_path: Path) -> None:
    import kuzu

    from graphrecall.errors import SchemaMismatch
    from graphrecall.store import schema
    from graphrecall.store.database import BucketDatabase

    foreign = tmp_path / "foreign.kuzu"
    db = kuzu.Database(str(foreign))
    conn = kuzu.Connection(db)
    for stmt in schema.bucket_tables(64):
        conn.execute(stmt)
    conn.execute("CREATE (:Scope {key: 'someone'})")
    db.close()
    with pytest.raises(SchemaMismatch, match="no bucket row"):
        BucketDatabase(foreign, embedder_id="hashing-64", dim=64)
    db = kuzu.Database(str(foreign), read_only=True)
    assert kuzu.Connection(db).execute("MATCH (s:Scope) RETURN s.key").get_all() == [["someone"]]
    db.close()


def test_a_bucket_created_by_several_threads_at_once_is_one_whole_bucket(tmp_path: Path) -> None:
    import threading

    from graphrecall.store.database import BucketDatabase, create_bucket

    path = tmp_path / "b.kuzu"
    failed: list[BaseException] = []

    def make() -> None:
        try:
            create_bucket(path, "hashing-64", 64)
        except BaseException as e:  # reported by the assertion
            failed.append(e)

    threads = [threading.Thread(target=make) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert failed == []
    b = BucketDatabase(path, embedder_id="hashing-64", dim=64)
    try:
        assert b.create_scope("ana") is not None and b.member("ana") is not None
    finally:
        b.close()


def test_a_bucket_another_process_is_creating_is_refused_as_busy(tmp_path: Path) -> None:
    from graphrecall.errors import StoreBusy
    from graphrecall.store.database import CREATING, create_bucket

    path = tmp_path / "b.kuzu"
    hold = (
        "import sys, time; from pathlib import Path; from graphrecall.store import proclock; "
        "proclock.acquire(Path(sys.argv[1]), 'x'); print('holding', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, f"{path}{CREATING}"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(StoreBusy, match="another process is creating it"):
            create_bucket(path, "hashing-64", 64)
        assert not path.exists()
    finally:
        holder.kill()
        holder.wait(30)
