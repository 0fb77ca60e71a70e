"""A small scope lives in its write log, with no Kuzu database, until it grows or its graph is written.

Why it matters: Kuzu spends ~1 MB on the first row of every node table, so a user who said one word cost 4.3 MB as
a Kuzu store. These tests pin what a user of the library sees: the scope is searchable, listed, exportable and
erasable like any other, it survives a restart and a kill -9, and it moves into Kuzu (losing nothing, duplicating
nothing) when it reaches ``Settings.resident_rounds`` rounds, on a bulk write, or when its graph is written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.smallstore import data as smallstore

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import StoreBusy
from graphrecall.store.wal.log import LOG_SUFFIX


def open_memory(root: Path, **settings: object) -> Memory:
    return Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root, **settings))  # type: ignore[arg-type]


@pytest.fixture
def small(store_root: Path) -> Iterator[Memory]:
    """Scopes stay in their log below 4 rounds; a batch is due after 0.05 s once they have a database."""
    with open_memory(store_root, resident_rounds=4, flush_max_age_s=0.05) as m:
        yield m


def in_kuzu(root: Path, scope: Scope) -> bool:
    """Whether the scope's organisation has a bucket in Kuzu: these tests store one scope per organisation, so
    whether the scope entered Kuzu (store.buckets)."""
    return any((root / scope.org_id / ".buckets").glob("*/b*.kuzu"))


def log_file(root: Path, scope: Scope) -> Path:
    return root / scope.org_id / f"{scope.user_id}{LOG_SUFFIX}"


def disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def turn(i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"note {i}: my locker code is {1000 + i}"},
        {"role": "assistant", "content": f"noted, locker {i}"},
    ]


def wait_for(cond: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_a_one_message_user_is_a_small_log_and_no_kuzu_database(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root) as m:  # library defaults
        m.add_session(scope, [{"role": "user", "content": "hello"}], session_id="s1", date="2024-03-01")
        assert not in_kuzu(store_root, scope)
        hits = m.search(scope, "hello", k=3)
        assert [h.id for h in hits] == ["s1@0"]
        stats = m.stats(scope)
        assert (stats.sessions, stats.messages, stats.rounds) == (1, 1, 1)
        assert stats.disk_bytes < 200_000
    assert not in_kuzu(store_root, scope)  # close does not move it into Kuzu
    assert log_file(store_root, scope).exists()
    assert disk_bytes(store_root) < 200_000  # issue 10's stretch target for a one-message user


def test_a_resident_scope_reads_like_any_other_and_survives_a_reopen(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root) as m:
        m.add_session(scope, turn(1), session_id="s1", date="2024-03-01")
        m.add_messages(scope, turn(2), session_id="s1")
    with open_memory(store_root) as m:
        assert m.scopes() == [scope]
        assert [x.id for x in m.sessions(scope)] == ["s1"]
        session = m.get_session(scope, "s1")
        assert [x.content for x in session.messages] == [*(t["content"] for t in turn(1) + turn(2))]
        assert [x.idx for x in session.messages] == [0, 1, 2, 3]
        assert m.search(scope, "locker code 1002", k=1)[0].id == "s1@1"
        assert "locker code is 1001" in m.context(scope, "locker code", token_budget=500).text
        exported = m.export_scope(scope)
        assert [len(x.messages) for x in exported.sessions] == [4]
        assert m.facts(scope) == [] and m.events(scope) == [] and m.entities(scope) == []
        # Re-adding the same session changes nothing: its ids are known from the log alone.
        again = m.add_session(scope, turn(1), session_id="s1", date="2024-03-01")
        assert (again.messages_added, again.messages_skipped) == (0, 2)
    assert not in_kuzu(store_root, scope)


def test_it_moves_into_kuzu_when_it_reaches_resident_rounds(
    small: Memory, store_root: Path, scope: Scope
) -> None:
    for i in range(3):
        small.add_session(scope, turn(i), session_id=f"s{i}", date=f"2024-03-0{i + 1}")
    time.sleep(0.3)  # several flush ages: a scope below the limit is held
    assert not in_kuzu(store_root, scope)
    small.add_session(scope, turn(3), session_id="s3", date="2024-03-04")
    assert wait_for(lambda: in_kuzu(store_root, scope) and not testing.logs(small).snapshot(scope))
    assert small.stats(scope).rounds == 4
    assert sorted(h.id for h in small.search(scope, "locker", k=10)) == [f"s{i}@0" for i in range(4)]
    small.add_session(scope, turn(4), session_id="s4", date="2024-03-05")  # now an ordinary scope
    assert [x.id for x in small.sessions(scope)] == [f"s{i}" for i in range(5)]


def test_a_bulk_write_moves_it_into_kuzu_after_what_the_log_holds(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root) as m:
        m.add_session(scope, turn(0), session_id="first", date="2024-01-01")
        two_turns = [turn(i) + turn(i + 100) for i in range(1, 41)]
        bulk = [{"session_id": f"b{i}", "date": "2024-02-01", "messages": t} for i, t in enumerate(two_turns)]
        assert (
            m.add_sessions(scope, bulk).rounds_written == 80
        )  # > 64 rounds in one batch: straight into Kuzu
        assert in_kuzu(store_root, scope)
        assert not testing.logs(m).snapshot(scope)  # the log's entry went first
        stats = m.stats(scope)
        assert (stats.sessions, stats.messages, stats.rounds) == (41, 162, 81)
        assert m.search(scope, "locker code is 1000", k=1)[0].id == "first@0"


def test_writing_its_graph_moves_it_into_kuzu(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root) as m:
        m.add_session(scope, turn(0), session_id="s0", date="2024-01-01")
        m.add_session(scope, turn(1), session_id="s1", date="2024-01-02")
        erased = m.erase(scope, session_ids=["s0"])
        assert erased.sessions == ["s0"]
        assert in_kuzu(store_root, scope)
        assert [x.id for x in m.sessions(scope)] == ["s1"]
        assert [h.session_id for h in m.search(scope, "locker", k=5)] == ["s1"]


def test_forget_removes_a_resident_scope(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root) as m:
        m.add_session(scope, turn(0), session_id="s0")
        assert m.forget(scope)
        assert m.scopes() == [] and m.search(scope, "locker", k=3) == []
        assert not log_file(store_root, scope).exists()


def test_resident_rounds_zero_moves_every_scope_into_kuzu(store_root: Path, scope: Scope) -> None:
    with open_memory(store_root, resident_rounds=0, flush_max_age_s=0.05) as m:
        m.add_session(scope, turn(0), session_id="s0")
        assert wait_for(lambda: in_kuzu(store_root, scope))


def test_writes_racing_the_move_into_kuzu_lose_and_repeat_nothing(small: Memory, scope: Scope) -> None:
    """Appends numbered from what is stored, while another thread flushes: a write planned against the log alone
    must notice when the scope moved into Kuzu under it (``writer.Graduated``) and plan again."""
    stop = threading.Event()

    def flusher() -> None:
        while not stop.is_set():
            small.flush()
            time.sleep(0.001)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for i in range(40):
            small.add_messages(scope, [{"role": "user", "content": f"message {i}"}], session_id="chat")
    finally:
        stop.set()
        t.join()
    msgs = small.get_session(scope, "chat").messages
    assert [m.content for m in msgs] == [f"message {i}" for i in range(40)]
    assert [m.idx for m in msgs] == list(range(40))


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from graphrecall import Memory, Scope, Settings
    from graphrecall.embed import HashingEmbedder

    root = Path(sys.argv[1])
    m = Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root))
    scope = Scope(org_id="acme", user_id="alice")
    for i in range(10_000):
        m.add_session(scope, [{"role": "user", "content": f"fact number {i}"}], session_id=f"s{i}")
        print(i, flush=True)  # acknowledged
    """
)


