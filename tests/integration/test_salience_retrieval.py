"""Salience as a weak prior in fact search: off by default; a non-zero ``salience_weight`` lifts the fact said
more often and more lately above an otherwise equal one; round hits are untouched; decay deletes nothing."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from graphrecall import Memory, RetrievalConfig, testing
from graphrecall.embed import HashingEmbedder

SCOPE = ("acme", "sal")
QUERY = "green tea"


def build(root: Path) -> None:
    """Two facts that match the query about equally."""
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        m.add_session(SCOPE, [{"role": "user", "content": "hello"}], session_id="s1", date="2024-01-01")
        m.add_fact(SCOPE, "The user likes green tea.", kind="preference", source="s1")
        m.add_fact(SCOPE, "The user drinks green tea.", kind="preference", source="s1")


def make_salient(root: Path, strong: str, weak: str) -> None:
    """``strong``: seen nine times, last a week before the question; ``weak``: once, two years before."""
    with (
        Memory.open(root, embedder=HashingEmbedder(64)) as m,
        testing.database(m, SCOPE) as db,
        db.write() as txn,
    ):
        for fid, count, seen in ((strong, 9, datetime(2025, 5, 25)), (weak, 1, datetime(2023, 1, 1))):
            txn.execute(
                "MATCH (f:Fact {key: $k}) SET f.reinforcement = $n, f.last_seen = $t, f.recorded_at = $r",
                {"k": db.key(fid), "n": count, "t": seen, "r": datetime(2023, 1, 1)},
            )


def fact_order(root: Path, weight: float) -> list[tuple[str, dict[str, float]]]:
    cfg = RetrievalConfig(salience_weight=weight)
    with Memory.open(root, embedder=HashingEmbedder(64), retrieval=cfg) as m:
        hits = m.search(SCOPE, QUERY, k=5, kinds=("fact",), question_date="2025-06-01")
        return [(h.id, h.signals) for h in hits]


def test_a_salience_weight_reorders_otherwise_equal_facts(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build(root)
    first, second = (fid for fid, _ in fact_order(root, 0.0))
    make_salient(root, strong=second, weak=first)  # the fact ranked second is the salient one

    off = fact_order(root, 0.0)
    on = fact_order(root, 1.0)

    assert [fid for fid, _ in off] == [first, second]  # weight 0: salience changes nothing
    assert all("salience" not in sig for _, sig in off)  # nor is it computed
    assert [fid for fid, _ in on] == [second, first]
    sal = {fid: sig["salience"] for fid, sig in on}
    assert sal[second] > 0.7 > 0.01 > sal[first] > 0.0


def test_decay_never_deletes_and_leaves_round_search_alone(tmp_path: Path) -> None:
    root = tmp_path / "s"
    build(root)
    cfg = RetrievalConfig(salience_weight=5.0)
    with Memory.open(root, embedder=HashingEmbedder(64), retrieval=cfg) as m:
        assert len(m.facts(SCOPE)) == 2
        rounds = m.search(SCOPE, "hello", k=3, question_date="2030-01-01")
        assert rounds and all("salience" not in h.signals for h in rounds)
        far = m.search(SCOPE, QUERY, k=5, kinds=("fact",), question_date="2040-01-01")
        assert len(far) == 2  # decayed to almost nothing, still found
