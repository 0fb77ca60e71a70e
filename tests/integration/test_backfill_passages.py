"""``Memory.backfill_passages`` gives long user turns stored without passages (before schema 4, or under a higher
``passage_from_chars``) the passages a fresh ingest would store, and nothing else changes.

Real Kuzu and the real bundled model (passages exist only for an embedder with a window)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.dialogues import dialogue_sessions

import graphrecall.services.writing as writing_module
from graphrecall import Memory, NotFound, Scope, Settings, testing
from graphrecall.embed import Embedder, default_embedder
from graphrecall.embed.hashing import HashingEmbedder
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.store.vectors import decode

SCOPE = Scope(org_id="acme", user_id="backfill")
# About 600 characters: below the model's window (~760), above the default passage threshold (300).
MEDIUM = (
    "This week was a lot. On Monday I finally finished the quarterly report for the logistics team, which took "
    "far longer than planned because the warehouse numbers kept changing. On Wednesday my sister came over with "
    "her two kids and we baked cinnamon rolls together, which was chaos but fun. Thursday I had my first lesson "
    "at the pottery studio on Elm Street and made a very lopsided bowl. And on Saturday I ran the riverside 10K "
    "in 52 minutes, my best time so far, although my left knee hurt a bit afterwards."
)
SESSIONS = {
    "week": [MEDIUM, "What a week! Congratulations on the 10K."],
    "garden": ["I planted tomatoes and basil.", "Great combination."],
}


def _passages(m: Memory) -> dict[str, Any]:
    with testing.database(m, SCOPE, create=False) as db:
        rows = db.query(
            f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')}-[:PASSAGE_OF]->(r:Round) RETURN p.id, r.id, p.embedding ORDER BY p.id"
        )
        indexed = db.indexes.count("round_passage")
    return {"rows": {pid: (rid, decode(v)) for pid, rid, v in rows}, "indexed": indexed}


def _open(root: Path, embedder: Embedder, from_chars: int) -> Memory:
    return Memory.open(root, embedder=embedder, settings=Settings(root=root, passage_from_chars=from_chars))


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return default_embedder()  # one model load for the module's stores


def test_rounds_stored_without_passages_get_the_ones_a_fresh_ingest_stores(
    tmp_path: Path, embedder: Embedder
) -> None:
    with _open(tmp_path / "fresh", embedder, 300) as fresh:
        fresh.add_sessions(SCOPE, dialogue_sessions(SESSIONS))
        fresh.flush()
        want = _passages(fresh)
    assert len(want["rows"]) > 1  # the medium turn has passages at 300

    root = tmp_path / "old"
    with _open(root, embedder, 5000) as before:  # as a store written without them
        before.add_sessions(SCOPE, dialogue_sessions(SESSIONS))
        before.flush()
        assert _passages(before) == {"rows": {}, "indexed": 0}
        hits_before = [h.id for h in before.search(SCOPE, "how fast did I run the 10K?", 2)]
    with _open(root, embedder, 300) as after:
        assert after.backfill_passages(SCOPE) == 1
        got = _passages(after)
        assert got["indexed"] == len(got["rows"]) == len(want["rows"])
        for pid, (rid, vec) in want["rows"].items():
            assert got["rows"][pid][0] == rid
            assert np.allclose(got["rows"][pid][1], vec, atol=1e-5)
        assert after.backfill_passages(SCOPE) == 0  # nothing left to do
        assert after.stats(SCOPE).rounds == 2
        assert after.search(SCOPE, "how fast did I run the 10K?", 2)[0].id == hits_before[0]


def test_unflushed_rounds_are_flushed_first_and_get_theirs(tmp_path: Path, embedder: Embedder) -> None:
    root = tmp_path / "tail"
    with _open(root, embedder, 5000) as before:
        before.add_sessions(SCOPE, dialogue_sessions(SESSIONS))  # left in the write log
    with _open(root, embedder, 300) as after:
        assert after.backfill_passages(SCOPE) == 1
        assert len(_passages(after)["rows"]) > 1


def test_an_unknown_scope_is_an_error_and_an_embedder_without_a_window_has_nothing_to_do(
    tmp_path: Path,
) -> None:
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=Settings(root=tmp_path)) as m:
        with pytest.raises(NotFound):
            m.backfill_passages(SCOPE)
        m.add_sessions(SCOPE, dialogue_sessions(SESSIONS))
        assert m.backfill_passages(SCOPE) == 0


def test_a_round_erased_while_its_passages_are_embedded_is_left_alone(
    tmp_path: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "race"
    with _open(root, embedder, 5000) as before:
        before.add_sessions(SCOPE, dialogue_sessions(SESSIONS))
    with _open(root, embedder, 300) as m:
        real = writing_module.passage_vectors

        def erase_meanwhile(*args: Any, **kwargs: Any) -> Any:
            m.erase(SCOPE, session_ids=["week"])  # no lock is held while embedding: a write gets through
            return real(*args, **kwargs)

        monkeypatch.setattr(writing_module, "passage_vectors", erase_meanwhile)
        assert m.backfill_passages(SCOPE) == 0
        assert _passages(m) == {"rows": {}, "indexed": 0}
        assert [s.id for s in m.sessions(SCOPE)] == ["garden"]