def test_kill_9_keeps_every_acknowledged_write_of_a_resident_scope(store_root: Path, tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "GRAPHRECALL_RESIDENT_ROUNDS": "1000"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(store_root)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acked = []
    for line in proc.stdout:
        acked.append(int(line))
        if len(acked) >= 30:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    scope = Scope(org_id="acme", user_id="alice")
    assert not in_kuzu(store_root, scope)
    with open_memory(store_root, resident_rounds=1000) as m:
        ids = {x.id for x in m.sessions(scope)}
        assert {f"s{i}" for i in acked} <= ids
        assert m.search(scope, f"fact number {acked[-1]}", k=1)[0].session_id == f"s{acked[-1]}"


HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from graphrecall import Memory, Scope, Settings
    from graphrecall.embed import HashingEmbedder

    root = Path(sys.argv[1])
    with Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root)) as m:
        m.add_session(Scope(org_id="acme", user_id="alice"), [{"role": "user", "content": "hi"}], session_id="s")
        print("ready", flush=True)
        sys.stdin.read()
    """
)


def test_a_second_process_is_refused_a_scope_that_lives_in_its_log(store_root: Path, scope: Scope) -> None:
    """As Kuzu's file lock does for a database: two processes keeping one tail each would plan clashing ids."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store_root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with open_memory(store_root) as m:
            with pytest.raises(StoreBusy, match="held by another process"):
                m.search(scope, "hi")
            with pytest.raises(StoreBusy):
                m.add_session(scope, [{"role": "user", "content": "me too"}], session_id="t")
            other = Scope(org_id="acme", user_id="bob")  # other scopes are not held
            m.add_session(other, [{"role": "user", "content": "hello"}], session_id="s")
            assert m.search(other, "hello", k=1)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
    with open_memory(store_root) as m:  # the holder is gone: the scope is there, its one message only
        assert [x.id for x in m.sessions(scope)] == ["s"]


def test_a_scope_ranks_the_same_in_its_log_as_in_kuzu(store_root: Path) -> None:
    """The same rounds searched from the log's tail (exact cosine, the tail's BM25) and from Kuzu's derived indexes
    (tantivy, the vector index) give the same ranking: moving into Kuzu changes no answer. (With the bundled model,
    all 102 small-store questions ranked identically, top 10, in both places.)"""
    with open_memory(store_root) as m:
        for h in smallstore.load("dev")[:4]:
            s = Scope(org_id="same", user_id=h.id)
            m.add_sessions(s, h.session_inputs())
            assert testing.logs(m).resident(s)
            before = [
                [x.id for x in m.search(s, q.question, k=10, question_date=h.question_date)]
                for q in h.questions
            ]
            m.flush()
            assert not testing.logs(m).resident(s)
            after = [
                [x.id for x in m.search(s, q.question, k=10, question_date=h.question_date)]
                for q in h.questions
            ]
            assert before == after, h.id
