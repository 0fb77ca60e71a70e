"""Writing chat history: what is new in a batch, its embeddings, and where it goes.

The facade validates arguments and names them; this module decides what a batch changes (idempotent by message id:
re-adding a session changes nothing, new messages of a known session rebuild only the rounds they touch, and the
write log's unflushed messages count as stored), embeds the new rounds, and then either appends one entry to the
scope's write log (a chat turn: durable and searchable when the call returns, in Kuzu after the next flush) or
writes straight into Kuzu in one transaction (bulk ingest). Either way a failed call leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from graphrecall import ingest as ing
from graphrecall import telemetry
from graphrecall.embed import Embedder
from graphrecall.embed.base import Vectors
from graphrecall.embed.passages import PASSAGE_FROM_CHARS, embed_passages
from graphrecall.models import IngestResult, Message, Scope, ensure_utc, utcnow
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase, WriteTxn
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow
from graphrecall.store.wal import WriteEntry

# Texts per embedding call when a large batch is embedded while its rounds are written (``_embed_and_write``).
TEXT_CHUNK = 96

SessionBatch = Sequence[tuple[str, list[Message], datetime | None]]
"""(session id, its validated messages, its date or None): dates arrive parsed (the facade parses what callers
send, once); ``None`` means the session's stored start, or now for a new one."""


# A call that adds at most this many rounds goes through the scope's write log (acknowledged after an fsync,
# searchable from the log's tail at once, moved into Kuzu by the flusher); a larger one (bulk ingest) is written
# straight into Kuzu in one transaction, where chunked COPY overlapped with embedding is the fastest path.
LOG_MAX_ROUNDS = 64


class Graduated(Exception):
    """A write planned against a scope's log alone found the scope moved into Kuzu meanwhile (its flusher ran):
    the tail it read may have been trimmed, so the caller plans it again against the database."""


@dataclass
class Plan:
    """What a batch adds to a scope, computed against Kuzu plus the unflushed tail: ids and positions are fixed
    here, before anything is written, so a logged write replays to the same rows."""

    new_sessions: list[SessionRow] = field(default_factory=list)
    messages: list[MessageRow] = field(default_factory=list)
    rounds: list[RoundRow] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    skipped: int = 0

    def result(self) -> IngestResult:
        return IngestResult(
            sessions_added=len(self.new_sessions),
            messages_added=len(self.messages),
            messages_skipped=self.skipped,
            rounds_written=len(self.rounds),
        )


