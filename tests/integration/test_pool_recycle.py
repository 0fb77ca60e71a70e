"""A bucket that has committed ``recycle_after_commits`` writes since it was opened is closed once nobody uses it and
opened afresh by the next request, with everything in it: Kuzu keeps memory for what a database wrote until it is
closed (``store/pool.py``, ``RECYCLE_AFTER_COMMITS``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.store.pool import DatabasePool
from graphrecall.testing import database, pool

SCOPE = Scope(org_id="acme", user_id="alice")


def _memory(root: Path, after: int) -> Memory:
    mem = Memory.open(root, embedder=HashingEmbedder(32))
    pool(mem).recycle_after_commits = after
    return mem


def test_an_idle_bucket_that_wrote_enough_is_reopened_with_everything_it_held(tmp_path: Path) -> None:
    with _memory(tmp_path, after=1_000) as mem:
        for text in ("The user's plan is Pro.", "The user lives in Porto.", "The user's sister is Ana."):
            mem.add_fact(SCOPE, text)  # durable writes: commits of their own
        with database(mem, SCOPE) as db:
            first = db.bucket
        assert first.commits >= 3 and not first.closed
        pool(mem).recycle_after_commits = first.commits + 1
        with database(mem, SCOPE) as db:
            assert db.bucket is first
        assert not first.closed  # one commit short of the bound
        pool(mem).recycle_after_commits = first.commits
        with database(mem, SCOPE) as db:
            assert db.bucket is first  # at the bound, but in use
        assert first.closed  # closed once let go
        with database(mem, SCOPE) as db:
            assert db.bucket is not first and not db.bucket.closed and db.bucket.commits == 0
        assert sorted(f.text for f in mem.facts(SCOPE)) == [
            "The user lives in Porto.",
            "The user's plan is Pro.",
            "The user's sister is Ana.",
        ]
        hits = mem.search(SCOPE, "where does the user live", kinds=("fact",), k=1)
        assert [h.text for h in hits] == ["The user lives in Porto."]


def test_a_bucket_in_use_is_not_closed_under_its_request(tmp_path: Path) -> None:
    with _memory(tmp_path, after=1) as mem:
        mem.add_fact(SCOPE, "The user's plan is Pro.")
        with database(mem, SCOPE) as held:
            mem.add_fact(SCOPE, "The user lives in Porto.")  # commits while a request holds the bucket
            assert not held.bucket.closed and not held.closed
            assert len(mem.facts(SCOPE)) == 2
        assert held.bucket.closed  # closed once that request let go
        assert len(mem.facts(SCOPE)) == 2


def test_recycling_needs_at_least_one_commit(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="recycle_after_commits"):
        DatabasePool(tmp_path, embedder_id="hashing-32", dim=32, recycle_after_commits=0)
