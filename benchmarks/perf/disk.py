"""Disk cost: bytes per round at each store size, and what an empty or tiny scope costs and why.

Kuzu keeps one file per database plus a ``.wal`` until a checkpoint folds it in. The floor experiment builds scopes
with the real schema and with parts of the index set left out, so the floor can be attributed (PK hash indexes,
FTS's internal tables, vector indexes, checkpoint copy-on-write pages) instead of guessed.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.perf import synth
from graphrecall import ingest as ing
from graphrecall.config import BUFFER_POOL_BYTES
from graphrecall.store import rounds as q
from graphrecall.store import schema
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.rows import SessionRow

MB = 1e6


def files(path: Path) -> dict[str, int]:
    """Bytes of the database file and its companions (``.wal``, ...)."""
    return {
        p.name[len(path.name) :] or "main": p.stat().st_size
        for p in path.parent.glob(path.name + "*")
        if p.is_file()
    }


def total(path: Path) -> int:
    return sum(files(path).values())


def checkpoint(db: ScopeDatabase) -> None:
    """Fold the WAL into the main file (under the write lock: a checkpoint must not race a write)."""
    with db.write_lock:
        db.query("CHECKPOINT")


def _tiny_session(i: int, dim: int) -> dict[str, Any]:
    sid = f"s{i}"
    at = datetime(2023, 1, 1) + timedelta(days=i)
    rows = ing.message_rows(
        sid,
        ing.validate_messages(
            [
                {"role": "user", "content": f"I adopted a cat named Tom {i}"},
                {"role": "assistant", "content": "Lovely!"},
            ]
        ),
        start_idx=0,
        date=at,
    )
    rounds = ing.build_rounds(sid, rows)
    rng = np.random.default_rng(i)
    v = rng.standard_normal((len(rounds), dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return {
        "new_sessions": [SessionRow(sid, at)],
        "messages": rows,
        "rounds": rounds,
        "user_vecs": v,
        "reply_vecs": v,
        "replaced_round_ids": [],
        "dim": dim,
    }


def _variant(path: Path, index_stmts: list[str], dim: int, sessions: int) -> dict[str, float]:
    with synth.raw_scope(path, embedder_id="perf", dim=dim, buffer_pool_size=BUFFER_POOL_BYTES) as (
        conn,
        txn,
    ):
        for stmt in index_stmts:
            conn.execute(stmt)
        conn.execute("CHECKPOINT")
        out = {"created_mb": total(path) / MB}
        for i in range(sessions):
            conn.execute("BEGIN TRANSACTION")
            q.write_batch(txn(), **_tiny_session(i, dim))
            conn.execute("COMMIT")
            if i == 0:
                out["after_1_session_mb"] = total(path) / MB
        conn.execute("CHECKPOINT")
        out[f"after_{sessions}_sessions_mb"] = total(path) / MB
    return out


def floor(work: Path, *, dim: int = 384, sessions: int = 10) -> dict[str, Any]:
    """The empty-scope floor, before and after ``CHECKPOINT``, and an ablation over the index set."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / "empty.kuzu"
    db = ScopeDatabase.standalone(path, embedder_id="perf", dim=dim)
    out: dict[str, Any] = {"just_created": files(path)}
    checkpoint(db)
    out["after_checkpoint"] = files(path)
    db.close()
    out["after_close"] = files(path)
    stmts = schema.kuzu_index_statements()
    n_vec = len(schema.VECTOR_INDEXES)
    variants = {
        "no_indexes": [],
        "vector_indexes_only": stmts[:n_vec],
        "fts_indexes_only": stmts[n_vec:],
        "round_indexes_only": [s for s in stmts if "'Round'" in s],
        "all_indexes (schema 1)": stmts,
    }
    out["ablation"] = {
        name: _variant(work / f"{i}.kuzu", st, dim, sessions) for i, (name, st) in enumerate(variants.items())
    }
    out["ablation_sessions"] = sessions
    shutil.rmtree(work, ignore_errors=True)
    return out
