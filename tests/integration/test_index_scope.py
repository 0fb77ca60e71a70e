"""Derived indexes of a real scope: holding what Kuzu holds, ranking like an exact scan, rebuilt on open when
deleted, damaged or stale, and reopened after a kill -9 in the middle of writes with every acknowledged row
present."""

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

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.index import ExactVectorIndex, TantivyLexicalIndex, index_dir
from graphrecall.store import rounds as q
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.text import query_terms

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


def _reopen(store_root: Path) -> Memory:
    return Memory.open(store_root, embedder=HashingEmbedder(64), settings=Settings(root=store_root))


def test_the_derived_indexes_hold_what_kuzu_holds_and_rank_like_an_exact_scan(
    mem: Memory, scope: Scope
) -> None:
    _fill(mem, scope)
    with testing.database(mem, scope, create=False) as db:
        n = q.counts(db)["Round"]
        assert all(db.indexes.count(name) == n for name in ("round_terms", "round_user", "round_reply"))
        hits = q.lexical_search(db, "round_terms", query_terms("What did I say about the trip to Lisbon?"), 5)
        assert {rid.split("@")[0] for rid, _ in hits[:3]} <= {"s1", "s6", "s11"}
        vec = mem.embedder.embed(["Tell me about the trip to Lisbon, part 1."])[0]
        exact = q.exact_vector_search(db, "embedding", vec, 5)
        ours = q.vector_search(db, "round_user", vec, 5)
        assert ours[0][0] == exact[0][0]
        assert [s for _, s in ours] == pytest.approx([s for _, s in exact], abs=1e-5)  # ties may swap ids


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: __import__("shutil").rmtree(d),
        lambda d: (d / "lex-round_terms" / "manifest.json").write_text("nonsense"),
        lambda d: (d / "lex-round_terms" / "data" / "meta.json").write_text("{"),
        lambda d: (d / "vec-round_user" / "log.txt").write_text("junk\n"),
        lambda d: (d / "vec-round_reply" / "vectors.f16").write_bytes(b"\0" * 7),
        lambda d: (d / "vec-round_user" / "manifest.json").write_text(
            (d / "vec-round_user" / "manifest.json").read_text().replace('"mark":"', '"mark":"9')
        ),
    ],
    ids=[
        "dir-deleted",
        "manifest-garbage",
        "tantivy-meta-torn",
        "vector-log-garbage",
        "vectors-truncated",
        "stale-mark",
    ],
)
def test_deleted_damaged_or_stale_indexes_are_rebuilt_on_open_with_one_log_line(
    store_root: Path,
    scope: Scope,
    damage,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    with _reopen(store_root) as mem:
        _fill(mem, scope)
        with testing.database(mem, scope, create=False) as db:
            path, n = db.path, q.counts(db)["Round"]
    damage(index_dir(path))
    with caplog.at_level(logging.WARNING, logger="graphrecall.index"), _reopen(store_root) as mem:
        with testing.database(mem, scope, create=False) as db:
            assert db.indexes.rebuilt
            assert all(db.indexes.count(name) == n for name in ("round_terms", "round_user", "round_reply"))
        assert [h.session_id for h in mem.search(scope, "Lisbon part 6", k=1)] == ["s6"]
    assert len([r for r in caplog.records if "rebuilt" in r.message]) == 1


def test_an_untouched_store_reopens_without_a_rebuild(store_root: Path, scope: Scope) -> None:
    with _reopen(store_root) as mem:
        _fill(mem, scope)
    with _reopen(store_root) as mem, testing.database(mem, scope, create=False) as db:
        assert db.indexes.rebuilt == []


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


def test_rounds_read_from_the_index_equal_kuzus_rows_also_after_a_round_is_replaced(
    mem: Memory, scope: Scope
) -> None:
    _fill(mem, scope, 4)
    # A reply arriving for a stored turn replaces its round (delete + insert), in Kuzu and in the index.
    mem.add_messages(
        scope, [{"role": "assistant", "content": "And one more thing about the cello."}], session_id="s3"
    )
    mem.flush()
    with testing.database(mem, scope, create=False) as db:
        ids = [r[0] for r in db.query(f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN r.id")]
        from_index, from_kuzu = db.indexes.rounds(ids), q.kuzu_rounds(db, ids)
        assert from_index == from_kuzu and len(from_index) == len(ids) == 4
        assert "one more thing" in from_index["s3@0"].text
        assert q.fetch_rounds(db, [*ids, "nope@0"]) == from_kuzu
