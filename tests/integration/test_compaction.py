"""Compaction of a bucket (``store.compact``, ``DatabasePool.compact``): the rewrite holds exactly what the bucket
held, in a smaller file; every user reads the same; the users' derived indexes are not touched; the bucket writes
on; requests for its users wait while it is rewritten; a request that holds the bucket makes compaction give up.
The store is ``tests/compaction_store.py``'s: several users in one bucket, churned."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import compaction_store as cs

from graphrecall import Scope, testing
from graphrecall.errors import StoreBusy
from graphrecall.store import compact, compact_swap, freespace, schema
from graphrecall.store.database import BucketDatabase


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compaction") / "store"
    cs.build(root)
    return root


@pytest.fixture
def root(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(template, copy)
    return copy


@pytest.fixture
def measured(root: Path) -> Iterator[freespace.FreeSpace]:
    bucket = BucketDatabase(cs.bucket_path(root), embedder_id=f"hashing-{cs.DIM}", dim=cs.DIM)
    try:
        yield freespace.measure(bucket)
    finally:
        bucket.close()


def test_a_compacted_bucket_holds_every_row_and_edge_in_a_smaller_file(root: Path) -> None:
    rows, indexes = cs.dump(root), cs.index_files(root)
    path = cs.bucket_path(root)
    with cs.open_memory(root) as m:
        before = cs.reads(m)
        done = testing.pool(m).compact(path)
        assert cs.reads(m) == before  # views reopened on the new file
    assert done.bytes_after == path.stat().st_size < done.bytes_before / 3  # measured: 78 MB -> 14 MB
    assert done.rows == sum(len(rows[t]) for t in ("Scope", "Session", "Message", "Round", "Passage", "Fact",
                                                    "Event", "Entity"))  # fmt: skip
    assert cs.dump(root) == rows  # every column of every row and edge, keys and prefixes included
    assert not compact_swap.work_dir(path).exists()
    with cs.open_memory(root) as m:
        assert cs.reads(m) == before  # a fresh process
    assert cs.index_files(root) == indexes  # same ids and marks: no index was rebuilt or touched


def test_a_rewrite_copied_in_many_pages_holds_the_same_rows(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page is a whole node group (2^17 rows), so this store's tables go in one ``COPY`` each; pages of a few rows
    take the path a bucket of many node groups takes: the windows over internal offsets cover every row once."""
    monkeypatch.setattr(compact, "PAGE", 7)
    monkeypatch.setattr(compact, "EDGE_PAGE", 5)
    rows = cs.dump(root)
    with cs.open_memory(root) as m:
        before = cs.reads(m)
        testing.pool(m).compact(cs.bucket_path(root))
        assert cs.reads(m) == before
    assert cs.dump(root) == rows


def test_the_free_space_measured_is_what_a_rewrite_gives_back_at_least(
    root: Path, measured: freespace.FreeSpace
) -> None:
    assert measured.file_bytes == cs.bucket_path(root).stat().st_size
    assert measured.free_fraction > 0.5  # churned: most of the file is free
    with cs.open_memory(root) as m:
        done = testing.pool(m).compact(cs.bucket_path(root))
    assert measured.free_bytes <= done.bytes_before - done.bytes_after  # a lower bound
    assert measured.free_bytes >= 0.6 * (done.bytes_before - done.bytes_after)  # and most of it (73% here)
    after = BucketDatabase(cs.bucket_path(root), embedder_id=f"hashing-{cs.DIM}", dim=cs.DIM)
    try:
        assert freespace.measure(after).free_fraction < 0.05  # so maintenance does not rewrite it again
    finally:
        after.close()


def test_after_a_rewrite_the_growth_since_it_is_measured_too(root: Path) -> None:
    path = cs.bucket_path(root)
    with cs.open_memory(root) as m:
        pool = testing.pool(m)
        pool.compact(path)
        for i in range(3):  # churn by small writes: sessions added, then erased
            m.add_sessions(cs.DAN, cs.sessions(cs.DAN, 5, start=100 + 10 * i))
            m.erase(cs.DAN, session_ids=[f"s{100 + 10 * i + j}" for j in range(5)])
        found = pool.free_space(cs.DAN)
        assert found is not None
        seen = found[1]
        assert seen.since_rewrite_bytes is not None
        assert seen.since_rewrite_bytes > seen.free_pages_bytes + seen.dead_rows_bytes + seen.header_bytes
        done = pool.compact(path)
    given_back = done.bytes_before - done.bytes_after
    assert abs(seen.free_bytes - given_back) < 0.1 * given_back  # what the rewrite gave back (exactly, here)
    shutil.copy(path, root / "copy.kuzu")
    (root / "copy.kuzu").replace(path)  # another file in its place (a restored copy): the record is not its
    bucket = BucketDatabase(path, embedder_id=f"hashing-{cs.DIM}", dim=cs.DIM)
    try:
        assert freespace.measure(bucket).since_rewrite_bytes is None
    finally:
        bucket.close()


