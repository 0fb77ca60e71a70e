"""Derived indexes of a real scope: built from Kuzu, agreeing with Kuzu's own search, rebuilt when deleted, damaged
or stale, and reopened after a kill -9 in the middle of writes with every acknowledged row present."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from graphrecall import Memory, Scope, testing
from graphrecall.index import ExactVectorIndex, ScopeIndexes, TantivyLexicalIndex, index_dir
from graphrecall.index.source import RoundSource
from graphrecall.store import rounds as q
from graphrecall.text import query_terms

pytest.importorskip("tantivy")

TOPICS = [
    "my cat Tom",
    "the trip to Lisbon",
    "a new job in Berlin",
    "learning the cello",
    "my sister's wedding",
]


def _fill(mem: Memory, scope: Scope, n: int = 12) -> None:
    for i in range(n):
        t = TOPICS[i % len(TOPICS)]
        mem.add_session(
            scope,
            [
                {"role": "user", "content": f"Tell me about {t}, part {i}."},
                {"role": "assistant", "content": f"Sure: {t}!"},
            ],
            session_id=f"s{i}",
        )
    mem.flush()  # into Kuzu, which the indexes are built from


def _open(mem: Memory, scope: Scope, mark: str | None = None) -> ScopeIndexes:
    with testing.database(mem, scope, create=True) as db:
        return ScopeIndexes.open(
            db.path, embedder_id=mem.embedder.id, dim=mem.embedder.dim, source=RoundSource(db, lambda: mark)
        )


def test_first_open_builds_from_kuzu_and_agrees_with_kuzu_search(mem: Memory, scope: Scope) -> None:
    _fill(mem, scope)
    ix = _open(mem, scope)
    assert len(ix.rebuilt) == 3  # nothing existed yet
    with testing.database(mem, scope, create=True) as db:
        n = q.counts(db)["Round"]
        assert ix.lexical["round"].count() == n and ix.vector["round_user"].count() == n
        terms = query_terms("What did I say about the trip to Lisbon?")
        kuzu_ids = {i for i, _ in q.fts_search(db, "Round", "round_fts", terms, 5)}
        ours = {i for i, _ in ix.lexical["round"].search(terms.split(), 5)}
        assert ours == kuzu_ids
        vec = mem.embedder.embed(["Tell me about the trip to Lisbon, part 1."])[0]
        exact = q.exact_vector_search(db, "embedding", vec, 5)
        ours_v = ix.vector["round_user"].search(vec, 5)
        assert ours_v[0][0] == exact[0][0]
        assert [s for _, s in ours_v] == pytest.approx([s for _, s in exact], abs=1e-5)  # ties may swap ids
    ix.close()
    assert _open(mem, scope).rebuilt == []  # a second open trusts what it finds


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: __import__("shutil").rmtree(d),
        lambda d: (d / "lex-round" / "manifest.json").write_text("nonsense"),
        lambda d: (d / "lex-round" / "data" / "meta.json").write_text("{"),
        lambda d: (d / "vec-round_user" / "log.txt").write_text("junk\n"),
        lambda d: (d / "vec-round_reply" / "vectors.f32").write_bytes(b"\0" * 7),
    ],
    ids=["dir-deleted", "manifest-garbage", "tantivy-meta-torn", "vector-log-garbage", "vectors-truncated"],
)
def test_deleted_or_damaged_indexes_are_rebuilt_with_a_log_line(
    mem: Memory,
    scope: Scope,
    damage,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    _fill(mem, scope)
    _open(mem, scope).close()
    with testing.database(mem, scope, create=True) as db:
        damage(index_dir(db.path))
        n = q.counts(db)["Round"]
    with caplog.at_level(logging.WARNING, logger="graphrecall.index"):
        ix = _open(mem, scope)
    assert ix.rebuilt and any("rebuilt" in r.message for r in caplog.records)
    assert ix.lexical["round"].count() == n and all(v.count() == n for v in ix.vector.values())


def test_a_stale_mark_triggers_a_rebuild(mem: Memory, scope: Scope) -> None:
    _fill(mem, scope, 3)
    _open(mem, scope, mark="7").close()
    assert _open(mem, scope, mark="7").rebuilt == []
    _fill(mem, scope, 6)  # the store moved on while the index did not see it
    ix = _open(mem, scope, mark="13")
    assert len(ix.rebuilt) == 3 and ix.lexical["round"].mark == "13"
    with testing.database(mem, scope, create=True) as db:
        assert ix.vector["round_user"].count() == q.counts(db)["Round"]


CHILD = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from pathlib import Path
    from graphrecall.index import ExactVectorIndex, TantivyLexicalIndex
    kind, path, ack = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    ix = TantivyLexicalIndex(path) if kind == "lex" else ExactVectorIndex(path, embedder_id="e", dim=64)
    rng = np.random.default_rng(os.getpid())
    n = 0
    with open(ack, "a") as f:
        print("ready", flush=True)
        while True:
            ids = [f"c{os.getpid()}-{n + j}" for j in range(10)]
            if kind == "lex":
                ix.add([(i, "wcrash w" + str(rng.integers(100))) for i in ids])
            else:
                v = rng.standard_normal((10, 64)).astype(np.float32)
                ix.add(ids, v / np.linalg.norm(v, axis=1, keepdims=True))
            n += 10
            f.write(f"{n}\\n"); f.flush(); os.fsync(f.fileno())
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["lex", "vec"])
def test_kill_9_in_the_middle_of_writes_loses_no_acknowledged_row(tmp_path: Path, kind: str) -> None:
    path = tmp_path / kind
    if kind == "lex":
        TantivyLexicalIndex.rebuild_from(path, [("seed", "wseed")]).close()
    else:
        ExactVectorIndex.rebuild_from(
            path, [("seed", np.eye(64, dtype=np.float32)[0])], embedder_id="e", dim=64
        )
    base = 1
    for trial in range(3):
        ack = tmp_path / f"ack{trial}"
        ack.write_text("0\n")
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, kind, str(path), str(ack)],
            stdout=subprocess.PIPE,
            env=os.environ.copy(),
        )
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        time.sleep(0.4 + 0.5 * trial)
        child.send_signal(signal.SIGKILL)
        child.wait()
        acked = int(ack.read_text().split()[-1])
        ix = TantivyLexicalIndex(path) if kind == "lex" else ExactVectorIndex(path, embedder_id="e", dim=64)
        got = ix.count()
        assert got >= base + acked, f"trial {trial}: {acked} acknowledged, {got - base} present"
        assert got <= base + acked + 10  # at most the one batch in flight
        ix.close()
        base = got
