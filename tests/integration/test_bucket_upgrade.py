"""A store written with a database per scope (schema 5 and earlier) moves into buckets on open: one log line per
scope, the old file gone, nothing lost, and a move cut short is done again or only finished.

``tests/data/stores/schema5.tar.gz`` was written by the last code before buckets (tests/data/stores/README.md);
``test_upgrade_fixture.py`` checks every row of it (and of the older archives) through the public API.
"""

from __future__ import annotations

import logging
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.index import index_dir
from graphrecall.store import move

ARCHIVE = Path(__file__).resolve().parents[1] / "data" / "stores" / "schema5.tar.gz"
ANA = Scope(org_id="fixture", user_id="ana")


def unpack(dest: Path) -> Path:
    root = dest / "store"
    root.mkdir(parents=True)
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        tar.extractall(root, filter="data")
    return root


def contents(m: Memory, scope: Scope) -> dict[str, Any]:
    doc = m.export_scope(scope).model_dump(mode="json")
    doc.pop("exported_at")
    return doc


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = unpack(tmp_path_factory.mktemp("reference"))
    with Memory.open(root, settings=Settings(root=root)) as m:
        return contents(m, ANA)


def test_a_schema_5_store_moves_into_its_bucket_with_one_log_line(
    tmp_path: Path, expected: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    root = unpack(tmp_path)
    legacy = root / "fixture" / "ana.kuzu"
    marks_before = sorted(p.name for p in index_dir(legacy).iterdir())
    with caplog.at_level(logging.INFO), Memory.open(root, settings=Settings(root=root)) as m:
        assert contents(m, ANA) == expected
        with testing.database(m, ANA) as db:
            assert db.bucket.path.parent.parent.name == ".buckets"
            # The derived indexes beside the old file were kept (same ids, marks), but for the vector indexes, which
            # keep half precision now (store.vectors): those are rebuilt from Kuzu.
            assert sorted(db.indexes.rebuilt) == [
                "event_vec",
                "fact_vec",
                "round_passage",
                "round_reply",
                "round_user",
            ]
    moved = [r for r in caplog.records if r.name == move.__name__]
    assert (
        len(moved) == 1
        and "moved the store" in moved[0].getMessage()
        and str(legacy) in moved[0].getMessage()
    )
    assert "4 sessions, 4 rounds, 4 facts" in moved[0].getMessage()
    assert not legacy.exists() and not list(legacy.parent.glob("ana.kuzu.wal*"))
    assert sorted(p.name for p in index_dir(legacy).iterdir()) == marks_before
    caplog.clear()
    with caplog.at_level(logging.INFO), Memory.open(root, settings=Settings(root=root)) as m:
        assert contents(m, ANA) == expected
    assert not [r for r in caplog.records if r.name == move.__name__]  # moved once


def test_a_move_cut_before_its_commit_is_done_again(
    tmp_path: Path, expected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = unpack(tmp_path)

    def cut(*args: Any, **kw: Any) -> int:
        raise RuntimeError("killed half-way")

    monkeypatch.setattr(move, "copy_rows", cut)
    with Memory.open(root, settings=Settings(root=root)) as m, pytest.raises(RuntimeError, match="half-way"):
        m.stats(ANA)
    assert (root / "fixture" / "ana.kuzu").exists()  # untouched
    monkeypatch.undo()
    with Memory.open(root, settings=Settings(root=root)) as m:
        assert contents(m, ANA) == expected and m.scopes() == [ANA]


def test_a_move_cut_after_its_commit_only_deletes_the_old_file(
    tmp_path: Path, expected: dict[str, Any]
) -> None:
    root = unpack(tmp_path)
    legacy = root / "fixture" / "ana.kuzu"
    shutil.copy(legacy, tmp_path / "copy.kuzu")
    with Memory.open(root, settings=Settings(root=root)) as m:
        assert contents(m, ANA) == expected
    shutil.copy(tmp_path / "copy.kuzu", legacy)  # as if the process died between the commit and the delete
    with Memory.open(root, settings=Settings(root=root)) as m:
        assert contents(m, ANA) == expected  # not twice
        assert m.stats(ANA).sessions == 4
    assert not legacy.exists()


def test_a_move_that_kuzu_tore_is_made_again_before_the_old_file_goes(
    tmp_path: Path, expected: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Killed while its commit was being checkpointed, the move left the bucket with the scope's row and sessions
    but without the messages and rounds a ``COPY`` wrote (tests/torn.py): the old file is not deleted on that
    evidence; the torn copy is dropped and the move made again."""
    from tests.torn import tear

    root = unpack(tmp_path)
    legacy = root / "fixture" / "ana.kuzu"
    shutil.copy(legacy, tmp_path / "copy.kuzu")
    with Memory.open(root, settings=Settings(root=root)) as m:
        embedder_id = m.embedder.id
        assert contents(m, ANA) == expected
    shutil.copy(tmp_path / "copy.kuzu", legacy)  # the process died before the old file went
    assert tear(root, ANA, embedder_id) > 0
    caplog.clear()

    with caplog.at_level(logging.INFO), Memory.open(root, settings=Settings(root=root)) as m:
        assert contents(m, ANA) == expected
    said = [r.getMessage() for r in caplog.records if r.name == move.__name__]
    assert len(said) == 2 and "is not whole" in said[0] and "Message 0/" in said[0], said
    assert "moved the store" in said[1] and not legacy.exists()


def test_every_user_of_an_organisation_moves_and_stays_apart(tmp_path: Path) -> None:
    """Databases per scope of several users (written by this code's ``write_legacy``, schema 5) move into the
    organisation's buckets, each user with its own rows only."""
    from graphrecall.store.legacy import write_legacy
    from graphrecall.store.move import BucketSource

    users = [Scope(org_id="acme", user_id=f"user{i}") for i in range(5)]
    built, root = tmp_path / "built", tmp_path / "store"
    expected = {}
    with Memory.open(
        built, embedder=HashingEmbedder(64), settings=Settings(root=built, resident_rounds=0)
    ) as m:
        for i, u in enumerate(users):
            m.add_session(
                u, [{"role": "user", "content": f"I am user number {i} and I like kiwi{i}"}], session_id="s1"
            )
            m.add_fact(u, f"The user likes kiwi{i}.")
        m.flush()
        for u in users:
            expected[u] = contents(m, u)
            with testing.database(m, u) as db:
                target = root / u.org_id / f"{u.user_id}.kuzu"
                target.parent.mkdir(parents=True, exist_ok=True)
                write_legacy(target, BucketSource(db.bucket, u.user_id), embedder_id=db.bucket.embedder_id, dim=64,
                             marks=db._marks)  # fmt: skip
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        assert m.scopes() == users
        for i, u in enumerate(users):
            got = contents(m, u)
            assert got == expected[u]
            assert m.search(u, f"kiwi{i}", k=1)[0].text.endswith(f"kiwi{i}")
            assert all(f"kiwi{j}" not in str(got) for j in range(5) if j != i)
    assert not list((root / "acme").glob("*.kuzu"))
