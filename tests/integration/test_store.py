"""The per-scope Kuzu store: schema, embedder check, LRU pool, deletion, atomic writes and thread safety."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graphrecall import EmbedderMismatch, Memory, Scope, Settings, testing, writer
from graphrecall.embed import HashingEmbedder
from graphrecall.index import index_dir
from graphrecall.store import schema
from graphrecall.store.database import ScopeDatabase, WriteTxn
from graphrecall.store.derived import DERIVED
from graphrecall.store.rounds import counts
from graphrecall.store.rows import SessionRow
from graphrecall.store.schema import MATCH_SCOPE, owned


def chat(*turns: str) -> list[dict[str, str]]:
    """Alternating user/assistant messages, user first."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]


def open_memory(root: Path, dim: int = 64, pool_size: int = 16, resident_rounds: int = 64) -> Memory:
    settings = Settings(root=root, pool_size=pool_size, resident_rounds=resident_rounds)
    return Memory.open(root, embedder=HashingEmbedder(dim), settings=settings)


def run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(targets))

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def go() -> None:
            barrier.wait()
            try:
                fn()
            except BaseException as e:
                errors.append(e)

        return go

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_a_new_database_has_the_schema_and_records_its_embedder(tmp_path: Path) -> None:
    db = ScopeDatabase.standalone(tmp_path / "a.kuzu", embedder_id="hashing-64", dim=64)
    try:
        tables = {row[1] for row in db.query("CALL show_tables() RETURN *")}
        for stmt in [*schema.node_tables(64), *schema.REL_TABLES, schema.OWNS_REL]:
            assert stmt.split()[3].split("(")[0] in tables
        meta = db.bucket.query(
            "MATCH (m:Scope {key: $b}) RETURN m.schema_version, m.embedder_id, m.dim",
            {"b": schema.BUCKET_ROW},
        )
        assert meta == [[schema.SCHEMA_VERSION, "hashing-64", 64]]
        # Kuzu holds no index of its own: every index is derived, beside the database, and starts empty.
        assert db.query("CALL show_indexes() RETURN *") == []
        assert sorted(p.name for p in index_dir(db.path).iterdir()) == sorted(
            f"{'lex' if d.kind == 'lexical' else 'vec'}-{d.name}" for d in DERIVED
        )
        assert all(db.indexes.count(d.name) == 0 for d in DERIVED) and sorted(db.indexes.rebuilt) == sorted(
            d.name for d in DERIVED
        )
    finally:
        db.close()


def test_reopening_with_another_embedder_is_refused_and_loses_nothing(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root, 64) as mem:
        mem.add_session(scope, chat("I adopted a puppy called Biscuit", "Lovely!"), session_id="s1")
        before = mem.stats(scope)
    with open_memory(store_root, 32) as other:
        for call in (
            lambda: other.stats(scope),
            lambda: other.search(scope, "puppy"),
            lambda: other.add_session(scope, chat("hello"), session_id="s2"),
        ):
            with pytest.raises(EmbedderMismatch) as info:
                call()
            message = str(info.value)
            assert "'hashing-64' (dim 64)" in message
            assert "'hashing-32' (dim 32)" in message
            assert info.value.code == "embedder_mismatch"
    with open_memory(store_root, 64) as mem:
        after = mem.stats(scope)
        assert (after.sessions, after.messages, after.rounds) == (
            before.sessions,
            before.messages,
            before.rounds,
        )
        assert [h.session_id for h in mem.search(scope, "puppy Biscuit", 1)] == ["s1"]


def test_the_pool_serves_more_scopes_than_it_keeps_open(store_root: Path) -> None:
    scopes = [Scope(org_id=f"org{i % 3}", user_id=f"user{i}") for i in range(9)]
    with open_memory(store_root, pool_size=3, resident_rounds=0) as mem:  # every scope has a database
        for i, s in enumerate(scopes):
            mem.add_session(s, chat(f"my favourite number is {i}"), session_id=f"s{i}")
            assert testing.pool(mem).open_count() <= 3
        opens_before = testing.pool(mem).opens
        for i, s in enumerate(scopes):
            hits = mem.search(s, f"favourite number {i}", 5)
            assert [h.session_id for h in hits] == [f"s{i}"]
        assert testing.pool(mem).open_count() <= 3
        assert testing.pool(mem).opens > opens_before  # evicted databases were closed and reopened
        assert sorted(mem.scopes(), key=str) == sorted(scopes, key=str)


def test_forget_deletes_the_files_and_only_that_scope(store_root: Path, scope: Scope) -> None:
    """Whole-user erase in a shared bucket: tests/integration/test_bucket_isolation.py checks every row and edge."""
    other = Scope(org_id="acme", user_id="bob")
    with open_memory(
        store_root, resident_rounds=0
    ) as mem:  # resident scopes: tests/integration/test_resident_scopes.py
        mem.add_session(scope, chat("secret plans"), session_id="s1")
        mem.add_session(other, chat("bob's notes"), session_id="s1")
        mem.flush()
        path = testing.pool(mem).path_for(scope)  # its derived indexes are <path>.idx, its log beside
        assert testing.pool(mem).exists(scope) and any(path.parent.glob(path.name + "*"))
        assert mem.forget(scope) is True
        assert not any(path.parent.glob(path.name + "*")) and not testing.pool(mem).exists(scope)
        assert not any(path.parent.glob(f"{scope.user_id}.*"))
        assert mem.scopes() == [other]
        assert mem.stats(scope).messages == 0
        assert mem.search(scope, "secret plans") == []
        assert mem.forget(scope) is False
        assert mem.stats(other).messages == 1
        mem.add_session(scope, chat("a fresh start"), session_id="s9")  # the scope can be used again
        assert mem.stats(scope).sessions == 1


