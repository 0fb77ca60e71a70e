"""Stores written by earlier code open with the current code and have lost nothing.

``tests/data/stores/v0_1_0.tar.gz`` (schema 1) was made once by ``scripts/make_store_fixture.py`` with the 0.1.0
code, ``schema2.tar.gz`` to ``schema5.tar.gz`` by the same script with the last schema 2, 3, 4 and 5 code (schema 5:
the last database per scope, before buckets), ``schema6.tar.gz`` with the last code whose fact and event vector
indexes kept float32 and whose index marks were a JSON string, ``schema7.tar.gz`` with the code that replaced them
(see the README beside them); none is ever regenerated: they are the old formats. Every test runs against
each. Whatever the storage becomes (a write log, derived indexes outside Kuzu, a new schema version), opening this
store must migrate it or rebuild what is derived, and every check below must hold. Only the public API is used, so the test does not care how.
"""

from __future__ import annotations

import json
import logging
import shutil
import tarfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.text import message_language

STORES = Path(__file__).resolve().parents[1] / "data" / "stores"
ARCHIVES = {
    "schema1": STORES / "v0_1_0.tar.gz",
    "schema2": STORES / "schema2.tar.gz",
    "schema3": STORES / "schema3.tar.gz",
    "schema4": STORES / "schema4.tar.gz",
    "schema5": STORES / "schema5.tar.gz",
    "schema6": STORES / "schema6.tar.gz",
    "schema7": STORES / "schema7.tar.gz",
}
SCOPE = Scope(org_id="fixture", user_id="ana")

# What the 0.1.0 store holds (written down here, not read from the script that made it: the archive is frozen).
USER_TURNS = {
    "s1": "I live in Munich and I love the beer gardens there.",
    "s2": "We adopted a dog! His name is Biscuit, a beagle.",
    "s3": "Big news: we moved from Munich to Berlin last month.",
    "s4": "I started a new job as a data analyst at a bike-sharing company.",
}
SESSION_DATES = {
    "s1": datetime(2024, 1, 10, 9, 0),
    "s2": datetime(2024, 3, 2, 18, 30),
    "s3": datetime(2024, 6, 15, 8, 15),
    "s4": datetime(2024, 7, 1, 12, 0),
}


def unpack(dest: Path, archive: Path) -> Path:
    root = dest / "store"
    root.mkdir()
    with tarfile.open(archive, "r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuse links and paths out of ``root``
            tar.extractall(root, filter="data")
        else:  # pragma: no cover
            tar.extractall(root)
    return root


def unpack_schema6(dest: Path) -> tuple[Path, dict[str, int]]:
    """The schema 6 archive unpacked, and the marks its bucket keeps for ``ana`` as JSON (read with Kuzu alone,
    before any graphrecall code opens it)."""
    import kuzu

    root = unpack(dest, ARCHIVES["schema6"])
    [bucket] = list(root.rglob("b*.kuzu"))
    db = kuzu.Database(str(bucket), read_only=True)
    conn = kuzu.Connection(db)
    [[raw]] = conn.execute("MATCH (s:Scope {key: 'ana'}) RETURN s.index_marks").get_all()  # type: ignore[union-attr]
    conn.close()
    db.close()
    return root, json.loads(raw)


@pytest.fixture(scope="module", params=sorted(ARCHIVES))
def archive(request: pytest.FixtureRequest) -> Path:
    return ARCHIVES[request.param]


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, archive: Path) -> Iterator[Memory]:
    root = unpack(tmp_path_factory.mktemp("upgrade"), archive)
    with Memory.open(root, settings=Settings(root=root)) as m:  # the default, real embedder it was made with
        yield m


def test_the_archive_is_small_and_holds_one_scope(tmp_path: Path, mem: Memory, archive: Path) -> None:
    assert archive.stat().st_size < 1_000_000
    root = unpack(tmp_path, archive)
    with Memory.open(root, settings=Settings(root=root), embedder=mem.embedder) as m:
        assert m.scopes() == [SCOPE]
    shutil.rmtree(root)


