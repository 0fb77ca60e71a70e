"""Large single-scope stores built from real text and real vectors, without re-embedding.

Embedding 100k rounds with the model would take hours on two cores, and would measure the embedder, not the store.
So a *base* of real LongMemEval rounds is embedded once (through the shared embedding cache), and the store grows
by replaying that base: copy 0 is the base itself; copy c >= 1 gets new session/message/round ids, dates shifted by
``c`` weeks, the same text (so BM25 postings grow like real data would), and each vector perturbed by Gaussian
noise of norm ~``sigma`` and re-normalized (cosine to its original ~ 1/sqrt(1+sigma^2)), so HNSW sees distinct
points in the real embedding distribution rather than exact duplicates. Rows go straight through the store layer
(``store.rounds.write_batch`` inside ``db.write()``), built exactly as ``graphrecall.writer`` builds them, in large
batches, so vector and FTS indexes are maintained as in a real ingest.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import count
from pathlib import Path
from typing import Any

import kuzu
import numpy as np

from benchmarks.perf.corpus import ChatSession
from graphrecall.embed import Embedder, Vectors, normalize_rows
from graphrecall.index import index_dir
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase, WriteTxn
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow


@dataclass
class BaseVectors:
    """User-side and reply-side vectors per base round id (as ``graphrecall.writer.Writer.embed_rounds`` pairs them)."""

    user: dict[str, Vectors]
    reply: dict[str, Vectors]
    hits: int = 0
    misses: int = 0


def _full_texts(r: RoundRow) -> tuple[str, str]:
    """Whole user and reply texts: what the shared LongMemEval cache was filled with (ingest now truncates long
    replies, ``ing.embedding_texts``); either way each vector is the model's embedding of the round's real text."""
    return r.user_text or r.reply_text, r.reply_text or r.user_text


def embed_base(sessions: list[ChatSession], embedder: Embedder) -> BaseVectors:
    rounds = [r for s in sessions for r in s.rounds]
    texts = list(dict.fromkeys(t for r in rounds for t in _full_texts(r)))
    vecs = embedder.embed(texts)
    by_text = {t: vecs[i] for i, t in enumerate(texts)}
    out = BaseVectors({}, {})
    for r in rounds:
        u, p = _full_texts(r)
        out.user[r.id] = by_text[u]
        out.reply[r.id] = by_text[p]
    out.hits = int(getattr(embedder, "hits", 0))
    out.misses = int(getattr(embedder, "misses", len(texts)))
    return out


@dataclass
class _Batch:
    sessions: list[SessionRow] = field(default_factory=list)
    messages: list[MessageRow] = field(default_factory=list)
    rounds: list[RoundRow] = field(default_factory=list)
    user: list[Vectors] = field(default_factory=list)
    reply: list[Vectors] = field(default_factory=list)


class StoreGrower:
    """Appends replicated rounds to one scope; successive ``grow_to`` calls continue where the last one stopped."""

    def __init__(
        self, base: list[ChatSession], vectors: BaseVectors, *, sigma: float = 0.35, seed: int = 7
    ) -> None:
        if not base:
            raise ValueError("the base corpus is empty")
        self.base = base
        self.vectors = vectors
        self.sigma = sigma
        self.rng = np.random.default_rng(seed)
        self.rounds = 0
        self._stream: Iterator[tuple[int, ChatSession]] = ((c, s) for c in count() for s in base)
        self.batches: list[dict[str, float]] = []

    def _add(self, batch: _Batch, copy: int, s: ChatSession) -> None:
        sid = s.session_id if copy == 0 else f"x{copy}-{s.session_id}"
        shift = timedelta(weeks=copy)
        new_id = {m.id: f"{sid}#{m.idx}" for m in s.message_rows}
        batch.sessions.append(SessionRow(sid, s.date + shift))
        for m in s.message_rows:
            batch.messages.append(MessageRow(new_id[m.id], sid, m.idx, m.role, m.text, m.at + shift))
        for r in s.rounds:
            batch.rounds.append(
                RoundRow(
                    id=f"{sid}@{r.idx}",
                    session_id=sid,
                    idx=r.idx,
                    text=r.text,
                    user_text=r.user_text,
                    reply_text=r.reply_text,
                    terms=r.terms,
                    at=r.at + shift,
                    message_ids=[new_id[x] for x in r.message_ids],
                )
            )
            u, p = self.vectors.user[r.id], self.vectors.reply[r.id]
            if copy:
                u, p = self._perturb(u), self._perturb(p)
            batch.user.append(u)
            batch.reply.append(p)

    def _perturb(self, v: Vectors) -> Vectors:
        noise = self.rng.standard_normal(size=v.shape, dtype=np.float32) * np.float32(
            self.sigma / np.sqrt(v.shape[0])
        )
        out: Vectors = normalize_rows(v + noise)[0]
        return out

    def _next_batch(self, target: int, batch_rounds: int) -> _Batch:
        batch = _Batch()
        while len(batch.rounds) < batch_rounds and self.rounds + len(batch.rounds) < target:
            copy, s = next(self._stream)
            self._add(batch, copy, s)
        return batch

    def _write(self, txn: WriteTxn, batch: _Batch) -> None:
        q.write_batch(
            txn,
            new_sessions=batch.sessions,
            messages=batch.messages,
            rounds=batch.rounds,
            user_vecs=np.stack(batch.user),
            reply_vecs=np.stack(batch.reply),
            replaced_round_ids=[],
            dim=int(batch.user[0].shape[0]),
        )

    def _record(self, n: int, seconds: float) -> None:
        self.rounds += n
        self.batches.append(
            {"rounds_after": self.rounds, "batch_rounds": n, "seconds": seconds, "rounds_per_s": n / seconds}
        )
        print(f"  write: {self.rounds} rounds ({n / seconds:.0f} rounds/s this batch)", flush=True)

    def grow_to(self, db: ScopeDatabase, target: int, *, batch_rounds: int = 1000) -> dict[str, Any]:
        """Incremental path: append through ``db.write()`` until ``target`` rounds, indexes maintained on insert."""
        t_start = time.perf_counter()
        start = self.rounds
        while self.rounds < target:
            batch = self._next_batch(target, batch_rounds)
            t0 = time.perf_counter()
            with db.write() as txn:
                self._write(txn, batch)
            self._record(len(batch.rounds), time.perf_counter() - t0)
        elapsed = time.perf_counter() - t_start
        return {
            "mode": "incremental",
            "rounds": self.rounds,
            "seconds": elapsed,
            "rounds_per_s": (self.rounds - start) / elapsed if elapsed else 0.0,
        }


@contextlib.contextmanager
def raw_scope(
    path: Path, *, embedder_id: str, dim: int, buffer_pool_size: int = 2 << 30
) -> Iterator[tuple[kuzu.Connection, Callable[[], WriteTxn]]]:
    """A bucket of one scope at ``path`` (``ScopeDatabase.standalone``) written through its bucket's raw writer
    connection, no derived index kept: what bulk builds use (the caller opens and commits its transactions). Its
    derived indexes are deleted at the end, so the next open builds them from Kuzu."""
    db = ScopeDatabase.standalone(path, embedder_id=embedder_id, dim=dim, buffer_pool_size=buffer_pool_size)
    try:
        yield db.bucket.writer, lambda: WriteTxn(db.bucket.writer, db, create_small=False)
    finally:
        db.close()
        shutil.rmtree(index_dir(path), ignore_errors=True)


def bulk_store(
    path: Path,
    grower: StoreGrower,
    target: int,
    *,
    embedder_id: str,
    dim: int,
    batch_rounds: int = 5000,
    buffer_pool_size: int = 2 << 30,
) -> dict[str, Any]:
    """Bulk path: a bucket of one scope, every row written in (``COPY`` for messages and rounds, edges one statement
    each: ``WriteTxn.copy``), then the derived indexes built once from Kuzu by opening the store (what a rebuild or an
    upgrade does).

    Written through the bucket's raw connection rather than ``ScopeDatabase.write()`` so that 100k rounds load in minutes;
    the store that results is the one the product would hold, and search latency measured on it is what a scope of
    that size sees.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    with raw_scope(path, embedder_id=embedder_id, dim=dim, buffer_pool_size=buffer_pool_size) as (conn, txn):
        while grower.rounds < target:
            batch = grower._next_batch(target, batch_rounds)
            t0 = time.perf_counter()
            conn.execute("BEGIN TRANSACTION")
            grower._write(txn(), batch)
            conn.execute("COMMIT")
            grower._record(len(batch.rounds), time.perf_counter() - t0)
        load_s = time.perf_counter() - t_start
        conn.execute("CHECKPOINT")
    t0 = time.perf_counter()
    ScopeDatabase.standalone(
        path, embedder_id=embedder_id, dim=dim
    ).close()  # builds every derived index from Kuzu
    index_s = {"derived": time.perf_counter() - t0}
    print(f"  derived indexes: {index_s['derived']:.0f} s", flush=True)
    total_s = time.perf_counter() - t_start
    return {
        "mode": "bulk",
        "rounds": grower.rounds,
        "load_s": load_s,
        "index_build_s": index_s,
        "seconds": total_s,
        "rounds_per_s": grower.rounds / total_s,
        "load_rounds_per_s": grower.rounds / load_s,
    }
