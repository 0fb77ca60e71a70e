"""The per-scope write log: ordering, durability across reopen, damaged entries, a full disk, footprint."""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message, Scope
from graphrecall.store.rows import SessionRow
from graphrecall.store.wal import WriteEntry, WriteLog, WriteLogCorrupt, WriteLogError, WriteLogFull, log_path

DIM = 384


def turn(i: int, user: str = "", reply: str = "Noted.", dim: int = DIM) -> WriteEntry:
    """What ingest writes for one 2-message turn that starts session ``s<i>``, with seeded random vectors."""
    msgs = [
        Message(role="user", content=user or f"turn {i} of the user"),
        Message(role="assistant", content=reply),
    ]
    return session_entry(f"s{i}", datetime(2024, 1, 1 + i % 28, 9, 0), msgs, seed=i, dim=dim)


def session_entry(
    sid: str, date: datetime, msgs: list[Message], *, seed: int, dim: int = DIM, passages: Sequence[int] = ()
) -> WriteEntry:
    """The entry that starts session ``sid`` with ``msgs``; round ``j`` gets ``passages[j]`` passage vectors."""
    rows = message_rows(sid, msgs, start_idx=0, date=date)
    rounds = build_rounds(sid, rows)
    rng = np.random.default_rng(seed)
    return WriteEntry.from_rows(
        sessions=[SessionRow(sid, date)],
        messages=rows,
        rounds=rounds,
        user_vectors=rng.standard_normal((len(rounds), dim)),
        reply_vectors=rng.standard_normal((len(rounds), dim)),
        passages=[rng.standard_normal((c, dim)) if c else None for c in passages],
        dim=dim,
    )


def test_appends_get_increasing_seqs_and_come_back_in_order_bit_for_bit(tmp_path: Path) -> None:
    with WriteLog(tmp_path / "u.log.sqlite") as log:
        written = [log.append(turn(i)) for i in range(5)]
        assert [e.seq for e in written] == [1, 2, 3, 4, 5]
        back = log.pending()
        assert back == written  # every field, the vector bytes included
        assert back[2].messages[0].id == "s2#0" and back[2].rounds[0].id == "s2@0"
        assert np.array_equal(back[3].user_matrix(), turn(3).user_matrix())
        assert [e.seq for e in log.pending(2)] == [1, 2]
        assert [e.seq for e in log.pending(after=3)] == [4, 5]
        assert log.pending_count == 5 and log.last_seq == 5


def test_reopen_returns_exactly_the_acknowledged_entries_and_seqs_are_never_reused(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    with WriteLog(path) as log:
        written = [log.append(turn(i)) for i in range(4)]
    with WriteLog(path) as log:
        assert log.pending() == written
        assert log.oldest_pending_at == float("-inf")  # found on open: due for flushing at once
        assert log.mark_flushed(2) == 2
        assert [e.seq for e in log.pending()] == [3, 4]
        assert log.mark_flushed(4) == 2 and log.pending_count == 0 and log.oldest_pending_at is None
    with WriteLog(path) as log:
        assert log.pending() == [] and log.last_seq == 4
        assert log.append(turn(9)).seq == 5  # an emptied log does not start again at 1


def test_the_log_is_wal_fsync_on_commit_and_lives_beside_the_scope_database(tmp_path: Path) -> None:
    path = log_path(tmp_path, Scope(org_id="acme", user_id="alice"))
    assert path == tmp_path / "acme" / "alice.log.sqlite"
    with WriteLog(path) as log:
        log.append(turn(1))
        assert log._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert log._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("UPDATE entries SET payload = 'not json' WHERE seq = 2", "checksum"),
        ("UPDATE entries SET vectors = zeroblob(16) WHERE seq = 2", "checksum"),
    ],
)
def test_a_damaged_entry_is_a_clear_error_naming_its_seq(tmp_path: Path, damage: str, reason: str) -> None:
    path = tmp_path / "u.log.sqlite"
    with WriteLog(path) as log:
        for i in range(3):
            log.append(turn(i))
    with sqlite3.connect(path) as raw:
        raw.execute(damage)
    with WriteLog(path) as log:
        assert [e.seq for e in log.pending(1)] == [1]  # what precedes the damage is still readable
        with pytest.raises(WriteLogCorrupt, match=rf"seq 2 is unreadable \({reason}") as err:
            log.pending()
        assert str(path) in str(err.value)


def test_an_entry_from_a_newer_release_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    with WriteLog(path) as log:
        log.append(turn(0))
    # A well-formed row (right checksum) whose payload version is from the future.
    with sqlite3.connect(path) as raw:
        payload, blob = raw.execute("SELECT payload, vectors FROM entries WHERE seq = 1").fetchone()
        payload = payload.replace('"version":1', '"version":7')
        crc = zlib.crc32(blob, zlib.crc32(payload.encode()))
        raw.execute("UPDATE entries SET payload = ?, crc = ? WHERE seq = 1", (payload, crc))
    with (
        WriteLog(path) as log,
        pytest.raises(WriteLogCorrupt, match=r"seq 1 .*version 7 was written by a newer"),
    ):
        log.pending()


