"""Writes leave fully indexed data, whatever the batch size: every round is findable by a term only it contains.
(Kuzu 0.11.3's multi-row ``UNWIND ... CREATE`` dropped full-text entries; this pins that we do not write that way.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrecall import Memory, Scope, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.store import rounds as q
from graphrecall.text import query_terms

WORDS = ["zebra", "quartz", "violin", "harbor", "saffron", "glacier", "lantern", "orchid", "falcon", "meadow"]


def _ingest(root: Path, batch_sessions: int) -> dict[str, list[str]]:
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
        m.add_sessions(scope, sessions, batch_sessions=batch_sessions)
        m.flush()  # small batches went through the write log: look at what reached Kuzu
        with testing.database(m, scope) as db:
            for i, w in enumerate(WORDS):
                found[w] = [rid for rid, _ in q.lexical_search(db, "round_terms", query_terms(w), 3)]
                found[str(1000 + i)] = [
                    rid for rid, _ in q.lexical_search(db, "round_terms", query_terms(str(1000 + i)), 3)
                ]
    return found


@pytest.mark.parametrize("batch_sessions", [1, 64], ids=["one-session-per-write", "one-write"])
def test_every_round_is_found_by_its_own_term(tmp_path: Path, batch_sessions: int) -> None:
    found = _ingest(tmp_path, batch_sessions)
    for i, w in enumerate(WORDS):
        assert found[w][:1] == [f"s{i}@0"], (w, found[w])
        assert found[str(1000 + i)][:1] == [f"s{i}@0"], (1000 + i, found[str(1000 + i)])


def test_batch_size_does_not_change_what_is_found(tmp_path: Path) -> None:
    assert _ingest(tmp_path / "a", 1) == _ingest(tmp_path / "b", 64)
