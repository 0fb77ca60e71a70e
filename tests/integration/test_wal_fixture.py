"""A write log written by earlier code replays with the current code, and loses nothing.

``tests/data/wal/entry_v1_v2.tar.gz`` was made once by the code before the store's row types were unified (README
beside it); it is never regenerated. What it holds is written down here, not read from the script that made it.
Every entry must parse into today's rows, a ``Memory`` must serve the scope from its log, and a flush must move it
into Kuzu whole.
"""

from __future__ import annotations

import tarfile
from datetime import datetime
from pathlib import Path

from tests.data.wal.make_wal_fixture import LONG, SCOPE  # what the frozen log was written from

from graphrecall import Memory, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.store.wal import WriteLog

ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "wal" / "entry_v1_v2.tar.gz"
D1, D2 = datetime(2024, 5, 20, 18, 30), datetime(2024, 5, 21, 8, 0)
D3, TRIP = datetime(2024, 6, 2, 7, 0), datetime(2024, 6, 2, 8, 0)  # the trip turn was sent at 10:00+02:00
D4 = datetime(2024, 7, 1, 9, 0)
# The entries hold no languages (they were written before ``MessageRow.lang``): each is detected from the text when
# the entry is read, as ingest would have stored it ('' where the detector is not sure).
MESSAGES = {
    "s1": [
        MessageRow("s1#0", "s1", 0, "user", "We adopted a beagle puppy called Biscuit!", D1, "en"),
        MessageRow("s1#1", "s1", 1, "assistant", "Congratulations! Beagles love long walks.", D1, "en"),
        MessageRow("s1#2", "s1", 2, "user", "He chewed my left shoe.", D2, "en"),
        MessageRow("s1#3", "s1", 3, "assistant", "Puppies teethe until six months.", D2, ""),
    ],
    "s2": [
        MessageRow("s2#0", "s2", 0, "system", "Be brief.", D3, ""),
        MessageRow("trip-u", "s2", 1, "user", LONG, TRIP, "en"),
        MessageRow("trip-a", "s2", 2, "assistant", "What a trip.", D3, "en"),
    ],
    "s3": [MessageRow("s3#0", "s3", 0, "user", LONG, D4, "en")],
}
STARTED = {"s1": D1, "s2": D3, "s3": D4}


def unpack(dest: Path) -> Path:
    root = dest / "store"
    root.mkdir()
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        tar.extractall(root, filter="data")
    return root


def log_file(root: Path) -> Path:
    return root / SCOPE.org_id / f"{SCOPE.user_id}.log.sqlite"


def test_every_entry_parses_into_todays_rows(tmp_path: Path) -> None:
    with WriteLog(log_file(unpack(tmp_path))) as log:
        entries = log.pending()
    assert [(e.seq, e.version) for e in entries] == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2)]
    assert [s for e in entries for s in e.sessions] == [SessionRow(k, STARTED[k]) for k in ("s1", "s2", "s3")]
    assert [m for e in entries for m in e.messages] == [m for k in ("s1", "s2", "s3") for m in MESSAGES[k]]
    assert [r.id for e in entries for r in e.rounds] == ["s1@0", "s1@1", "s1@1", "s2@0", "s3@0"]
    assert entries[2].replaced_round_ids == ["s1@1"]
    assert entries[2].rounds == [
        RoundRow(
            id="s1@1", session_id="s1", idx=1,
            text="user: He chewed my left shoe.\nassistant: Puppies teethe until six months.",
            user_text="He chewed my left shoe.", reply_text="Puppies teethe until six months.",
            terms="wchew wleft wshoe wpuppi wteeth wuntil wsix wmonth", at=D2, message_ids=["s1#2", "s1#3"],
        )
    ]  # fmt: skip
    assert entries[3].rounds[0].message_ids == ["trip-u", "trip-a"] and entries[3].rounds[0].at == TRIP
    assert entries[4].passage_counts == [3] and entries[4].passages()[0].shape == (3, 64)
    assert all(e.user_matrix().shape == (1, 64) and e.reply_matrix().shape == (1, 64) for e in entries)


def test_memory_serves_the_scope_from_its_log_then_moves_it_into_kuzu_whole(tmp_path: Path) -> None:
    root = unpack(tmp_path)
    with Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root)) as m:
        check_scope(m)  # from the log (the scope has fewer rounds than ``resident_rounds``)
        assert not testing.pool(m).exists(SCOPE)
        m.flush()
        assert testing.pool(m).exists(SCOPE)
        with testing.database(m, SCOPE) as db:
            assert db.query(f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')} RETURN count(p)")[0][0] == 3
            stored = db.query(f"{MATCH_SCOPE}MATCH {owned('m', 'Message')} RETURN m.id, m.lang ORDER BY m.id")
        assert stored == sorted([m.id, m.lang] for rows in MESSAGES.values() for m in rows)
        check_scope(m)  # from Kuzu


def check_scope(m: Memory) -> None:
    for sid, want in MESSAGES.items():
        session = m.get_session(SCOPE, sid)
        assert session.started_at == STARTED[sid]
        assert session.messages == [r.to_message() for r in want]
    stats = m.stats(SCOPE)
    assert (stats.sessions, stats.messages, stats.rounds) == (3, 8, 4)
    hits = m.search(SCOPE, "what did the puppy chew?", k=1, question_date="2024-06-01")
    assert [(h.id, h.text) for h in hits] == [
        ("s1@1", "user: He chewed my left shoe.\nassistant: Puppies teethe until six months.")
    ]
    assert {h.id for h in m.search(SCOPE, "where did I lose my passport?", k=2)} == {"s2@0", "s3@0"}