class Writer:
    """Turns validated sessions into rows and writes them: small writes through the scope's log, large ones
    straight into Kuzu. The caller serializes the writes of one scope (``ScopeLogs.scope_lock``)."""

    def __init__(
        self, embedder: Embedder, logs: ScopeLogs, *, passage_from_chars: int = PASSAGE_FROM_CHARS
    ) -> None:
        self.embedder = embedder
        self.logs = logs
        self.passage_from_chars = passage_from_chars  # user turns longer than this get passage vectors

    def next_index(self, db: ScopeDatabase, scope: Scope, session_id: str) -> int:
        """How many messages ``session_id`` already holds (flushed or not): where appended ones are numbered
        from."""
        return len(self._stored_messages(db, scope, [session_id]).get(session_id, []))

    def _stored_messages(
        self, db: ScopeDatabase, scope: Scope, session_ids: Sequence[str]
    ) -> dict[str, list[MessageRow]]:
        """Every stored message of these sessions, the log's unflushed ones included, in order. The tail is read
        before Kuzu: a flush commits to Kuzu before it trims the tail, so this order sees each message at least
        once (merged by id)."""
        log = self.logs.get(scope, create=False)
        pending: dict[str, list[MessageRow]] = {}
        if log is not None:
            for sid in session_ids:
                rows = log.tail.messages(sid)
                if rows:
                    pending[sid] = rows
        out: dict[str, list[MessageRow]] = {}
        for sid in session_ids:
            by_id = {m.id: m for m in (q.session_messages(db, sid) if db.known.holds("Session", sid) else [])}
            by_id.update({m.id: m for m in pending.get(sid, [])})
            if by_id:
                out[sid] = sorted(by_id.values(), key=lambda m: (m.idx, m.id))
        return out

    def _known_ids(self, db: ScopeDatabase, scope: Scope, ids: Sequence[str]) -> set[str]:
        log = self.logs.get(scope, create=False)
        pending = log.tail.message_ids() & set(ids) if log is not None else set()
        return pending | db.known.stored("Message", ids)

    def plan(
        self,
        db: ScopeDatabase,
        scope: Scope,
        batch: SessionBatch,
        start_idx: Mapping[str, int] | None = None,
    ) -> Plan:
        """What is new in ``batch``: sessions, messages not stored yet, and the rounds they create or change."""
        plan = Plan()
        stored_by_sid = self._stored_messages(db, scope, [sid for sid, _, _ in batch])
        for sid, msgs, date in batch:
            stored = stored_by_sid.get(sid, [])
            session_date = ensure_utc(date) if date is not None else (stored[0].at if stored else utcnow())
            base = (start_idx or {}).get(sid, 0)
            rows = ing.message_rows(sid, msgs, start_idx=base, date=session_date)
            known = {m.id for m in stored} | self._known_ids(db, scope, [r.id for r in rows])
            fresh = [r for r in rows if r.id not in known]
            plan.skipped += len(rows) - len(fresh)
            if not fresh:
                continue
            if not stored:
                plan.new_sessions.append(SessionRow(sid, session_date))
            combined = sorted([*stored, *fresh], key=lambda m: (m.idx, m.id))
            fresh_ids = {m.id for m in fresh}
            stored_round_ids = (
                {f"{sid}@{i}" for i in range(len(ing.build_rounds(sid, stored)))} if stored else set()
            )
            for rnd in ing.build_rounds(sid, combined):
                if fresh_ids.intersection(rnd.message_ids) or rnd.id not in stored_round_ids:
                    plan.rounds.append(rnd)
                    if rnd.id in stored_round_ids:
                        plan.replaced.append(rnd.id)
            plan.messages.extend(fresh)
        return plan

    def write(
        self,
        db: ScopeDatabase,
        scope: Scope,
        batch: SessionBatch,
        start_idx: Mapping[str, int] | None = None,
    ) -> IngestResult:
        """Plan, embed and write one batch: through the log when it is small, else straight into Kuzu in one
        transaction (after the log's pending writes, so that order is kept). ``db`` may be the pool's empty
        database for a scope that lives in its log (``ScopeLogs.writing``); raises ``Graduated`` when that scope
        moved into Kuzu while this was planned."""
        plan = self.plan(db, scope, batch, start_idx)
        self.check_planned(db, scope)
        if not plan.messages:
            return plan.result()
        if len(plan.rounds) <= LOG_MAX_ROUNDS:
            users, replies, passages = self.embed_rounds(plan.rounds)
            entry = WriteEntry.from_rows(
                sessions=plan.new_sessions,
                messages=plan.messages,
                rounds=plan.rounds,
                user_vectors=users,
                reply_vectors=replies,
                passages=passages,
                replaced_round_ids=plan.replaced,
                dim=self.embedder.dim,
            )
            self.logs.append(scope, entry)
            return plan.result()
        self.logs.flush(scope)
        if db.placeholder:  # a bulk write: the scope moves into Kuzu with it
            with self.logs.database(scope) as own, own.write_lock:
                self._write_direct(own, plan)
            return plan.result()
        with db.write_lock:
            self._write_direct(db, plan)
        return plan.result()

    def check_planned(self, db: ScopeDatabase, scope: Scope) -> None:
        """After planning against the empty database: raise ``Graduated`` if the scope got its own meanwhile. Its
        flusher creates the database before it trims anything from the tail, so a scope still without one was read
        whole."""
        if db.placeholder and self.logs.has_database(scope):
            raise Graduated(f"scope {scope} moved into its database while a write was planned")

    def _write_direct(self, db: ScopeDatabase, plan: Plan) -> None:
        texts, slots = round_texts(plan.rounds)
        # One chunk: nothing to overlap, so embed before the transaction opens; more: embed while writing.
        vecs = self._embed(texts, slots) if len(texts) <= TEXT_CHUNK else None
        with db.write(bulk=True) as txn:
            if vecs is not None:
                q.write_batch(
                    txn,
                    new_sessions=plan.new_sessions,
                    messages=plan.messages,
                    rounds=plan.rounds,
                    user_vecs=vecs[0],
                    reply_vecs=vecs[1],
                    passages=vecs[2],
                    replaced_round_ids=plan.replaced,
                    dim=self.embedder.dim,
                )
            else:
                self._embed_and_write(txn, plan, texts, slots)
                q.touch_sessions(txn, plan.messages)

    def _embed_and_write(
        self, txn: WriteTxn, plan: Plan, texts: Sequence[str], slots: Sequence[tuple[int, int]]
    ) -> None:
        """Embed the batch's texts in chunks while the writer thread writes, all inside the caller's transaction:
        first the messages, then each round as soon as both its vectors are there.

        Why overlap: the writes would leave one of the two cores idle if they waited for the embedding (Kuzu's
        COPY runs on one thread). Why chunks of texts sorted by length over the whole batch, not chunks of rounds:
        a model call pads each of its batches to its longest text, and a round's two texts differ in length (a
        short question, a long reply), so 48-round chunks embedded the same texts 7% slower than one call, while
        96-text chunks sorted over the batch cost the same as one call (docs/benchmarks.md). The writer connection
        is used by one thread at a time: each write waits for the previous one, and an error waits for the write
        in flight before the transaction is rolled back.
        """
        dim = self.embedder.dim
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        waiting = [1 if u == r else 2 for u, r in slots]  # texts each round still waits for
        rounds_of: dict[int, list[int]] = {}
        for j, (u, r) in enumerate(slots):
            for t in {u, r}:
                rounds_of.setdefault(t, []).append(j)
        vecs = np.zeros((len(texts), dim), np.float32)
        parts: list[Vectors | None] = [None] * len(texts)  # a long text's passage vectors
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphrecall-ingest") as writer:
            pending = writer.submit(
                q.write_messages,
                txn,
                new_sessions=plan.new_sessions,
                messages=plan.messages,
                replaced_round_ids=plan.replaced,
            )
            try:
                for start in range(0, len(order), TEXT_CHUNK):
                    chunk = order[start : start + TEXT_CHUNK]
                    vecs[chunk], chunk_parts = embed_passages(
                        self.embedder, [texts[i] for i in chunk], from_chars=self.passage_from_chars
                    )
                    for t, p in zip(chunk, chunk_parts, strict=True):
                        parts[t] = p
                    ready = []
                    for t in chunk:
                        for j in rounds_of[t]:
                            waiting[j] -= 1
                            if waiting[j] == 0:
                                ready.append(j)
                    pending.result()
                    ready.sort()
                    pending = writer.submit(
                        q.write_rounds,
                        txn,
                        [plan.rounds[j] for j in ready],
                        vecs[[slots[j][0] for j in ready]],
                        vecs[[slots[j][1] for j in ready]],
                        dim,
                        [parts[slots[j][0]] for j in ready],
                    )
                pending.result()
            except BaseException:
                wait([pending])  # never roll back while a COPY is running on the connection
                raise

    def _embed(
        self, texts: Sequence[str], slots: Sequence[tuple[int, int]]
    ) -> tuple[Vectors, Vectors, list[Vectors | None]]:
        if not texts:
            empty = np.zeros((0, self.embedder.dim), np.float32)
            return empty, empty, []
        with telemetry.span(
            "graphrecall.embed", {"graphrecall.embedder": self.embedder.id, "graphrecall.texts": len(texts)}
        ):
            vecs, parts = embed_passages(self.embedder, texts, from_chars=self.passage_from_chars)
        users = vecs[[a for a, _ in slots]]
        replies = vecs[[b for _, b in slots]]
        return users, replies, [parts[a] for a, _ in slots]

    def embed_rounds(self, rounds: Sequence[RoundRow]) -> tuple[Vectors, Vectors, list[Vectors | None]]:
        """User-turn vectors, reply vectors and the user turns' passage vectors, in one batched call (a round
        without one side reuses the other). A user turn longer than the model's window is embedded in full: its
        vector pools its passages', which are kept too (``embed.passages``)."""
        return self._embed(*round_texts(rounds))


def round_texts(rounds: Sequence[RoundRow]) -> tuple[list[str], list[tuple[int, int]]]:
    """The texts to embed for ``rounds`` and, per round, the positions of its user-side and reply-side text (the
    same position when the round has one side only, or both sides read alike)."""
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
    return texts, slots