def test_a_write_that_fails_midway_leaves_nothing(
    store_root: Path, scope: Scope, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(store_root) as mem:
        mem.add_session(scope, chat("first question", "first answer"), session_id="s1")
        mem.flush()
        with testing.database(mem, scope) as db:
            before = counts(db)
        real_copy = WriteTxn.copy
        copies: list[str] = []

        def copy_then_fail(self: WriteTxn, table: str, data: Any) -> None:
            if copies:
                raise RuntimeError("disk full (simulated)")
            copies.append(table)
            real_copy(self, table, data)

        monkeypatch.setattr(WriteTxn, "copy", copy_then_fail)
        monkeypatch.setattr(writer, "LOG_MAX_ROUNDS", 0)  # one Kuzu transaction, not the write log
        with pytest.raises(RuntimeError, match="simulated"):
            mem.add_session(scope, chat("new question", "new answer"), session_id="s2")
        copies.clear()
        with pytest.raises(RuntimeError, match="simulated"):  # an append also deletes and rewrites a round
            mem.add_messages(scope, chat("follow-up question"), session_id="s1")
        assert copies == ["Message"]
        monkeypatch.setattr(WriteTxn, "copy", real_copy)

        with testing.database(mem, scope) as db:
            assert counts(db) == before
        assert [h.id for h in mem.search(scope, "first question", 3)] == ["s1@0"]
        mem.add_session(scope, chat("new question", "new answer"), session_id="s2")
        assert mem.stats(scope).sessions == 2
        assert [h.session_id for h in mem.search(scope, "new question answer", 1)] == ["s2"]


def test_concurrent_writers_to_one_scope_all_land(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root) as mem:

        def writer(i: int) -> Callable[[], None]:
            def go() -> None:
                for j in range(2):
                    mem.add_session(scope, chat(f"thread {i} note {j}", "ok"), session_id=f"t{i}-{j}")

            return go

        assert run_threads([writer(i) for i in range(8)]) == []
        stats = mem.stats(scope)
        assert (stats.sessions, stats.messages, stats.rounds) == (16, 32, 16)
        assert {s.id for s in mem.sessions(scope)} == {f"t{i}-{j}" for i in range(8) for j in range(2)}


def test_concurrent_writers_to_different_scopes_and_readers_meanwhile(store_root: Path) -> None:
    scopes = [Scope(org_id="acme", user_id=f"u{i}") for i in range(8)]
    shared = Scope(org_id="acme", user_id="shared")
    with open_memory(store_root) as mem:
        mem.add_session(shared, chat("the hiking trip to Snowdon", "sounds fun"), session_id="r0")
        done = threading.Event()
        reads: list[str] = []
        reader_errors: list[BaseException] = []

        def writer(s: Scope) -> Callable[[], None]:
            def go() -> None:
                mem.add_session(s, chat(f"note for {s.user_id}", "ok"), session_id="s0")
                mem.add_session(s, chat(f"second note for {s.user_id}"), session_id="s1")
                mem.add_session(shared, chat(f"{s.user_id} was here"), session_id=s.user_id)

            return go

        def reader() -> None:
            try:
                while not done.is_set():
                    reads.append(mem.search(shared, "hiking trip Snowdon", 3)[0].id)
            except BaseException as e:
                reader_errors.append(e)

        reader_threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in reader_threads:
            t.start()
        errors = run_threads([writer(s) for s in scopes])
        done.set()
        for t in reader_threads:
            t.join(timeout=60)
        assert errors == []
        assert reader_errors == []
        assert reads, "readers made no progress while writers ran"
        assert set(reads) == {"r0@0"}
        for s in scopes:
            assert {x.id for x in mem.sessions(s)} == {"s0", "s1"}
        assert {x.id for x in mem.sessions(shared)} == {"r0", *(s.user_id for s in scopes)}


def test_rounds_written_without_passages_have_none(tmp_path: Path) -> None:
    """``write_batch``'s passages are optional (the benchmarks and any caller without long turns omit them)."""
    import numpy as np

    from graphrecall.ingest import build_rounds, message_rows
    from graphrecall.models import Message
    from graphrecall.store.rounds import write_batch

    db = ScopeDatabase.standalone(tmp_path / "a.kuzu", embedder_id="hashing-64", dim=64)
    try:
        msgs = [
            Message(role="user", content="I adopted a puppy"),
            Message(role="assistant", content="Lovely!"),
        ]
        rows = message_rows("s1", msgs, start_idx=0, date=None)
        rounds = build_rounds("s1", rows)
        vecs = np.eye(64, dtype=np.float32)[: len(rounds)]
        with db.write() as txn:
            write_batch(
                txn, new_sessions=[SessionRow("s1", rows[0].at)], messages=rows, rounds=rounds, user_vecs=vecs,
                reply_vecs=vecs, replaced_round_ids=[], dim=64,
            )  # fmt: skip
        assert db.query(f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN count(r)") == [[1]]
        assert db.query(f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')} RETURN count(p)") == [[0]]
    finally:
        db.close()
