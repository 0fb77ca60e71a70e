"""The facade: ``Memory`` (sync) opens a store root and exposes ingest, search, context and administration.

Every public method takes the ``Scope`` first: one scope is one Kuzu database, so tenant isolation is a property of
the storage layout, not of query filters.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from graphrecall import ingest as ing
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.embed import CachedEmbedder, Embedder, default_embedder
from graphrecall.embed.base import Vectors
from graphrecall.errors import InvalidInput, NotFound
from graphrecall.models import (
    Context,
    Hit,
    IngestResult,
    Message,
    Scope,
    ScopeStats,
    Session,
    TimeRange,
    utcnow,
    validate_identifier,
)
from graphrecall.retrieve.context import build_context
from graphrecall.retrieve.rerank import Reranker, load_reranker
from graphrecall.retrieve.retriever import HybridRetriever
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.pool import DatabasePool

log = logging.getLogger(__name__)

ScopeLike = Scope | tuple[str, str]
Progress = Callable[[int, int], None]


class SessionInput(BaseModel):
    """A session as callers hand it in: id, date, messages (dicts or ``Message``)."""

    session_id: str
    date: datetime | str | None = None
    messages: list[Any] = Field(default_factory=list)


def as_scope(scope: ScopeLike) -> Scope:
    if isinstance(scope, Scope):
        return scope
    try:
        org, user = scope
    except (TypeError, ValueError):
        raise InvalidInput("scope must be a Scope or an (org_id, user_id) pair", where="scope") from None
    try:
        return Scope(org_id=org, user_id=user)
    except ValueError as e:
        raise InvalidInput(str(e), where="scope") from None


class _Prepared(BaseModel):
    model_config = {"arbitrary_types_allowed": True}

    new_sessions: list[tuple[str, datetime]]
    messages: list[Any]
    rounds: list[Any]
    replaced: list[str]
    skipped: int


class Memory:
    """Long-term memory over a store root. Thread-safe; use one instance per process (Kuzu allows one writer
    process per database file)."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        reranker: Reranker | None = None,
        retrieval: RetrievalConfig | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env(root=Path(root) if root is not None else None)
        if root is not None:
            self.settings.root = Path(root)
        self.root = self.settings.root.expanduser()
        self.root.mkdir(parents=True, exist_ok=True)
        if embedder is None:
            embedder = default_embedder()
            if self.settings.embed_cache is not None and isinstance(embedder, CachedEmbedder):
                embedder = CachedEmbedder(embedder.inner, path=self.settings.embed_cache)
        self.embedder = embedder
        self.pool = DatabasePool(
            self.root,
            embedder_id=embedder.id,
            dim=embedder.dim,
            capacity=self.settings.pool_size,
            buffer_pool_size=self.settings.buffer_pool_bytes,
        )
        if reranker is None:
            reranker = load_reranker(self.settings.reranker)
        self.retriever = HybridRetriever(embedder, retrieval or self.settings.retrieval, reranker)
        self._closed = False
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path | None = None, **kwargs: Any) -> Memory:
        """Open (creating if needed) a store root. Use as a context manager to close databases on exit."""
        return cls(root, **kwargs)

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self.pool.close()
                self._closed = True

    # -- ingest ------------------------------------------------------------------------------------------------
    def add_session(
        self,
        scope: ScopeLike,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        session_id: str,
        date: datetime | str | None = None,
    ) -> IngestResult:
        """Store one session (its messages, rounds, embeddings and index entries). Re-adding the same ids changes
        nothing; messages beyond those stored are appended."""
        return self.add_sessions(
            scope, [SessionInput(session_id=session_id, date=date, messages=list(messages))]
        )

    def add_messages(
        self,
        scope: ScopeLike,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        session_id: str = "default",
        date: datetime | str | None = None,
    ) -> IngestResult:
        """Append turns to a session (created if new). Messages with explicit ids are idempotent; messages without
        ids are numbered after those already stored, so sending them twice stores them twice."""
        s = as_scope(scope)
        validate_identifier(session_id, "session_id")
        msgs = ing.validate_messages(messages)
        with self.pool.acquire(s) as db, db.write_lock:
            start = q.existing_sessions(db, [session_id]).get(session_id, 0)
            numbered = [m if m.id else m.model_copy(update={"idx": start + i}) for i, m in enumerate(msgs)]
            return self._ingest(db, [(session_id, numbered, date)], start_idx={session_id: start})

    def add_sessions(
        self,
        scope: ScopeLike,
        sessions: Iterable[SessionInput | Mapping[str, Any]],
        *,
        batch_sessions: int = 64,
        progress: Progress | None = None,
    ) -> IngestResult:
        """Bulk ingest. Everything is validated before anything is written; each batch of ``batch_sessions`` is
        one transaction (all or nothing)."""
        s = as_scope(scope)
        items: list[tuple[str, list[Message], datetime | str | None]] = []
        for i, raw in enumerate(sessions):
            where = f"sessions[{i}]"
            try:
                si = raw if isinstance(raw, SessionInput) else SessionInput.model_validate(raw)
            except Exception as e:  # pydantic.ValidationError
                raise InvalidInput(str(e).splitlines()[0], where=where) from None
            try:
                validate_identifier(si.session_id, "session_id")
            except ValueError as e:
                raise InvalidInput(str(e), where=f"{where}.session_id") from None
            date = si.date
            if isinstance(date, str):
                date = ing.parse_date(date, where=f"{where}.date")
            msgs = ing.validate_messages(si.messages, where=f"{where}.messages")
            if not msgs:
                raise InvalidInput("a session needs at least one message", where=f"{where}.messages")
            items.append((si.session_id, msgs, date))
        ids = [sid for sid, _, _ in items]
        if len(set(ids)) != len(ids):
            dup = next(x for x in ids if ids.count(x) > 1)
            raise InvalidInput(f"session id {dup!r} appears twice in one call", where="sessions")
        total = IngestResult()
        done = 0
        with self.pool.acquire(s) as db:
            for start in range(0, len(items), batch_sessions):
                batch = items[start : start + batch_sessions]
                with db.write_lock:
                    r = self._ingest(db, batch)
                for field in ("sessions_added", "messages_added", "messages_skipped", "rounds_written"):
                    setattr(total, field, getattr(total, field) + getattr(r, field))
                done += len(batch)
                if progress is not None:
                    progress(done, len(items))
        return total

    def _ingest(
        self,
        db: ScopeDatabase,
        batch: Sequence[tuple[str, list[Message], datetime | str | None]],
        start_idx: Mapping[str, int] | None = None,
    ) -> IngestResult:
        """Compute what is new, embed it, write it in one transaction. Caller holds ``db.write_lock``."""
        existing = q.existing_sessions(db, [sid for sid, _, _ in batch])
        new_sessions: list[tuple[str, datetime]] = []
        all_msgs: list[ing.MessageRow] = []
        all_rounds: list[ing.RoundRow] = []
        replaced: list[str] = []
        skipped = 0
        for sid, msgs, date in batch:
            when = (
                date if isinstance(date, datetime) else (ing.parse_date(date, where="date") if date else None)
            )
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
        user_vecs, reply_vecs = self._embed_rounds(all_rounds)
        with db.write() as txn:
            q.write_history(
                txn,
                new_sessions=new_sessions,
                messages=all_msgs,
                rounds=all_rounds,
                user_vecs=user_vecs,
                reply_vecs=reply_vecs,
                replaced_round_ids=replaced,
                dim=self.embedder.dim,
            )
        return IngestResult(
            sessions_added=len(new_sessions),
            messages_added=len(all_msgs),
            messages_skipped=skipped,
            rounds_written=len(all_rounds),
        )

    def _embed_rounds(self, rounds: Sequence[ing.RoundRow]) -> tuple[Vectors, Vectors]:
        """User-turn vectors and reply vectors in one batched call (a round without one side reuses the other)."""
        texts: list[str] = []
        slots: list[tuple[int, int]] = []
        for r in rounds:
            u = r.user_text or r.reply_text
            p = r.reply_text or r.user_text
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

    # -- recall ------------------------------------------------------------------------------------------------
    def search(
        self,
        scope: ScopeLike,
        query: str,
        k: int = 10,
        *,
        question_date: datetime | str | None = None,
        time_range: TimeRange | None = None,
        as_of: datetime | None = None,
    ) -> list[Hit]:
        """Hybrid search over the scope's memory. ``question_date`` anchors relative time ("last week") and hides
        what was said after it; it never defaults to the wall clock."""
        s = as_scope(scope)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string", where="query")
        if k < 1:
            raise InvalidInput(f"k must be at least 1, got {k}", where="k")
        qd = ing.parse_date(question_date, where="question_date") if question_date is not None else None
        try:
            with self.pool.acquire(s, create=False) as db:
                return self.retriever.search(
                    db, query, k, question_date=qd, time_range=time_range, as_of=as_of
                )
        except NotFound:
            return []

    def context(
        self,
        scope: ScopeLike,
        query: str,
        token_budget: int = 2000,
        *,
        k: int = 30,
        question_date: datetime | str | None = None,
    ) -> Context:
        """Evidence for a reader: the best hits that fit ``token_budget``, dated, grouped by session,
        chronological."""
        if token_budget < 1:
            raise InvalidInput(f"token_budget must be positive, got {token_budget}", where="token_budget")
        qd = ing.parse_date(question_date, where="question_date") if question_date is not None else None
        hits = self.search(scope, query, k, question_date=qd)
        return build_context(query, hits, token_budget, question_date=qd)

    # -- administration ----------------------------------------------------------------------------------------
    def stats(self, scope: ScopeLike) -> ScopeStats:
        s = as_scope(scope)
        if not self.pool.exists(s):
            return ScopeStats(
                scope=s, sessions=0, messages=0, rounds=0, embedder_id=self.embedder.id, dim=self.embedder.dim
            )
        with self.pool.acquire(s, create=False) as db:
            c = q.counts(db)
        path = self.pool.path_for(s)
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
        return ScopeStats(
            scope=s,
            sessions=c["Session"],
            messages=c["Message"],
            rounds=c["Round"],
            facts=c["Fact"],
            events=c["Event"],
            entities=c["Entity"],
            disk_bytes=size,
            embedder_id=self.embedder.id,
            dim=self.embedder.dim,
        )

    def sessions(self, scope: ScopeLike, *, limit: int = 1000, offset: int = 0) -> list[Session]:
        s = as_scope(scope)
        if not self.pool.exists(s):
            return []
        with self.pool.acquire(s, create=False) as db:
            return q.list_sessions(db, limit=limit, offset=offset)

    def get_session(self, scope: ScopeLike, session_id: str) -> Session:
        s = as_scope(scope)
        try:
            with self.pool.acquire(s, create=False) as db:
                found = q.get_session(db, session_id)
        except NotFound:
            found = None
        if found is None:
            raise NotFound(f"no session {session_id!r} in scope {s}")
        return found

    def export_sessions(self, scope: ScopeLike) -> list[Session]:
        """Every session with its messages, oldest first: the portable form of a scope's raw history."""
        s = as_scope(scope)
        return [self.get_session(s, x.id) for x in self.sessions(s, limit=10**9)]

    def forget(self, scope: ScopeLike) -> bool:
        """Erase a scope entirely (its database files). Returns whether anything was stored."""
        return self.pool.drop(as_scope(scope))

    def scopes(self) -> list[Scope]:
        return self.pool.scopes()