def test_every_row_survives(mem: Memory) -> None:
    stats = mem.stats(SCOPE)
    assert (stats.sessions, stats.messages, stats.rounds) == (4, 8, 4)
    assert (stats.facts, stats.events, stats.entities) == (4, 3, 3)  # facts: 3 current + 1 superseded
    assert stats.embedder_id == "sentence-transformers/all-MiniLM-L6-v2" and stats.dim == 384
    sessions = {s.id: s for s in mem.sessions(SCOPE)}
    assert {sid: s.started_at for sid, s in sessions.items()} == SESSION_DATES
    for sid, text in USER_TURNS.items():
        s = mem.get_session(SCOPE, sid)
        assert s.extract_status == "done"
        assert [m.id for m in s.messages] == [f"{sid}#0", f"{sid}#1"]
        assert s.messages[0].content == text and s.messages[0].role == "user"
    assert {e.name for e in mem.entities(SCOPE)} == {"Munich", "Biscuit", "Berlin"}
    assert {e.text for e in mem.events(SCOPE)} == {
        "The user adopted the dog Biscuit.",
        "The user moved from Munich to Berlin.",
        "The user started a job as a data analyst.",
    }


def test_every_message_has_the_language_a_write_would_have_stored(mem: Memory) -> None:
    # Schema 5 added ``Message.lang``; an older store gets it on open, detected from each message's text.
    for sid in USER_TURNS:
        messages = mem.get_session(SCOPE, sid).messages
        assert messages[0].lang == "en"
        assert [m.lang for m in messages] == [message_language(m.content) for m in messages]
    assert {m.lang for s in mem.export_sessions(SCOPE) for m in s.messages} <= {"en", ""}


def test_search_finds_the_berlin_round_first(mem: Memory) -> None:
    hits = mem.search(SCOPE, "When did we move to Berlin?", k=4)
    assert hits[0].id == "s3@0" and hits[0].session_id == "s3"
    assert hits[0].message_ids == ["s3#0", "s3#1"]
    dog = mem.search(SCOPE, "What is my dog called?", k=4)
    assert dog[0].session_id == "s2"


def test_current_facts_say_berlin_and_the_history_keeps_munich(mem: Memory) -> None:
    current = mem.facts(SCOPE)
    texts = {f.text for f in current}
    assert "The user lives in Berlin" in texts and "The user lives in Munich" not in texts
    assert len(current) == 3
    every = {f.text: f for f in mem.facts(SCOPE, include_superseded=True)}
    munich, berlin = every["The user lives in Munich"], every["The user lives in Berlin"]
    assert munich.superseded_by == berlin.id and not munich.current and berlin.current
    assert munich.message_ids == ["s1#0"] and berlin.message_ids == ["s3#0"]
    assert [f.id for f in mem.history(SCOPE, berlin.id)] == [munich.id, berlin.id]
    assert [f.id for f in mem.history(SCOPE, munich.id)] == [munich.id, berlin.id]
    # valid time: "last month" said on 2024-06-15 means the move happened in May
    assert [f.text for f in mem.facts(SCOPE, as_of="2024-02-01")] == ["The user lives in Munich"]
    fact_hits = mem.search(SCOPE, "Which city does the user live in?", k=3, kinds=("fact",))
    assert "The user lives in Munich" not in {h.text for h in fact_hits}
    assert fact_hits and fact_hits[0].text == "The user lives in Berlin"


def test_facts_gain_a_reinforcement_count_from_their_sources(mem: Memory) -> None:
    every = mem.facts(SCOPE, include_superseded=True)
    assert len(every) == 4
    # each fixture fact was said in one session: the upgrade counts its distinct source sessions
    assert {f.reinforcement for f in every} == {1}
    assert all(f.last_seen is not None for f in every)


