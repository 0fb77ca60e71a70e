"""Bulk writes (COPY) and small writes (UNWIND / one CREATE per FTS row) must leave identical, fully indexed data:
every round is findable by a term only it contains, through BM25 and through its own vector."""

from __future__ import annotations

from pathlib import Path

import pytest

import graphrecall.store.database as database
from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.store import rounds as q
from graphrecall.store.text import query_terms

WORDS = ["zebra", "quartz", "violin", "harbor", "saffron", "glacier", "lantern", "orchid", "falcon", "meadow"]


def _ingest(root: Path, copy_min_rows: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    monkeypatch.setattr(database, "COPY_MIN_ROWS", copy_min_rows)
    scope = Scope(org_id="acme", user_id="ana")
    sessions = [
        {
            "session_id": f"s{i}",
            "date": "2024-01-01",
            "messages": [
                {"role": "user", "content": f"I keep thinking about the {w} I saw, code {1000 + i}"},
                {"role": "assistant", "content": "Tell me more."},
                {"role": "user", "content": "Also the usual groceries."},
                {"role": "assistant", "content": "Noted."},
            ],
        }
        for i, w in enumerate(WORDS)
    ]
    found: dict[str, list[str]] = {}
    with Memory(root, embedder=HashingEmbedder(64)) as m:
        m.add_sessions(scope, sessions)
        with m.pool.acquire(scope) as db:
            for i, w in enumerate(WORDS):
                found[w] = [rid for rid, _ in q.fts_search(db, "Round", "round_fts", query_terms(w), 3)]
                found[str(1000 + i)] = [
                    rid for rid, _ in q.fts_search(db, "Round", "round_fts", query_terms(str(1000 + i)), 3)
                ]
    return found


@pytest.mark.parametrize("copy_min_rows", [0, 10_000], ids=["copy", "unwind"])
def test_every_round_is_found_by_its_own_term(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy_min_rows: int
) -> None:
    found = _ingest(tmp_path, copy_min_rows, monkeypatch)
    for i, w in enumerate(WORDS):
        assert found[w][:1] == [f"s{i}@0"], (w, found[w])
        assert found[str(1000 + i)][:1] == [f"s{i}@0"], (1000 + i, found[str(1000 + i)])


def test_both_write_paths_index_the_same_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ingest(tmp_path / "a", 0, monkeypatch) == _ingest(tmp_path / "b", 10_000, monkeypatch)
