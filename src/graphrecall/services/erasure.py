"""Forgetting: part of a scope (``erase``: sessions, facts, everything before a date or matching some words,
with everything derived from them) or all of it (``forget``).

An erase holds the scope's knowledge lock and then its write lock (``ScopeAccess``'s order), so it never
interleaves with an extraction that is turning the erased messages into facts, nor with a consolidation or a
supersession that planned against the erased facts: what is erased stays erased. ``forget`` deletes the scope's
files; it waits for requests that hold the database (``DatabasePool.drop``) but not for a running extraction,
which then finds the scope gone.
"""

from __future__ import annotations

import dataclasses

from graphrecall.errors import NotFound
from graphrecall.events import EventHub
from graphrecall.models import Erasure, Scope
from graphrecall.params import EraseParams
from graphrecall.services.access import ScopeAccess
from graphrecall.services.knowledge import KnowledgeService
from graphrecall.store import erase as erase_store
from graphrecall.store import rounds as q
from graphrecall.text import query_terms
from graphrecall.writer import Writer


@dataclasses.dataclass(frozen=True)
class ErasureService:
    access: ScopeAccess
    writer: Writer
    knowledge: KnowledgeService
    hub: EventHub = dataclasses.field(default_factory=EventHub)

    def erase(self, scope: Scope, p: EraseParams) -> Erasure:
        """Unknown ids raise ``NotFound`` before anything is deleted; ``dry_run`` reports the same lists."""
        if not self.access.stored(scope):
            raise NotFound(f"scope {scope} has no memory")
        session_ids, fact_ids = p.session_ids or [], p.fact_ids or []
        with self.access.knowledge(scope), self.access.writes(scope), self.access.flushed(scope) as db:
            for table, ids in (("Session", session_ids), ("Fact", fact_ids)):
                unknown = sorted(set(ids) - q.existing_ids(db, table, ids))
                if unknown:
                    raise NotFound(f"no {table.lower()} {', '.join(map(repr, unknown))} in {scope}")
            sessions = list(session_ids) + (erase_store.sessions_before(db, p.before) if p.before else [])
            matched = (
                erase_store.matching(db, query_terms(p.matching))
                if p.matching
                else erase_store.Matched([], [], [])
            )
            plan = erase_store.plan(
                db,
                sessions=sessions,
                messages=matched.messages,
                facts=[*fact_ids, *matched.facts],
                events=matched.events,
            )
            if not p.dry_run and not plan.empty():
                erase_store.apply(db, plan)
                self.knowledge.forget(scope, plan.sessions)
        erased = Erasure(scope=scope, dry_run=p.dry_run, **dataclasses.asdict(plan))
        if not p.dry_run and not plan.empty():
            self.hub.emit("memory.erased", scope, **{k: len(v) for k, v in dataclasses.asdict(plan).items()})
        return erased

    def forget(self, scope: Scope) -> bool:
        """Erase a scope entirely (its database, derived indexes and write log); whether anything was stored."""
        resident = self.access.resident(scope)  # all it holds is in its log
        self.access.logs.drop(scope)
        self.knowledge.forget(scope)
        erased = self.access.pool.drop(scope) or resident
        if erased:
            self.hub.emit("scope.erased", scope)
        return erased