def test_the_bucket_writes_on_after_compaction_and_hands_out_no_prefix_twice(root: Path) -> None:
    def prefixes() -> dict[str, str]:
        rows = [[json.loads(v) for v in row] for row in cs.dump(root)["Scope"]]
        at = schema.scope_columns().index("next_prefix")
        return {r[0]: r[1] if r[0] != ".bucket" else f"next {r[at]}" for r in rows}

    before = prefixes()
    fay = Scope(org_id=cs.ORG, user_id="fay")
    with cs.open_memory(root) as m:
        testing.pool(m).compact(cs.bucket_path(root))
        m.add_sessions(fay, cs.sessions(fay, 3))
        m.add_fact(cs.ANN, "The user likes compaction.")
        m.erase(cs.BOB, session_ids=["s1"])
        m.flush()
        assert any(f.text == "The user likes compaction." for f in m.facts(cs.ANN))
        assert {h.session_id for h in m.search(fay, "bakery rye", k=5)} == {"s0", "s1", "s2"}
        assert len(m.sessions(cs.BOB)) == 39
    after = prefixes()
    assert before[".bucket"] == "next 4"  # ann, bob, dan and eve (erased whole) had 0: to 3:
    assert after == {**before, "fay": "4:", ".bucket": "next 5"}


def test_requests_for_the_bucket_wait_while_it_is_compacted(root: Path) -> None:
    with cs.open_memory(root) as m:
        expected = [h.id for h in m.search(cs.ANN, "bakery rye", k=5)]
        pool = testing.pool(m)
        copying, go_on = threading.Event(), threading.Event()

        def pause(step: str) -> None:
            if step == "page" and not copying.is_set():
                copying.set()
                assert go_on.wait(30)

        compaction = threading.Thread(
            target=pool.compact, args=(cs.bucket_path(root),), kwargs={"on_step": pause}
        )
        compaction.start()
        assert copying.wait(30)
        found: list[list[str]] = []
        search = threading.Thread(
            target=lambda: found.append([h.id for h in m.search(cs.ANN, "bakery rye", k=5)])
        )
        search.start()
        time.sleep(0.5)
        assert search.is_alive() and not found  # held back while the rows are copied
        go_on.set()
        compaction.join(60)
        search.join(60)
        assert found == [expected]


def test_a_compaction_that_starts_while_a_request_opens_the_bucket_takes_that_bucket_out(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request's open finishes first and the compaction takes the bucket it opened out of the pool: a file is
    never open twice at once in one process (each open would believe it owns the file)."""
    path = cs.bucket_path(root)
    with cs.open_memory(root) as m:
        pool = testing.pool(m)
        buckets: list[BucketDatabase] = []
        already_open: list[int] = []  # at each open: the file's buckets open or being opened
        opening, go_on = threading.Event(), threading.Event()
        real = pool._open_bucket

        def slow(where: Path, manifest: object) -> BucketDatabase:
            already_open.append(sum(not b.closed for b in buckets) + len(already_open) - len(buckets))
            if len(already_open) == 1:
                opening.set()
                assert go_on.wait(30)
            bucket = real(where, manifest)  # type: ignore[arg-type]
            buckets.append(bucket)
            return bucket

        monkeypatch.setattr(pool, "_open_bucket", slow)
        found: list[list[str]] = []
        search = threading.Thread(
            target=lambda: found.append([h.id for h in m.search(cs.ANN, "bakery", k=3)])
        )
        search.start()
        assert opening.wait(30)
        done: list[compact.Compacted] = []
        compaction = threading.Thread(target=lambda: done.append(pool.compact(path)))
        compaction.start()
        time.sleep(0.3)
        go_on.set()
        search.join(60)
        compaction.join(60)
        assert done and found and set(already_open) == {0}, already_open
        assert [h.id for h in m.search(cs.ANN, "bakery", k=3)] == found[0]


def test_a_request_that_holds_the_bucket_makes_compaction_give_up(root: Path) -> None:
    path = cs.bucket_path(root)
    size = path.stat().st_size
    with cs.open_memory(root) as m:
        pool = testing.pool(m)
        with pool.acquire(cs.ANN), pytest.raises(StoreBusy, match="still in use"):
            pool.compact(path, wait_seconds=0.2)
        assert path.stat().st_size == size and not compact_swap.work_dir(path).exists()
        assert [h.id for h in m.search(cs.BOB, "bakery", k=1)]  # the bucket serves as before
        assert pool.compact(path).bytes_after < size  # once it is let go


def test_a_column_the_rewrite_does_not_know_stops_it_before_anything_is_lost(root: Path) -> None:
    path = cs.bucket_path(root)
    bucket = BucketDatabase(path, embedder_id=f"hashing-{cs.DIM}", dim=cs.DIM)
    try:
        bucket.writer.execute("ALTER TABLE Fact ADD surprise STRING DEFAULT 'kept'")
        bucket.checkpoint()
    finally:
        bucket.close()
    rows, size = cs.dump(root), path.stat().st_size
    with cs.open_memory(root) as m, pytest.raises(RuntimeError, match="a rewrite copies"):
        testing.pool(m).compact(path)
    assert path.stat().st_size == size and not compact_swap.work_dir(path).exists()
    assert cs.dump(root) == rows
