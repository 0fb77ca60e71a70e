"""Maintenance compacts the derived indexes of a churned scope: a scope whose sessions are imported and erased again
and again keeps their vectors and documents in its index files (the vector log only marks erased rows, tantivy
only marks deleted documents); a maintenance pass rewrites each index whose dead share passed
``Settings.compact_free_fraction`` to its live rows, searches answer the same, and the store opens on them after
without a rebuild. A dry run rewrites nothing. Real Kuzu, real files; vectors from the hashing embedder."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from benchmarks.perf.repeat_ops import sessions

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.index import index_dir

SCOPE = Scope(org_id="acme", user_id="ann")
QUERIES = ("bakery rye bread", "dog walk", "Lyon")


def _open(root: Path) -> Memory:
    return Memory.open(
        root, embedder=HashingEmbedder(384), settings=Settings(root=root, buckets_per_org=1, compact_free_fraction=0.3)
    )  # fmt: skip


def _sizes(root: Path) -> dict[str, int]:
    d = _idx(root)
    return {p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in sorted(d.iterdir())}


def _idx(root: Path) -> Path:
    return index_dir(root / SCOPE.org_id / f"{SCOPE.user_id}.kuzu")


def _answers(m: Memory) -> list[list[tuple[str, float]]]:
    return [[(h.id, round(h.score, 6)) for h in m.search(SCOPE, q, k=20)] for q in QUERIES]


@pytest.fixture(scope="module")
def churned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("churn") / "store"
    with _open(root) as m:
        m.add_sessions(SCOPE, [{"session_id": "base", "date": "2023-12-01",
                                "messages": [{"role": "user", "content": "I live in Lyon and walk my dog."}]}])  # fmt: skip
        for i in range(12):
            m.import_sessions(SCOPE, sessions(i, 4))
            m.erase(SCOPE, session_ids=[f"c{i}s{j}" for j in range(4)])
        m.import_sessions(SCOPE, sessions(99, 2))  # stays
    return root


def test_maintenance_rewrites_the_churned_indexes_and_searches_answer_the_same(
    churned: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(churned, root)
    before = _sizes(root)
    with _open(root) as m:
        answers = _answers(m)
        m.maintain(SCOPE, dry_run=True)
        assert _sizes(root) == before
        with caplog.at_level(logging.INFO, logger="graphrecall.services.maintenance"):
            m.maintain(SCOPE)
        after = _sizes(root)
        assert _answers(m) == answers
    compacted = {n for n in before if after[n] < before[n]}
    assert {"vec-round_user", "vec-round_reply"} <= compacted, (before, after)
    assert sum(after.values()) < sum(before.values()) / 2
    assert all(after[n] == before[n] for n in before if n not in compacted)  # the others are left alone
    # (tantivy's own merges had dropped most of the erased rounds' documents: a few KB, under MIN_DEAD_BYTES)
    assert any("compacted the round_user index" in r.getMessage() for r in caplog.records)
    with caplog.at_level(logging.WARNING), _open(root) as m:  # the compacted indexes are trusted as they are
        assert _answers(m) == answers
    assert not [r for r in caplog.records if "rebuilt" in r.getMessage()]


def test_a_lexical_index_is_rebuilt_from_the_store_and_keeps_its_rounds(
    churned: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    import graphrecall.index.scope as scope_mod

    monkeypatch.setattr(scope_mod, "MIN_DEAD_BYTES", 0)  # every index past the bound, however small
    root = tmp_path / "store"
    shutil.copytree(churned, root)
    with _open(root) as m:
        hits = {q: sorted((h.id, h.text) for h in m.search(SCOPE, q, k=20)) for q in QUERIES}
        with caplog.at_level(logging.INFO, logger="graphrecall.services.maintenance"):
            m.maintain(SCOPE)
        assert any("compacted the round_terms index" in r.getMessage() for r in caplog.records)
        # BM25's statistics no longer count the erased rounds: the same rounds found, with their text
        assert {q: sorted((h.id, h.text) for h in m.search(SCOPE, q, k=20)) for q in QUERIES} == hits
    caplog.clear()
    with caplog.at_level(logging.WARNING), _open(root) as m:
        assert {q: sorted((h.id, h.text) for h in m.search(SCOPE, q, k=20)) for q in QUERIES} == hits
    assert not [r for r in caplog.records if "rebuilt" in r.getMessage()]