def test_the_upgraded_store_takes_new_writes(tmp_path: Path, mem: Memory, archive: Path) -> None:
    root = unpack(tmp_path, archive)
    with Memory.open(root, settings=Settings(root=root), embedder=mem.embedder) as m:
        r = m.add_session(
            SCOPE,
            [{"role": "user", "content": "Biscuit learned to fetch a frisbee in Tempelhof park."}],
            session_id="s5",
            date="2024-08-03",
        )
        assert r.messages_added == 1
    with Memory.open(root, settings=Settings(root=root), embedder=mem.embedder) as m:
        assert m.stats(SCOPE).sessions == 5
        assert m.search(SCOPE, "frisbee", k=1)[0].session_id == "s5"
        berlin = next(f for f in m.facts(SCOPE) if f.text == "The user lives in Berlin")
        names = [e.name for e in m.entities(SCOPE) if e.id in berlin.entity_ids]
        again = m.add_fact(SCOPE, "The user lives in Berlin", kind=berlin.kind, entities=names)
        assert again.decision == "DUPLICATE" and again.fact.reinforcement == 2  # the new column is written


def test_a_schema_6_store_rebuilds_its_fact_and_event_vectors_in_half_precision_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Since 2026-12-05 every derived vector index keeps float16 (``store.vectors``); a store of the day before has
    float32 fact and event indexes: they alone are rebuilt from Kuzu, said in one line, and nothing else moves."""
    root = unpack(tmp_path, ARCHIVES["schema6"])
    idx = root / "fixture" / "ana.kuzu.idx"
    assert sorted(p.parent.name for p in idx.glob("vec-*/vectors.f32")) == ["vec-event_vec", "vec-fact_vec"]
    with (
        caplog.at_level(logging.INFO),
        Memory.open(root, settings=Settings(root=root)) as m,
    ):
        assert m.stats(SCOPE).facts == 4 and m.stats(SCOPE).events == 3
        with testing.database(m, SCOPE) as db:
            assert sorted(db.indexes.rebuilt) == ["event_vec", "fact_vec"]
        hits = m.search(SCOPE, "Which city does the user live in?", k=3, kinds=("fact",))
        assert hits[0].text == "The user lives in Berlin"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and "rebuilt 2 derived index(es)" in said[0], said
    assert list(idx.glob("vec-*/vectors.f32")) == []
    fact_vectors = idx / "vec-fact_vec" / "vectors.f16"
    assert fact_vectors.stat().st_size == 4 * 384 * 2  # 4 facts, 2 bytes a component
    caplog.clear()
    with (
        caplog.at_level(logging.INFO),
        Memory.open(root, settings=Settings(root=root)) as m,
        testing.database(m, SCOPE) as db,
    ):
        assert db.indexes.rebuilt == []  # upgraded once


def test_a_schema_6_bucket_keeps_its_index_marks_as_integer_columns_after_one_upgrade(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Schema 7 keeps each scope's derived-index marks in integer columns (``schema.MARK_COLUMNS``: a string column
    grew with the square of a bucket's scopes). The marks a schema 6 bucket kept as JSON are the same after the
    upgrade (no index rebuilt for them: ``round_user`` and the rest are not), and it is said in one line, once."""
    from graphrecall.store import schema

    root, before = unpack_schema6(tmp_path)
    with caplog.at_level(logging.INFO), Memory.open(root, settings=Settings(root=root)) as m:
        with testing.database(m, SCOPE) as view:
            assert view.bucket.member("ana").marks == before  # type: ignore[union-attr]
            assert "round_user" not in view.indexes.rebuilt
            columns = [r[0] for r in view.bucket.query("CALL table_info('Scope') RETURN name")]
            assert [
                c for c in columns if c != "index_marks"
            ] == schema.scope_columns()  # a new bucket's, in order
            assert "index_marks" in columns  # left, unwritten, for the next compaction (schema.DEAD_COLUMNS)
            [[version]] = view.bucket.query(
                "MATCH (b:Scope {key: $b}) RETURN b.schema_version", {"b": schema.BUCKET_ROW}
            )
            assert version == schema.SCHEMA_VERSION == 7
        m.add_fact(SCOPE, "The user plays the cello")
    said = [r.getMessage() for r in caplog.records if "upgraded from schema" in r.getMessage()]
    assert len(said) == 1 and "schema 6 to 7" in said[0] and "its 1 scopes" in said[0], said
    caplog.clear()
    with caplog.at_level(logging.INFO), Memory.open(root, settings=Settings(root=root)) as m:
        assert any(f.text == "The user plays the cello" for f in m.facts(SCOPE))
        with testing.database(m, SCOPE) as view:
            assert view.indexes.rebuilt == []
    assert not [r for r in caplog.records if "upgraded from schema" in r.getMessage()]