def test_a_full_disk_fails_the_append_clearly_and_acknowledges_nothing(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    acked: list[int] = []
    with WriteLog(path, max_bytes=96 * 1024) as log:  # the cap makes SQLite see a full disk (SQLITE_FULL)
        with pytest.raises(
            WriteLogFull,  # a StorageFull too: HTTP 507
            match=r"no room for the write: the log reached its cap of 98304 bytes \(max_bytes; .*\); the write was"
            r" not stored \(database or disk is full, SQLITE_FULL\); nothing was acknowledged",
        ):
            for i in range(200):
                acked.append(log.append(turn(i)).seq)
        assert 3 < len(acked) < 200
        assert [e.seq for e in log.pending()] == acked  # every acknowledged entry, and only those
        # flushing frees the space (auto_vacuum) and the same log takes writes again
        log.mark_flushed(acked[-1])
        assert log.append(turn(500)).seq > acked[-1]
    with WriteLog(path) as log:
        assert [e.rounds[0].id for e in log.pending()] == ["s500@0"]


def test_a_closed_log_refuses_writes(tmp_path: Path) -> None:
    log = WriteLog(tmp_path / "u.log.sqlite")
    log.close()
    log.close()  # twice is fine
    with pytest.raises(WriteLogError, match="closed"):
        log.append(turn(0))


def test_an_idle_log_is_a_few_kilobytes(tmp_path: Path) -> None:
    path = tmp_path / "u.log.sqlite"
    with WriteLog(path) as log:
        for i in range(100):
            log.append(turn(i))
        busy = log.size_bytes()
        log.mark_flushed(log.last_seq)
        log.compact()  # what a pool does for a scope going idle (close does it too)
        idle = log.size_bytes()
    assert busy > 300_000  # 100 turns with two 384-d vectors each
    assert idle < 64 * 1024, idle
    assert (
        not path.with_name(path.name + "-wal").exists()
        or path.with_name(path.name + "-wal").stat().st_size == 0
    )


def test_entries_check_their_vectors() -> None:
    good = turn(1)
    with pytest.raises(ValueError, match=r"user_vectors has shape \(1, 3\); expected \(1, 384\)"):
        WriteEntry.from_rows(
            sessions=[], messages=[], rounds=[good.rounds[0]], user_vectors=np.zeros((1, 3)),
            reply_vectors=np.zeros((1, DIM)), dim=DIM,
        )  # fmt: skip
    bad = np.zeros((1, DIM))
    bad[0, 5] = np.nan
    with pytest.raises(ValueError, match="reply_vectors holds NaN"):
        WriteEntry.from_rows(
            sessions=[], messages=[], rounds=[good.rounds[0]], user_vectors=np.zeros((1, DIM)),
            reply_vectors=bad, dim=DIM,
        )  # fmt: skip
    with pytest.raises(ValidationError, match="user_vectors has 8 bytes"):
        WriteEntry(dim=DIM, rounds=good.rounds, user_vectors=b"\0" * 8, reply_vectors=good.reply_vectors)


def with_passages(i: int, counts: list[int]) -> WriteEntry:
    """A session ``p<i>`` of ``len(counts)`` rounds, round ``j`` with ``counts[j]`` passage vectors."""
    msgs = [Message(role=r, content=f"{r} {j}") for j in range(len(counts)) for r in ("user", "assistant")]
    return session_entry(f"p{i}", datetime(2024, 2, 1 + i % 28, 9, 0), msgs, seed=i, passages=counts)


def test_passage_vectors_come_back_bit_for_bit_with_their_rounds(tmp_path: Path) -> None:
    written = with_passages(1, [3, 0, 2])
    assert written.version == 2 and written.passage_counts == [3, 0, 2]
    with WriteLog(tmp_path / "u.log.sqlite") as log:
        log.append(turn(0))
        log.append(written)
    with WriteLog(tmp_path / "u.log.sqlite") as log:
        plain, back = log.pending()
    assert plain.version == 1 and plain.passages() == [None]  # no passages: readable by older code
    assert back.model_copy(update={"seq": 0}) == written
    first, none, last = back.passages()
    assert none is None and first is not None and last is not None
    assert np.array_equal(
        np.concatenate([first, last]), np.concatenate([p for p in written.passages() if p is not None])
    )
    assert first.shape == (3, DIM) and last.shape == (2, DIM)


def test_a_version_1_entry_reads_as_one_without_passages() -> None:
    old = turn(2)
    payload = old.payload_json()
    assert '"version":1' in payload
    back = WriteEntry.from_stored(9, payload.replace(',"passage_counts":[]', ""), old.vector_blob())
    assert back.passages() == [None] and back.passage_counts == []


def test_passage_counts_must_match_the_rounds_and_the_blob() -> None:
    good = with_passages(3, [2])
    with pytest.raises(ValueError, match="1 passage arrays for 2 rounds"):
        WriteEntry.from_rows(
            sessions=[], messages=[], rounds=with_passages(3, [1, 1]).rounds, user_vectors=np.zeros((2, DIM)),
            reply_vectors=np.zeros((2, DIM)), passages=[np.zeros((1, DIM))], dim=DIM,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"vector blob has \d+ bytes; 1 rounds and 2 passages"):
        WriteEntry.from_stored(1, good.payload_json(), good.vector_blob()[:-4])
    with pytest.raises(ValidationError, match="passage_vectors has 8 bytes; 2 passages"):
        good.model_validate({**good.model_dump(), "passage_vectors": b"\0" * 8})
