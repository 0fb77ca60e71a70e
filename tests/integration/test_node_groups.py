"""A node table whose rows end one past a multiple of 2,048 (2,049 rows, 4,097...) is misread by Kuzu 0.11.3 in every
``IN`` filter once checkpointed: the store pads such a table in the transaction that made it (``store.nodegroups``)
and mends a database left so by an earlier version when it opens it. Found by ``benchmarks/perf/buckets.py``: the
bucket's 2,049th fact could not be read back by the ``add_fact`` that wrote it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kuzu
import pytest
from benchmarks.perf import entities as bench

from graphrecall import Memory, Scope, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.store import nodegroups


def _rows(conn: kuzu.Connection, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    result = conn.execute(cypher, params or {})
    assert not isinstance(result, list)
    out = []
    while result.has_next():
        out.append(result.get_next())
    return out


def _table_of(conn: kuzu.Connection, n: int) -> None:
    _rows(conn, "CREATE NODE TABLE T(key STRING PRIMARY KEY, id STRING)")
    for start in range(0, n, 500):
        rows = [{"k": f"k{i}", "i": f"v{i}"} for i in range(start, min(n, start + 500))]
        _rows(conn, "UNWIND $rows AS r CREATE (:T {key: r.k, id: r.i})", {"rows": rows})


def _run(conn: kuzu.Connection) -> nodegroups.Run:
    return lambda q, p: _rows(conn, q, p)


@pytest.mark.parametrize("padded", [False, True])
def test_kuzu_misreads_a_lone_row_in_the_last_node_group_unless_padded(tmp_path: Path, padded: bool) -> None:
    """The defect itself, with Kuzu alone (when a Kuzu upgrade fixes it, the unpadded case fails: the rule can go)."""
    db = kuzu.Database(str(tmp_path / "db"))
    conn = kuzu.Connection(db)
    _table_of(conn, nodegroups.BATCH_ROWS + 1)
    if padded:
        _rows(conn, "BEGIN TRANSACTION")
        assert nodegroups.pad(_run(conn), ["T"]) == {"T": nodegroups.BATCH_ROWS}
        _rows(conn, "COMMIT")
    _rows(conn, "CHECKPOINT")
    last = f"v{nodegroups.BATCH_ROWS}"
    got = _rows(conn, "MATCH (t:T) WHERE t.id IN $ids RETURN t.id", {"ids": [last]})
    assert got == ([[last]] if padded else [[f"v{nodegroups.BATCH_ROWS - 1}"]])
    assert _rows(conn, "MATCH (t:T) RETURN count(*)") == [[nodegroups.BATCH_ROWS + 1]]  # the pad is gone
    assert nodegroups.exposed(_run(conn), ["T"], {"T": nodegroups.BATCH_ROWS} if padded else None) == (
        {} if padded else {"T": nodegroups.BATCH_ROWS}
    )
    conn.close()
    db.close()


def _a_bucket_one_fact_short_of_a_new_node_group(tmp_path: Path) -> tuple[Settings, Scope]:
    """One bucket shared by the measured scope and a neighbour, whose ``Fact`` table holds exactly 2,048 rows."""
    named = bench.synthetic_entities(nodegroups.BATCH_ROWS // 2 - 3)  # two facts per entity
    neighbour = Scope(org_id=bench.SCOPE.org_id, user_id="neighbour")
    settings = Settings(root=tmp_path, buckets_per_org=1)
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem:
        mem.add_sessions(bench.SCOPE, bench.sessions_for(named, 20))
        mem.import_scope(bench.SCOPE, bench.graph_export(mem, named, 20))
        for i in range(6 - mem.stats(bench.SCOPE).facts % 2):  # the neighbour's facts fill it to 2,048
            mem.add_fact(neighbour, f"The neighbour's locker number is {i}.")
        total = mem.stats(bench.SCOPE).facts + mem.stats(neighbour).facts
        assert total == nodegroups.BATCH_ROWS, total
    return settings, neighbour


def test_the_fact_that_opens_a_node_group_reads_back_before_and_after_a_restart(tmp_path: Path) -> None:
    settings, neighbour = _a_bucket_one_fact_short_of_a_new_node_group(tmp_path)
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem:
        added = mem.add_fact(bench.SCOPE, "The user keeps bees on the roof.")  # the bucket's 2,049th fact
        assert added.fact.text == "The user keeps bees on the roof."
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem:
        hits = mem.search(bench.SCOPE, "bees on the roof", 3, kinds=("fact",))
        assert hits[0].id == added.fact.id and hits[0].text == "The user keeps bees on the roof."
        assert all("bees" not in f.text for f in mem.facts(neighbour))


def test_a_bucket_left_exposed_by_an_earlier_version_is_mended_on_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, _ = _a_bucket_one_fact_short_of_a_new_node_group(tmp_path)
    with monkeypatch.context() as m:  # the code before the rule: nothing padded
        m.setattr(nodegroups, "pad", lambda run, tables, padded=None: {})
        m.setattr(nodegroups, "exposed", lambda run, tables, padded=None: {})
        with (
            Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem,
            pytest.raises(KeyError),  # stored, then misread by the read that returns it
        ):
            mem.add_fact(bench.SCOPE, "The user keeps bees on the roof.")
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem:
        hits = mem.search(bench.SCOPE, "bees on the roof", 3, kinds=("fact",))
        assert hits[0].kind == "fact" and hits[0].text == "The user keeps bees on the roof."