UPGRADE_KILLED = """
import os, sys
from pathlib import Path
from graphrecall import Memory, Settings, Scope, testing
from graphrecall.store.database import BucketDatabase
root, n = Path(sys.argv[1]), int(sys.argv[2])
calls, real = [0], BucketDatabase.checkpoint
def checkpoint(self, *a, **k):
    calls[0] += 1
    if calls[0] == n:
        os._exit(9)  # the step before it committed, in Kuzu's WAL only
    return real(self, *a, **k)
BucketDatabase.checkpoint = checkpoint
with Memory.open(root, settings=Settings(root=root)) as m, testing.database(m, Scope(org_id="fixture", user_id="ana")):
    pass
"""

REOPENED = """
import json, sys
from pathlib import Path
from graphrecall import Memory, Settings, Scope, testing
from graphrecall.store import schema
root = Path(sys.argv[1])
with Memory.open(root, settings=Settings(root=root)) as m, testing.database(m, Scope(org_id="fixture", user_id="ana")) as v:
    [[version]] = v.bucket.query("MATCH (b:Scope {key: '.bucket'}) RETURN b.schema_version")
    columns = [r[0] for r in v.bucket.query("CALL table_info('Scope') RETURN name")]
    seen = {"marks": dict(v.bucket.member("ana").marks), "version": version, "columns": columns,
            "rebuilt": sorted(v.indexes.rebuilt)}
    m.add_fact(Scope(org_id="fixture", user_id="ana"), "The user plays the cello")  # a SET and its checkpoint
    print(json.dumps(seen))
"""


@pytest.mark.parametrize(
    "checkpoint", [1, 2, 3], ids=["after-the-columns", "after-the-marks", "after-the-version"]
)
def test_a_schema_6_upgrade_killed_at_any_of_its_checkpoints_is_finished_by_the_next_open(
    tmp_path: Path, checkpoint: int
) -> None:
    """A real kill (``os._exit``) at each checkpoint of the upgrade, so the step before it is in Kuzu's WAL only, then
    an open in a fresh process through recovery: the upgrade is finished, the marks are the JSON's, a write and its
    checkpoint succeed. (Dropping the string column was part of the upgrade first: a kill right after the ``DROP``
    left a bucket whose every open crashed with SIGSEGV, so it is not dropped: ``schema.DEAD_COLUMNS``.)"""
    import subprocess
    import sys

    from graphrecall.store import schema

    root, before = unpack_schema6(tmp_path)
    killed = subprocess.run(
        [sys.executable, "-c", UPGRADE_KILLED, str(root), str(checkpoint)], capture_output=True, text=True
    )
    assert killed.returncode == 9, killed.stderr[-2000:]
    again = subprocess.run([sys.executable, "-c", REOPENED, str(root)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-2000:]
    seen = json.loads(again.stdout.strip().splitlines()[-1])
    assert seen["marks"] == before and seen["version"] == schema.SCHEMA_VERSION
    assert [c for c in seen["columns"] if c != "index_marks"] == schema.scope_columns()
    assert "round_user" not in seen["rebuilt"]
