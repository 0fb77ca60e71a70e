"""Log entries into real Kuzu: applying is idempotent, a replayed suffix changes nothing, and a kill -9 during a
flush loses no acknowledged write and duplicates none."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from graphrecall.embed import HashingEmbedder
from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.rows import SessionRow
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.store.wal import ScopeLog, WriteEntry
from graphrecall.store.wal.apply import apply_entries
from graphrecall.text import query_terms

EMB = HashingEmbedder(64)


def entry(sid: str, turns: list[str], *, start: int = 0, replaced: list[str] | None = None) -> WriteEntry:
    """What ingest would log for ``turns`` (alternating user/assistant) added to session ``sid`` at ``start``,
    given the session's earlier turns are ``turns[:start]`` (rounds are rebuilt over the whole session)."""
    date = datetime(2024, 2, 1)
    msgs = [Message(role="user" if j % 2 == 0 else "assistant", content=t) for j, t in enumerate(turns)]
    rows = message_rows(sid, msgs, start_idx=0, date=date)
    rounds = [
        r for r in build_rounds(sid, rows) if any(m in {x.id for x in rows[start:]} for m in r.message_ids)
    ]
    users = EMB.embed([r.user_text or r.reply_text for r in rounds])
    replies = EMB.embed([r.reply_text or r.user_text for r in rounds])
    return WriteEntry.from_rows(
        sessions=[SessionRow(sid, date)] if start == 0 else [],
        messages=rows[start:],
        rounds=rounds,
        user_vectors=users,
        reply_vectors=replies,
        replaced_round_ids=replaced or [],
        dim=EMB.dim,
    )


def seqd(entries: list[WriteEntry]) -> list[WriteEntry]:
    return [e.model_copy(update={"seq": i + 1}) for i, e in enumerate(entries)]


def _rounds(db: ScopeDatabase) -> list[list[Any]]:
    """Every round with its text (its messages', joined: Kuzu keeps a round's text only there) and terms."""
    rows = db.query(f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN r.id, r.terms ORDER BY r.id")
    rounds = q.kuzu_rounds(db, [r[0] for r in rows])
    return [[rid, rounds[rid].text, rounds[rid].message_ids, terms] for rid, terms in rows]


def dump(db: ScopeDatabase) -> dict[str, Any]:
    """Everything a replay could change, compared field by field."""
    return {
        "counts": q.counts(db),
        "sessions": db.query(
            f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} RETURN s.id, s.started_at ORDER BY s.id"
        ),
        "messages": db.query(
            f"{MATCH_SCOPE}MATCH {owned('m', 'Message')}-[:MSG_IN]->(s) RETURN m.id, m.idx, m.text, s.id ORDER BY m.id"
        ),
        "rounds": _rounds(db),
        "round_messages": db.query(  # a round's messages: those of its session that it names
            f"{MATCH_SCOPE}MATCH {owned('r', 'Round')}-[:ROUND_IN]->(:Session)<-[:MSG_IN]-(m:Message) "
            "WHERE list_contains(r.message_ids, m.id) RETURN r.id, m.id ORDER BY r.id, m.id"
        ),
        "in_session": db.query(
            f"{MATCH_SCOPE}MATCH {owned('r', 'Round')}-[:ROUND_IN]->(s) RETURN r.id, s.id ORDER BY r.id"
        ),
    }


@pytest.fixture
def db(tmp_path: Path) -> Iterator[ScopeDatabase]:
    d = ScopeDatabase.standalone(tmp_path / "u.kuzu", embedder_id=EMB.id, dim=EMB.dim)
    yield d
    d.close()


def history() -> list[WriteEntry]:
    return seqd(
        [
            entry("s1", ["I live in Munich"]),
            # the reply arrives in a later call: round s1@0 is rebuilt with both messages
            entry("s1", ["I live in Munich", "Munich is lovely"], start=1, replaced=["s1@0"]),
            entry("s2", ["We adopted a dog named Biscuit", "Congratulations!", "He is a beagle", "Cute"]),
        ]
    )


