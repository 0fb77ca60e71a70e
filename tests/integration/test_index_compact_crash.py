"""A compaction of a derived index killed with SIGKILL at any step leaves the old index or the new one, whole.

A child process (``tests/index_compaction_child.py``) compacts a churned index (the half-precision vector log, or
tantivy rebuilt from the store's rows) and kills itself once the fresh directory is written but not swapped in,
between the swap's two renames, or after the compaction returned. Then the index is opened as the store opens it:
it holds every live row under its mark, answers every query with the same ids and scores as before the
compaction, no stray directory is left beside it, and its files are the old ones when the kill came before the
swap and the compacted ones after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests import index_compaction_child as child

from graphrecall.index import ExactVectorIndex, TantivyLexicalIndex

REPO = Path(__file__).resolve().parents[2]


def _run_child(directory: Path, kind: str, step: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.index_compaction_child", str(directory), kind, step],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return proc.stdout


def _size(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def _no_strays(d: Path) -> None:
    assert sorted(p.name for p in d.parent.iterdir()) == [d.name]


@pytest.mark.parametrize(("step", "swapped"), [("written", False), ("aside", False), ("none", True)])
def test_a_vector_compaction_killed_leaves_the_old_or_the_new_index_whole(
    tmp_path: Path, step: str, swapped: bool
) -> None:
    rng = np.random.default_rng(3)
    d = tmp_path / "idx" / "vec-round_user"
    idx = ExactVectorIndex.rebuild_from(d, [], embedder_id="e", dim=child.DIM, half=True, mark="0")
    for c in range(30):
        ids = [f"c{c}r{j}" for j in range(10)]
        vecs = rng.standard_normal((10, child.DIM)).astype(np.float32)
        idx.add(ids, vecs / np.linalg.norm(vecs, axis=1, keepdims=True), mark=str(c))
        idx.delete(ids[2:], mark=str(c))
    queries = rng.standard_normal((10, child.DIM)).astype(np.float32)
    want = [idx.search(q, 100) for q in queries]
    old_bytes = _size(d)

    out = _run_child(d, "vector", step)

    assert ("done" in out) == swapped
    again = ExactVectorIndex(d, embedder_id="e", dim=child.DIM, half=True)  # settles what the kill left
    assert again.count() == 60 and again.mark == "29"
    assert [again.search(q, 100) for q in queries] == want
    assert again.dead_fraction() == (0.0 if swapped else pytest.approx(0.8))
    assert (_size(d) < old_bytes / 3) if swapped else (_size(d) == old_bytes)
    _no_strays(d)


@pytest.mark.parametrize(("step", "swapped"), [("written", False), ("aside", False), ("none", True)])
def test_a_lexical_compaction_killed_leaves_the_old_or_the_new_index_whole(
    tmp_path: Path, step: str, swapped: bool
) -> None:
    d = tmp_path / "idx" / "lex-round_terms"
    idx = TantivyLexicalIndex.rebuild_from(d, child.rows(live=False), mark="7")
    idx.delete(
        [rid for rid, *_ in child.rows(live=False) if rid not in {r[0] for r in child.rows()}], mark="8"
    )
    idx.close()
    want = {q: sorted(i for i, _ in idx.search(q.split(), 500)) for q in ("word3", "topic1 common")}

    out = _run_child(d, "lexical", step)

    assert ("done" in out) == swapped
    again = TantivyLexicalIndex(d)
    assert again.count() == 40 and again.mark == "8"
    assert {q: sorted(i for i, _ in again.search(q.split(), 500)) for q in want} == want
    assert (again.dead_fraction() == 0.0) == swapped
    _no_strays(d)
