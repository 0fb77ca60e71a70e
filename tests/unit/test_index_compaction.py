"""Compaction of the derived indexes: a churned index is rewritten to its live rows and answers exactly as before.

The vector index's file keeps every row ever appended (deleted and replaced ones too) and tantivy keeps deleted
documents until it merges; ``compact`` rewrites them into a fresh directory swapped in whole. What is specified:
the files shrink to the live rows, every search returns the same ids and scores before and after (and after a
reopen), later writes go on as usual, searches running during a compaction always see a complete index, and
``ScopeIndexes.compact`` rewrites only the indexes past the bound. A kill -9 in the middle is
``tests/integration/test_index_compact_crash.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from graphrecall.index import ExactVectorIndex, ScopeIndexes, TantivyLexicalIndex, TieredVectorIndex
from graphrecall.index.lexical import Row
from graphrecall.index.vector import F32, GRAPH_META, HALF_VECTORS, LOG, VECTORS

DIM = 16


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> F32:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    out: F32 = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def _churn(
    idx: ExactVectorIndex | TieredVectorIndex, rng: np.random.Generator, cycles: int, n: int
) -> set[str]:
    """``cycles`` of: add ``n`` rows, replace a few of them, delete most; the ids left live."""
    live: set[str] = set()
    for c in range(cycles):
        ids = [f"c{c}r{j}" for j in range(n)]
        idx.add(ids, _unit(rng, n), mark=f"m{c}")
        idx.add(ids[:2], _unit(rng, 2), mark=f"m{c}")  # replaced: their first rows go dark
        idx.delete(ids[3:], mark=f"m{c}")
        live |= set(ids[:3])
    return live


def _answers(
    idx: ExactVectorIndex | TieredVectorIndex, queries: F32, k: int
) -> list[list[tuple[str, float]]]:
    return [idx.search(q, k) for q in queries]


@pytest.mark.parametrize("half", [False, True])
def test_a_churned_index_shrinks_to_its_live_rows_and_answers_the_same(tmp_path: Path, half: bool) -> None:
    rng = np.random.default_rng(7)
    d = tmp_path / "v"
    idx = ExactVectorIndex.rebuild_from(d, [], embedder_id="e", dim=DIM, half=half)
    live = _churn(idx, rng, cycles=40, n=10)
    queries = _unit(rng, 25)
    before = _answers(idx, queries, 50)
    vectors = idx.vectors(sorted(live))
    assert idx.dead_fraction() == pytest.approx(1 - len(live) / (40 * 12))

    assert idx.compact()

    name, itemsize = (HALF_VECTORS, 2) if half else (VECTORS, 4)
    assert (d / name).stat().st_size == len(live) * DIM * itemsize
    assert sorted((d / LOG).read_text().split()) == sorted(f"+{rid}" for rid in live)
    assert idx.dead_fraction() == 0.0 and idx.count() == len(live) and idx.mark == "m39"
    assert _answers(idx, queries, 50) == before  # ids and scores, exactly
    got = idx.vectors(sorted(live))
    assert got.keys() == vectors.keys() and all(np.array_equal(got[r], vectors[r]) for r in live)
    reopened = ExactVectorIndex(d, embedder_id="e", dim=DIM, half=half)
    assert _answers(reopened, queries, 50) == before and reopened.mark == "m39"
    assert not d.with_name("v.compact").exists() and not d.with_name("v.old").exists()
    assert not idx.compact()  # nothing dead: nothing to rewrite


def test_writes_after_a_compaction_are_durable_and_replace_by_id(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    d = tmp_path / "v"
    idx = ExactVectorIndex.rebuild_from(d, [], embedder_id="e", dim=DIM)
    live = _churn(idx, rng, cycles=5, n=10)
    idx.compact()
    kept = sorted(live)[0]
    new = _unit(rng, 2)
    idx.add([kept, "fresh"], new, mark="after")
    idx.delete([sorted(live)[1]], mark="after")
    reopened = ExactVectorIndex(d, embedder_id="e", dim=DIM)
    assert reopened.count() == len(live) and reopened.mark == "after"
    assert reopened.search(new[0], 1)[0][0] == kept and reopened.search(new[1], 1)[0][0] == "fresh"
    assert reopened.dead_fraction() == pytest.approx(2 / (len(live) + 2))


def test_a_tiered_index_builds_its_graph_again_over_the_compacted_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    d = tmp_path / "v"
    ExactVectorIndex.rebuild_from(d, [], embedder_id="e", dim=DIM)
    idx = TieredVectorIndex(d, embedder_id="e", dim=DIM, threshold=100, persist_every=50)
    live = _churn(idx, rng, cycles=60, n=10)  # 180 live of 720 rows
    assert idx.uses_graph
    queries = _unit(rng, 10)

    assert idx.compact()

    assert idx.uses_graph and json_rows(d) == len(live)
    exact = ExactVectorIndex(d, embedder_id="e", dim=DIM)
    for q in queries:  # the graph picks among the compacted rows; the log scores them
        got, want = idx.search(q, 5), exact.search(q, 5)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    idx.close()
    again = TieredVectorIndex(d, embedder_id="e", dim=DIM, threshold=100)
    assert again.uses_graph and [i for i, _ in again.search(queries[0], 5)] == [
        i for i, _ in exact.search(queries[0], 5)
    ]


def json_rows(d: Path) -> int:
    import json

    meta = json.loads((d / GRAPH_META).read_text())
    assert (d / meta["files"]["graph"]).exists()
    return int(meta["rows"])


def test_searches_during_compactions_always_see_a_complete_index(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    d = tmp_path / "v"
    idx = ExactVectorIndex.rebuild_from(d, [], embedder_id="e", dim=DIM)
    _churn(idx, rng, cycles=20, n=10)
    queries = _unit(rng, 8)
    want = _answers(idx, queries, 20)
    wrong: list[object] = []
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            for q, w in zip(queries, want, strict=True):
                got = [hit for hit in idx.search(q, 20) if not hit[0].startswith("x")]  # x: live a moment
                if got != w[: len(got)] or len(got) < 19:
                    wrong.append(got)

    readers = [threading.Thread(target=search) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for i in range(30):  # churn a row, then compact
            idx.add([f"x{i}"], -np.ones((1, DIM), dtype=np.float32) / np.sqrt(DIM))
            idx.delete([f"x{i}"])
            assert idx.compact()
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert not wrong


def _lex_rows(live: Iterable[int]) -> list[Row]:
    return [(f"d{i}", f"word{i % 7} topic{i % 3} common") for i in live]


def test_a_churned_lexical_index_is_rebuilt_from_the_store_rows_and_finds_the_same(tmp_path: Path) -> None:
    d = tmp_path / "lex"
    idx = TantivyLexicalIndex.rebuild_from(d, [], mark="0")
    for c in range(30):
        idx.add(_lex_rows(range(c * 20, c * 20 + 20)), mark=str(c))
        idx.delete([f"d{i}" for i in range(c * 20 + 2, c * 20 + 20)], mark=str(c))
    live = [i for c in range(30) for i in range(c * 20, c * 20 + 2)]
    assert idx.count() == len(live)
    dead = idx.dead_fraction()
    assert dead > 0.0  # tantivy merges some segments on its own (dropping their deleted documents), not all
    before_bytes = _size(d)
    before = {q: idx.search(q.split(), 100) for q in ("word3", "topic1 word2", "common")}

    idx.compact(_lex_rows(live), mark="29")

    assert idx.dead_fraction() == 0.0 and idx.count() == len(live) and idx.mark == "29"
    assert _size(d) < before_bytes
    for q, hits in before.items():  # BM25's statistics counted the deleted documents: same hits, new scores
        assert sorted(i for i, _ in idx.search(q.split(), 100)) == sorted(i for i, _ in hits)
    idx.add(_lex_rows([9999]), mark="30")
    reopened = TantivyLexicalIndex(d)
    assert reopened.count() == len(live) + 1 and reopened.mark == "30"


def _size(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


class _Source:
    def __init__(self, lexical: list[Row]) -> None:
        self.rows = lexical

    def lexical_rows(self, name: str) -> Iterable[Row]:
        return self.rows

    def vector_rows(self, name: str) -> Iterable[tuple[str, F32]]:
        return []

    def mark(self, name: str) -> str | None:
        return "1"


def test_a_scope_compacts_only_the_indexes_past_the_bound(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    db = tmp_path / "u.kuzu"
    source = _Source([])
    ix = ScopeIndexes.open(
        db, embedder_id="e", dim=DIM, source=source, lexical=["lex"], vector=["churned", "calm"], fresh=True
    )
    churned, calm = ix.vector["churned"], ix.vector["calm"]
    churned.add([f"a{i}" for i in range(400)], _unit(rng, 400), mark="1")
    churned.delete([f"a{i}" for i in range(200)], mark="1")  # half dead: 12.8 KB of f32 rows at 16-d
    calm.add([f"b{i}" for i in range(400)], _unit(rng, 400), mark="1")
    calm.delete([f"b{i}" for i in range(100)], mark="1")  # a quarter dead: under the bound
    ix.lexical["lex"].add([], mark="1")

    spaces = {s.name: s for s in ix.compact(source, 0.3, dry_run=True)}
    assert spaces["churned"].dead_fraction == pytest.approx(0.5) and spaces["churned"].bytes_after is None

    import graphrecall.index.scope as scope_mod

    scope_mod.MIN_DEAD_BYTES, saved = 1024, scope_mod.MIN_DEAD_BYTES
    try:
        spaces = {s.name: s for s in ix.compact(source, 0.3)}
    finally:
        scope_mod.MIN_DEAD_BYTES = saved
    assert (
        spaces["churned"].bytes_after is not None and spaces["churned"].bytes_after < spaces["churned"].bytes
    )
    assert spaces["calm"].bytes_after is None and spaces["lex"].bytes_after is None
    assert churned.dead_fraction() == 0.0 and calm.dead_fraction() == pytest.approx(0.25)
    ix.close()
    again = ScopeIndexes.open(
        db, embedder_id="e", dim=DIM, source=source, lexical=["lex"], vector=["churned", "calm"]
    )
    assert again.rebuilt == [] and again.vector["churned"].count() == 200