def test_applying_a_batch_twice_changes_nothing(db: ScopeDatabase) -> None:
    es = history()
    apply_entries(db, es)
    once = dump(db)
    assert once["counts"]["Session"] == 2 and once["counts"]["Message"] == 6 and once["counts"]["Round"] == 3
    assert once["rounds"][0][:3] == [
        "s1@0",
        "user: I live in Munich\nassistant: Munich is lovely",
        ["s1#0", "s1#1"],
    ]
    apply_entries(db, es)
    assert dump(db) == once
    assert q.lexical_search(db, "round_terms", "wbiscuit", 5)[0][0] == "s2@0"


@pytest.mark.parametrize("turns", [6, 400])  # found by point lookups, and past them (store.known)
def test_a_replay_mends_messages_that_a_torn_flush_kept_without_their_edges(
    db: ScopeDatabase, turns: int
) -> None:
    """A kill inside the checkpoint of a flush's commit can keep the messages a ``COPY`` wrote and lose the edges to
    their session (docs/architecture.md, "Decisions forced by measurement"); the write log still holds the entries,
    and their replay gives each such message its edge again, neither skipping it nor creating it twice."""
    es = seqd([entry("s1", [f"turn {i}: bread from bakery {i}" for i in range(turns)])])
    apply_entries(db, es)
    whole = dump(db)
    db.bucket.writer.execute(
        f"{MATCH_SCOPE}MATCH {owned('s', 'Session')}<-[e:MSG_IN]-(:Message) DELETE e", {"scope": db.user_id}
    )
    assert dump(db)["messages"] == []

    apply_entries(db, es)

    assert dump(db) == whole


@pytest.mark.parametrize("sessions", [3, 300])
def test_a_replay_mends_sessions_that_a_torn_flush_kept_without_their_owner_edge(
    db: ScopeDatabase, sessions: int
) -> None:
    """The same for sessions (a flush of 2,000 or more copies them, then writes their ``OWNS`` edges)."""
    es = seqd([entry(f"s{i}", [f"my note number {i}"]) for i in range(sessions)])
    apply_entries(db, es)
    whole = dump(db)
    db.bucket.writer.execute(
        "MATCH (:Scope {key: $scope})-[e:OWNS]->(:Session) DELETE e", {"scope": db.user_id}
    )
    assert dump(db)["sessions"] == []

    apply_entries(db, es)

    assert dump(db) == whole


