"""Writing chat history: what is new in a batch, its embeddings, and one transaction per batch.

The facade validates arguments and names them; this module decides what a batch changes (idempotent by message id:
re-adding a session changes nothing, new messages of a known session rebuild only the rounds they touch), embeds
the new rounds and writes everything in one transaction, so a failed batch leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime

import numpy as np

from graphrecall import ingest as ing
from graphrecall.dates import parse_date
from graphrecall.embed import Embedder
from graphrecall.embed.base import Vectors
from graphrecall.models import IngestResult, Message, utcnow
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase, WriteTxn
from graphrecall.store.rows import MessageRow, RoundRow

# Rounds per COPY when a batch's rounds are written while the next chunk is embedded (``_embed_and_write``).
ROUND_CHUNK = 48

SessionBatch = Sequence[tuple[str, list[Message], datetime | str | None]]


class Writer:
    """Turns validated sessions into rows and writes them. The caller holds ``db.write_lock``."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def next_index(self, db: ScopeDatabase, session_id: str) -> int:
        """How many messages ``session_id`` already holds: where appended messages are numbered from."""
        return q.existing_sessions(db, [session_id]).get(session_id, 0)

    def write(
        self,
        db: ScopeDatabase,
        batch: Sequence[tuple[str, list[Message], datetime | str | None]],
        start_idx: Mapping[str, int] | None = None,
    ) -> IngestResult:
        """Compute what is new, embed it, write it in one transaction."""
        existing = q.existing_sessions(db, [sid for sid, _, _ in batch])
        new_sessions: list[tuple[str, datetime]] = []
        all_msgs: list[MessageRow] = []
        all_rounds: list[RoundRow] = []
        replaced: list[str] = []
        skipped = 0
        for sid, msgs, date in batch:
            when = date if isinstance(date, datetime) else (parse_date(date, where="date") if date else None)
            stored = q.session_messages(db, sid) if sid in existing else []
            session_date = when or (stored[0].at if stored else utcnow())
            base = (start_idx or {}).get(sid, 0)
            rows = ing.message_rows(sid, msgs, start_idx=base, date=session_date)
            known = {m.id for m in stored} | q.existing_message_ids(db, [r.id for r in rows])
            fresh = [r for r in rows if r.id not in known]
            skipped += len(rows) - len(fresh)
            if not fresh:
                continue
            if sid not in existing:
                new_sessions.append((sid, session_date))
            combined = sorted([*stored, *fresh], key=lambda m: (m.idx, m.id))
            fresh_ids = {m.id for m in fresh}
            stored_round_ids = (
                {f"{sid}@{i}" for i in range(len(ing.build_rounds(sid, stored)))} if stored else set()
            )
            for rnd in ing.build_rounds(sid, combined):
                if fresh_ids.intersection(rnd.message_ids) or rnd.id not in stored_round_ids:
                    all_rounds.append(rnd)
                    if rnd.id in stored_round_ids:
                        replaced.append(rnd.id)
            all_msgs.extend(fresh)
        if not all_msgs:
            return IngestResult(messages_skipped=skipped)
        # Chunks of rounds of similar length: each embed call then pads its batches as little as one call over
        # everything would (unsorted chunks made embedding 1.75x slower). The order rounds are written in is free.
        by_length = sorted(all_rounds, key=lambda r: len(ing.embedding_texts(r)[0]))
        chunks = [by_length[i : i + ROUND_CHUNK] for i in range(0, len(by_length), ROUND_CHUNK)]
        # One chunk: nothing to overlap, so embed before the transaction opens; more: embed while writing.
        vecs = self.embed_rounds(all_rounds) if len(chunks) <= 1 else None
        with db.write() as txn:
            if vecs is not None:
                q.write_batch(
                    txn,
                    new_sessions=new_sessions,
                    messages=all_msgs,
                    rounds=all_rounds,
                    user_vecs=vecs[0],
                    reply_vecs=vecs[1],
                    replaced_round_ids=replaced,
                    dim=self.embedder.dim,
                )
            else:
                q.write_messages(
                    txn, new_sessions=new_sessions, messages=all_msgs, replaced_round_ids=replaced
                )
                self._embed_and_write(txn, chunks)
                q.touch_sessions(txn, all_msgs)
        return IngestResult(
            sessions_added=len(new_sessions),
            messages_added=len(all_msgs),
            messages_skipped=skipped,
            rounds_written=len(all_rounds),
        )

    def _embed_and_write(self, txn: WriteTxn, chunks: Sequence[Sequence[RoundRow]]) -> None:
        """Embed chunk k+1 while chunk k is written, all inside the caller's transaction.

        Why: Kuzu inserts a COPY's rows into the HNSW indexes on one thread (measured: CPU time = wall time), so
        during the write one of the two cores would sit idle; overlapping it with the next chunk's embedding is
        what keeps ingest close to the embedder-alone throughput (docs/benchmarks.md). The writer connection is
        used by one thread at a time: each write waits for the previous one, and an error waits for the write
        in flight before the transaction is rolled back.
        """
        dim = self.embedder.dim
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphrecall-ingest") as writer:
            pending: Future[None] | None = None
            try:
                for chunk in chunks:
                    vecs = self.embed_rounds(chunk)
                    if pending is not None:
                        pending.result()
                    pending = writer.submit(q.write_rounds, txn, chunk, *vecs, dim)
                if pending is not None:
                    pending.result()
            except BaseException:
                if pending is not None:
                    wait([pending])  # never roll back while a COPY is running on the connection
                raise

    def embed_rounds(self, rounds: Sequence[RoundRow]) -> tuple[Vectors, Vectors]:
        """User-turn vectors and reply vectors in one batched call (a round without one side reuses the other)."""
        texts: list[str] = []
        slots: list[tuple[int, int]] = []
        for r in rounds:
            u, p = ing.embedding_texts(r)
            texts.append(u)
            ui = len(texts) - 1
            if p == u:
                slots.append((ui, ui))
            else:
                texts.append(p)
                slots.append((ui, len(texts) - 1))
        vecs = self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), np.float32)
        users = vecs[[a for a, _ in slots]] if slots else vecs
        replies = vecs[[b for _, b in slots]] if slots else vecs
        return users, replies
