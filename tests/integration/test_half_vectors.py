"""Rounds' and passages' vectors in half precision (``store.vectors``): what Kuzu holds is what was written, rounded
once, signs included, through ``COPY`` (bulk) and ``CREATE`` (a turn); the derived index holds the same values and a
rebuild from Kuzu restores them."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from graphrecall.index import index_dir
from graphrecall.ingest import build_rounds, message_rows
from graphrecall.models import Message
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.rounds import exact_vector_search, write_batch
from graphrecall.store.rows import SessionRow
from graphrecall.store.schema import MATCH_SCOPE, owned
from graphrecall.store.vectors import decode, rounded

DIM = 64


def _vectors(n: int, seed: int) -> np.ndarray:
    """Unit vectors with what half precision must keep: small negative components, and -0.0 (whose bits are
    INT16's smallest value, which a ``COPY`` in Kuzu 0.11.3 turned into lost signs for the whole chunk)."""
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[:, 5] = -0.0
    v[:, 6] = -1e-9  # rounds to -0.0 too
    return v


def _write(db: ScopeDatabase, session: str, turns: int, vecs: np.ndarray, *, bulk: bool) -> list[str]:
    msgs = [
        Message(role="user" if i % 2 == 0 else "assistant", content=f"{session} turn {i}")
        for i in range(turns)
    ]
    rows = message_rows(session, msgs, start_idx=0, date=datetime(2024, 1, 1))
    rounds = build_rounds(session, rows)
    with db.write(bulk=bulk) as txn:
        write_batch(
            txn, new_sessions=[SessionRow(session, rows[0].at)], messages=rows, rounds=rounds,
            user_vecs=vecs, reply_vecs=-vecs, replaced_round_ids=[], dim=DIM,
        )  # fmt: skip
    return [r.id for r in rounds]


def _stored(db: ScopeDatabase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rows = db.query(f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN r.id, r.embedding, r.reply_embedding")
    return {r[0]: (decode(r[1]), decode(r[2])) for r in rows}


@pytest.mark.parametrize("bulk", [True, False], ids=["copy", "create"])
def test_kuzu_holds_the_rounded_vectors_with_their_signs(tmp_path: Path, bulk: bool) -> None:
    vecs = _vectors(300, 1)  # > 256 rounds: with bulk=False still one COPY; a few rounds below are CREATEs
    small = _vectors(3, 2)
    db = ScopeDatabase.standalone(tmp_path / "a.kuzu", embedder_id="hashing-64", dim=DIM)
    try:
        ids = _write(db, "big", 600, vecs, bulk=bulk) + _write(db, "small", 6, small, bulk=bulk)
        want = dict(zip(ids, np.concatenate([vecs, small]), strict=True))
        stored = _stored(db)
        assert sorted(stored) == sorted(ids)
        for rid, (user, reply) in stored.items():
            assert np.array_equal(user, rounded(want[rid])) and np.array_equal(reply, rounded(-want[rid]))
            assert (user < 0).sum() == (want[rid] < -1e-8).sum()  # every negative component is still negative
        assert np.abs(rounded(vecs) - vecs).max() <= 2.0**-12  # half an ulp at |x| < 1: 11 significant bits
    finally:
        db.close()


def test_the_derived_index_holds_kuzu_s_values_and_a_rebuild_restores_them(tmp_path: Path) -> None:
    path = tmp_path / "a.kuzu"
    vecs = _vectors(40, 3)
    db = ScopeDatabase.standalone(path, embedder_id="hashing-64", dim=DIM)
    try:
        ids = _write(db, "s", 80, vecs, bulk=False)
        live = db.indexes.vectors("round_user", ids)
        q = np.random.default_rng(4).standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        hits = db.indexes.vector_search("round_user", q, 10)
        exact = exact_vector_search(db, "embedding", q, 10)
    finally:
        db.close()
    for rid, (user, _) in _stored_after_rebuild(path).items():
        assert np.allclose(live[rid], user / np.linalg.norm(user), atol=1e-7)
    assert [i for i, _ in hits] == [i for i, _ in exact]  # the index and Kuzu's exact scan: the same cosines
    assert [s for _, s in hits] == pytest.approx([s for _, s in exact], abs=1e-6)
    data = (index_dir(path) / "vec-round_user" / "vectors.f16").read_bytes()
    shutil.rmtree(index_dir(path))
    db = ScopeDatabase.standalone(path, embedder_id="hashing-64", dim=DIM)
    try:
        assert "round_user" in db.indexes.rebuilt
        assert (index_dir(path) / "vec-round_user" / "vectors.f16").read_bytes() == data  # bit for bit
        assert db.indexes.vector_search("round_user", q, 10) == hits
    finally:
        db.close()


def _stored_after_rebuild(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    db = ScopeDatabase.standalone(path, embedder_id="hashing-64", dim=DIM)
    try:
        return _stored(db)
    finally:
        db.close()
