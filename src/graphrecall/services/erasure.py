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
import re
from collections.abc import Sequence

from graphrecall.errors import NotFound
from graphrecall.events import EventHub
from graphrecall.models import ErasedItem, Erasure, Scope
from graphrecall.params import EraseParams
from graphrecall.services.access import ScopeAccess
from graphrecall.services.knowledge import KnowledgeService
from graphrecall.store import erase as erase_store
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.text import index_terms, query_terms
from graphrecall.writer import Writer

ITEMS_LIMIT = 1000
"""Most records an ``Erasure`` lists with their text: an erase of years of sessions would otherwise answer with
megabytes of chat; the id lists stay complete and ``items_omitted`` counts the rest."""
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


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
            # Read the texts before anything is deleted: the erase's answer says what went, not only ids.
            items, omitted = _items(db, plan, p, sessions, matched) if not plan.empty() else ([], 0)
            if not p.dry_run and not plan.empty():
                erase_store.apply(db, plan)
                self.knowledge.forget(scope, plan.sessions)
        whole = [i for i in items if i.beyond_match]
        warnings = (
            [
                f"{len(whole)} message(s) go whole although only part of them holds {p.matching!r}: "
                "an erase by words takes every message of a matching round, with all it says"
            ]
            if whole
            else []
        )
        erased = Erasure(
            scope=scope,
            dry_run=p.dry_run,
            items=items,
            items_omitted=omitted,
            warnings=warnings,
            **dataclasses.asdict(plan),
        )
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


def _items(
    db: ScopeDatabase,
    plan: erase_store.ErasePlan,
    p: EraseParams,
    named_sessions: Sequence[str],
    matched: erase_store.Matched,
) -> tuple[list[ErasedItem], int]:
    """Every record of the plan with its text and the reason it goes, read through the store's own readers (at
    most ``ITEMS_LIMIT``; the count of the rest is returned beside them)."""
    direct_sessions, named_facts = set(named_sessions), set(p.fact_ids or [])
    named = set(p.session_ids or [])
    matched_messages, matched_facts = set(matched.messages), set(matched.facts)
    matched_events = set(matched.events)
    said = f"its round holds {p.matching!r}" if p.matching else ""
    wanted = set((query_terms(p.matching) if p.matching else "").split())
    items: list[ErasedItem] = []
    # Messages are read session by session (the store reads a session's messages through its edges); the
    # sessions are the erased ones and those of the erased rounds.
    rounds = q.kuzu_rounds(db, plan.rounds)
    holders = list(dict.fromkeys([*plan.sessions, *(r.session_id for r in rounds.values())]))
    gone = set(plan.messages)
    for sid in holders:
        rows = q.session_messages(db, sid)
        if sid in plan.sessions:
            started = fq.session_date(db, sid)
            why = (
                "named" if sid in named
                else f"started before {p.before:%Y-%m-%d %H:%M}" if sid in direct_sessions and p.before
                else "every message of it goes"
            )  # fmt: skip
            items.append(
                ErasedItem(kind="session", id=sid, text=f"{len(rows)} message(s)", date=started, reason=why)
            )
        for m in rows:
            if m.id not in gone:
                continue
            if m.id in matched_messages and sid not in direct_sessions:
                beyond = bool(wanted) and any(
                    not wanted <= set(index_terms(part).split())
                    for part in _SENTENCE_END.split(m.text)
                    if part.strip()
                )
                why = said
            else:
                beyond, why = False, "in an erased session"
            items.append(
                ErasedItem(kind="message", id=m.id, text=m.text, session_id=sid, date=m.at, reason=why,
                           beyond_match=beyond)
            )  # fmt: skip
    for f in fq.get_facts(db, plan.facts).values():
        why = (
            "named" if f.id in named_facts
            else f"its text holds {p.matching!r}" if f.id in matched_facts
            else "extracted from an erased message"
        )  # fmt: skip
        items.append(
            ErasedItem(
                kind="fact", id=f.id, text=f.text, session_id=f.session_id, date=f.valid_from, reason=why
            )
        )
    for eid, (text, session_id, date, _) in fq.fetch_nodes(db, "Event", plan.events).items():
        why = (
            f"its text holds {p.matching!r}" if eid in matched_events else "extracted from an erased message"
        )
        items.append(
            ErasedItem(kind="event", id=eid, text=text, session_id=session_id, date=date, reason=why)
        )
    orphans = set(plan.entities)
    for e in fq.list_entities(db) if orphans else []:
        if e.id in orphans:
            items.append(ErasedItem(kind="entity", id=e.id, text=e.name, reason="nothing left mentions it"))
    return items[:ITEMS_LIMIT], max(0, len(items) - ITEMS_LIMIT)
