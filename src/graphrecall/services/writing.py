"""Writing chat history: sessions and turns, bulk batches, and the passage backfill.

The service owns the order of a write: the scope's write lock (``ScopeAccess.writes``), the database it is planned
against (the scope's own, or the pool's empty one while the scope lives in its log), and the one retry a write
needs when the scope moves from its log into Kuzu while it was being planned (``writer.Graduated``, once in a
scope's life). What a batch adds and how it is embedded is the ``Writer``'s job; what is valid input was decided at
the edge (``graphrecall.params``), so everything here receives parsed dates and validated messages.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from graphrecall.embed import Embedder
from graphrecall.embed.passages import passage_chars, passage_vectors
from graphrecall.errors import NotFound
from graphrecall.events import EventHub
from graphrecall.models import IngestResult, Message, Scope
from graphrecall.params import (
    AddMessagesParams,
    AddSessionParams,
    AddSessionsParams,
    ImportSessionsParams,
    SessionItem,
)
from graphrecall.services.access import ScopeAccess
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.writer import Graduated, Writer

Progress = Callable[[int, int], None]

BACKFILL_PAGE = 64
"""Rounds embedded and written per transaction by ``backfill_passages``."""


def _messages(validated: Sequence[Message]) -> list[Message]:
    return list(validated)


@dataclass(frozen=True)
class WritingService:
    access: ScopeAccess
    writer: Writer
    embedder: Embedder
    hub: EventHub = field(default_factory=EventHub)

    def _stored(self, scope: Scope, session_ids: list[str], result: IngestResult) -> IngestResult:
        """``session.stored`` once a write is acknowledged, when it added anything (``graphrecall.events``)."""
        if result.sessions_added or result.messages_added:
            self.hub.emit(
                "session.stored",
                scope,
                session_ids=session_ids,
                sessions_added=result.sessions_added,
                messages_added=result.messages_added,
            )
        return result

    def _write(self, scope: Scope, run: Callable[[ScopeDatabase], IngestResult]) -> IngestResult:
        """``run`` one write under the scope's write lock, against its database or, while the scope lives in its
        write log, the empty one; planned again if the scope moved into Kuzu meanwhile."""
        while True:
            with self.access.writes(scope), self.access.logs.writing(scope) as db:
                try:
                    return run(db)
                except Graduated:
                    continue

    def add_sessions(
        self, scope: Scope, p: AddSessionsParams, progress: Progress | None = None
    ) -> IngestResult:
        """Write validated sessions, ``p.batch_sessions`` per transaction (each all or nothing)."""
        items: list[tuple[str, list[Message], datetime | None]] = [
            (s.session_id, _messages(s.messages), s.date) for s in p.sessions
        ]
        total = IngestResult()
        for start in range(0, len(items), p.batch_sessions):
            batch = items[start : start + p.batch_sessions]
            done = self._write(scope, functools.partial(self.writer.write, scope=scope, batch=batch))
            total = total + self._stored(scope, [sid for sid, _, _ in batch], done)
            if progress is not None:
                progress(min(start + p.batch_sessions, len(items)), len(items))
        return total

    def add_session(self, scope: Scope, p: AddSessionParams) -> IngestResult:
        """One whole session: a bulk write of one (through the log when it is small, like any batch)."""
        one = SessionItem(session_id=p.session_id, date=p.date, messages=p.messages)
        return self.add_sessions(scope, AddSessionsParams(sessions=[one]))

    def import_sessions(self, scope: Scope, p: ImportSessionsParams) -> IngestResult:
        """Sessions in the export format, written like ``add_sessions``."""
        items = [{"session_id": x.id, "date": x.started_at, "messages": x.messages} for x in p.sessions]
        return self.add_sessions(scope, AddSessionsParams.model_validate({"sessions": items}))

    def add_messages(self, scope: Scope, p: AddMessagesParams) -> IngestResult:
        """Append turns to a session: those without ids are numbered after the messages already stored (flushed
        or not), under the same lock that numbers them."""

        def append(db: ScopeDatabase) -> IngestResult:
            start = self.writer.next_index(db, scope, p.session_id)
            numbered: list[Message] = [
                m if m.id else m.model_copy(update={"idx": start + i}) for i, m in enumerate(p.messages)
            ]
            return self.writer.write(
                db, scope, [(p.session_id, numbered, p.date)], start_idx={p.session_id: start}
            )

        return self._stored(scope, [p.session_id], self._write(scope, append))

    def flush_all(self) -> None:
        self.access.logs.flush_all()

    def backfill_passages(self, scope: Scope) -> int:
        """Give passage vectors to the scope's long user turns that have none (stored before schema 4, or under a
        higher ``passage_from_chars``). A page of rounds is embedded outside the scope's lock (writes go on
        meanwhile) and written in one transaction for the rounds still unchanged; returns how many got passages."""
        if not self.access.stored(scope):
            raise NotFound(f"scope {scope} has no memory")
        window = passage_chars(self.embedder)
        if window is None:  # an embedder without a window (the hashing one) keeps no passages
            return 0
        from_chars = self.writer.passage_from_chars
        longer_than = min(window, from_chars)
        done, after = 0, ""
        while True:
            with self.access.flushed(scope) as db:
                page = q.rounds_without_passages(db, longer_than, BACKFILL_PAGE, after)
            if not page:
                return done
            parts = passage_vectors(self.embedder, [text for _, text in page], from_chars=from_chars)
            with self.access.writes(scope), self.access.flushed(scope) as db:
                ids = [rid for rid, _ in page]
                still = dict(q.rounds_without_passages(db, longer_than, len(ids), among=ids))
                kept = [
                    (rid, v) for (rid, text), v in zip(page, parts, strict=True) if still.get(rid) == text
                ]
                with db.write() as txn:
                    q.write_passages(txn, kept, self.embedder.dim)
            done += sum(v is not None for _, v in kept)
            after = page[-1][0]