def test_a_replay_mends_passages_that_a_torn_flush_kept_without_their_round_edge(db: ScopeDatabase) -> None:
    """A passage kept without its ``PASSAGE_OF`` edge is not reached by its round's replacement: its key fails the
    batch once, and the batch applied again deletes the passages it writes by key first."""
    plain = entry("s1", [f"a long diary entry, day {i}" for i in range(6)])
    rounds = plain.rounds
    passages = [EMB.embed([f"{r.id} part {j}" for j in range(2)]) for r in rounds]
    es = seqd([WriteEntry.from_rows(sessions=plain.sessions, messages=plain.messages, rounds=rounds,
                                    user_vectors=plain.user_matrix(), reply_vectors=plain.reply_matrix(),
                                    passages=passages, dim=EMB.dim)])  # fmt: skip
    assert [len(p) for p in es[0].passages() if p is not None] == [2] * len(rounds)

    def stored() -> list[list[Any]]:
        return db.query(f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')} RETURN p.id ORDER BY p.id")

    apply_entries(db, es)
    whole, kept = dump(db), stored()
    assert len(kept) == 2 * len(rounds)
    db.bucket.writer.execute(
        f"{MATCH_SCOPE}MATCH {owned('r', 'Round')}<-[e:PASSAGE_OF]-(:Passage) DELETE e", {"scope": db.user_id}
    )
    assert stored() == []

    apply_entries(db, es)

    assert stored() == kept and dump(db) == whole


@pytest.mark.parametrize("flushed", [0, 1, 2, 3])
def test_replaying_the_unmarked_suffix_over_any_flushed_prefix_gives_the_same_store(
    tmp_path: Path, flushed: int
) -> None:
    """A crash between the Kuzu commit and mark_flushed replays entries Kuzu has; one entry at a time each."""
    es = history()
    ref = ScopeDatabase.standalone(tmp_path / "ref.kuzu", embedder_id=EMB.id, dim=EMB.dim)
    crashed = ScopeDatabase.standalone(tmp_path / "crashed.kuzu", embedder_id=EMB.id, dim=EMB.dim)
    try:
        for e in es:
            apply_entries(ref, [e])
        # entries up to ``flushed`` went in and the one after too, but the marks never made it to the log
        for e in es[: min(flushed + 1, len(es))]:
            apply_entries(crashed, [e])
        apply_entries(crashed, es[flushed:])  # the replay: everything not marked, in one batch
        assert dump(crashed) == dump(ref)
    finally:
        ref.close()
        crashed.close()


def test_the_scope_log_flushes_into_kuzu_and_search_moves_from_tail_to_store(
    db: ScopeDatabase, tmp_path: Path
) -> None:
    with ScopeLog(
        tmp_path / "u.log.sqlite", dim=EMB.dim, apply=lambda es: apply_entries(db, es), start=False
    ) as sl:
        for e in history():
            sl.append(e.model_copy(update={"seq": 0}))
        qv = EMB.embed(["adopted dog Biscuit"])[0]
        before = sl.tail.snapshot().vector_search(qv, 1)
        assert q.counts(db)["Round"] == 0 and before[0][0] == "s2@0"
        assert sl.flush() == 3
        assert len(sl.tail) == 0 and q.counts(db)["Round"] == 3
        after = q.exact_vector_search(db, "embedding", qv, 1)
        assert after[0][0] == before[0][0] and after[0][1] == pytest.approx(before[0][1], abs=1e-5)


KILL_DURING_FLUSH = textwrap.dedent(
    """
    import sys
    from datetime import datetime
    from graphrecall.embed import HashingEmbedder
    from graphrecall.ingest import build_rounds, message_rows
    from graphrecall.models import Message
    from graphrecall.store.database import ScopeDatabase
    from graphrecall.store.rows import SessionRow
    from graphrecall.store.wal import ScopeLog, WriteEntry
    from graphrecall.store.wal.apply import apply_entries

    emb = HashingEmbedder(64)
    root = sys.argv[1]
    db = ScopeDatabase.standalone(__import__("pathlib").Path(root) / "u.kuzu", embedder_id=emb.id, dim=64)

    def apply(es):
        print("APPLY", es[0].seq, es[-1].seq, flush=True)
        apply_entries(db, es)

    sl = ScopeLog(root + "/u.log.sqlite", dim=64, apply=apply, batch_entries=10, start=False)
    for i in range(60):
        sid = f"s{i}"
        msgs = [Message(role="user", content=f"note {i} about topic{i}"), Message(role="assistant", content="ok")]
        rows = message_rows(sid, msgs, start_idx=0, date=datetime(2024, 1, 1))
        rounds = build_rounds(sid, rows)
        v = emb.embed([r.user_text for r in rounds])
        e = WriteEntry.from_rows(sessions=[SessionRow(sid, datetime(2024, 1, 1))], messages=rows, rounds=rounds,
                                 user_vectors=v, reply_vectors=v, dim=64)
        print("ACK", sl.append(e).seq, flush=True)
    sl.flush()  # batch after batch, until the parent kills us
    print("DONE", flush=True)
    """
)


def test_kill_9_during_a_flush_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(KILL_DURING_FLUSH)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    acked: list[int] = []
    applies = 0
    for line in proc.stdout:
        if line.startswith("ACK"):
            acked.append(int(line.split()[1]))
        elif line.startswith("APPLY"):
            applies += 1
            if applies == 3:  # the third batch is being written to Kuzu: kill now
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and acked == list(range(1, 61))
    db = ScopeDatabase.standalone(tmp_path / "u.kuzu", embedder_id=EMB.id, dim=EMB.dim)
    try:
        flushed_before = q.counts(db)["Round"]
        assert (
            flushed_before % 10 == 0 and flushed_before >= 20
        )  # whole batches only (a loaded parent may kill late)
        with ScopeLog(
            tmp_path / "u.log.sqlite", dim=EMB.dim, apply=lambda es: apply_entries(db, es), start=False
        ) as sl:
            assert sl.log.pending()[0].seq <= flushed_before + 1
            sl.flush()
        counts = q.counts(db)
        assert (counts["Session"], counts["Message"], counts["Round"]) == (60, 120, 60)
        ids = [r[0] for r in db.query(f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN r.id")]
        assert sorted(ids) == sorted(f"s{i}@0" for i in range(60))
        assert [h for h, _ in q.lexical_search(db, "round_terms", query_terms("42"), 3)] == ["s42@0"]
    finally:
        db.close()
