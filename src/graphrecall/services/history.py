"""Reading a scope's raw history and its whole contents: counts, sessions, one session, exports.

A scope that lives in its write log is read from the log's tail; any other is read from Kuzu after its log is
flushed (``ScopeAccess.raw``). Sessions carry the background extraction queue's state, so a caller sees
``pending`` / ``running`` / ``failed`` without asking the queue.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from graphrecall import exchange
from graphrecall.embed import Embedder
from graphrecall.errors import NotFound
from graphrecall.models import ExtractionJob, Scope, ScopeExport, ScopeStats, Session
from graphrecall.services.access import ScopeAccess
from graphrecall.services.paging import past_the_end
from graphrecall.store import rounds as q

Jobs = Callable[[Scope], list[ExtractionJob]]

EVERY = 10**9
"""A limit that means "all of them", for exports."""


class HistoryService:
    def __init__(self, access: ScopeAccess, embedder: Embedder, jobs: Jobs) -> None:
        self.access = access
        self.embedder = embedder
        self._jobs = jobs

    def stats(self, scope: Scope) -> ScopeStats:
        """Counts by kind and bytes on disk; a scope that holds nothing counts zero everywhere."""
        model = ScopeStats(
            scope=scope, sessions=0, messages=0, rounds=0, embedder_id=self.embedder.id, dim=self.embedder.dim
        )
        if not self.access.stored(scope):
            return model

        def resident() -> dict[str, int] | None:
            counts = self.access.logs.resident_counts(scope)
            return None if counts is None else {"Fact": 0, "Event": 0, "Entity": 0, **counts}

        c = self.access.raw(scope, resident=resident, kuzu=q.counts)
        return model.model_copy(
            update={
                "sessions": c["Session"],
                "messages": c["Message"],
                "rounds": c["Round"],
                "facts": c["Fact"],
                "events": c["Event"],
                "entities": c["Entity"],
                "disk_bytes": self.access.disk_bytes(scope),
            }
        )

    def sessions(self, scope: Scope, *, limit: int, offset: int = 0) -> list[Session]:
        """Sessions without their messages, oldest first, with the extraction queue's state."""
        if not self.access.stored(scope):
            return []

        def resident() -> list[Session] | None:
            found = self.access.logs.resident_sessions(scope)
            if found is None:
                return None
            return [x.model_copy(update={"messages": []}) for x in found[offset : offset + limit]]

        found = self.access.raw(
            scope,
            resident=resident,
            kuzu=lambda db: (
                [] if past_the_end(db, "Session", offset) else q.list_sessions(db, limit=limit, offset=offset)
            ),
        )
        queued = {j.session_id: j for j in self._jobs(scope) if j.status != "done"}
        return [
            x.model_copy(update={"extract_status": queued[x.id].status}) if x.id in queued else x
            for x in found
        ]

    def get_session(self, scope: Scope, session_id: str) -> Session:
        def resident() -> list[Session] | None:
            found = self.access.logs.resident_sessions(scope)
            return None if found is None else [x for x in found if x.id == session_id]

        found: list[Session] = []
        with contextlib.suppress(NotFound):  # no database, or no such session in it
            found = self.access.raw(
                scope,
                resident=resident,
                kuzu=lambda db: [x for x in [q.get_session(db, session_id)] if x is not None],
            )
        if not found:
            raise NotFound(f"no session {session_id!r} in scope {scope}")
        return found[0]

    def export_sessions(self, scope: Scope) -> list[Session]:
        """Every session with its messages, oldest first: the portable form of a scope's raw history."""
        return [self.get_session(scope, x.id) for x in self.sessions(scope, limit=EVERY)]

    def export_scope(self, scope: Scope) -> ScopeExport:
        """Everything the scope holds as plain data (``exchange.read_scope``); a scope that lives in its log has
        raw history only, since nothing was extracted from it."""
        return self.access.raw(
            scope,
            resident=lambda: (
                None
                if (found := self.access.logs.resident_sessions(scope)) is None
                else exchange.raw_scope(scope, found, embedder_id=self.embedder.id)
            ),
            kuzu=lambda db: exchange.read_scope(db, scope, embedder_id=self.embedder.id),
        )
