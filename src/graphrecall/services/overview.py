"""What an operator looks at (the web console, ``graphrecall scopes``): an organisation's users at a glance, one
user's memory as a graph, and one user's extraction queue.

Why a service of its own: these reads cut across the others (counts from history, jobs from knowledge, files from
access) and each answers one page at a time, so a console stays fast on an organisation of thousands of users and
on a user of 10,000 rounds: ``list_scopes`` opens only the listed users' databases, ``graph`` reads a page of facts
and events and only the entities and edges among them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from graphrecall.models import (
    ExtractionQueue,
    Fact,
    GraphEdge,
    GraphNode,
    MemoryGraph,
    Scope,
    ScopePage,
    ScopeSummary,
)
from graphrecall.params import ExtractionQueueParams, GraphParams, ListScopesParams
from graphrecall.services.access import ScopeAccess
from graphrecall.services.history import HistoryService
from graphrecall.services.knowledge import KnowledgeService
from graphrecall.services.paging import past_the_end
from graphrecall.store import facts as fq

EVERY_FACT = 10**9


class OverviewService:
    def __init__(self, access: ScopeAccess, history: HistoryService, knowledge: KnowledgeService) -> None:
        self.access = access
        self.history = history
        self.knowledge = knowledge

    def list_scopes(self, p: ListScopesParams) -> ScopePage:
        """The organisation's users whose id holds ``contains``, by id; only the page's users are opened."""
        users = sorted(
            (
                s
                for s in self.access.scopes()
                if s.org_id == p.org_id and (not p.contains or p.contains in s.user_id)
            ),
            key=lambda s: s.user_id,
        )
        page = users[p.offset : p.offset + p.limit]
        return ScopePage(
            org_id=p.org_id, total=len(users), offset=p.offset, scopes=[self.summary(s) for s in page]
        )

    def summary(self, scope: Scope) -> ScopeSummary:
        stats = self.history.stats(scope)
        jobs = self.knowledge.jobs(scope)
        stamp = self.access.last_write(scope)
        return ScopeSummary(
            scope=scope,
            sessions=stats.sessions,
            rounds=stats.rounds,
            facts=stats.facts,
            events=stats.events,
            entities=stats.entities,
            disk_bytes=stats.disk_bytes,
            last_write=None if stamp is None else datetime.fromtimestamp(stamp, UTC).replace(tzinfo=None),
            backlog=sum(j.status in ("pending", "running") for j in jobs),
            failed=sum(j.status == "failed" for j in jobs),
        )

    def graph(self, scope: Scope, p: GraphParams) -> MemoryGraph:
        """A page of facts (oldest valid first) and events (in time order) with the entities they name; with
        ``entity``, only those linked to it. Edges are kept when both ends are in the page."""
        out = MemoryGraph(scope=scope)
        if not self.access.has_database(scope):
            return out
        with self.access.database(scope) as db:
            if p.entity is None:
                # A page past the end is empty without asking Kuzu, whose SKIP far past the rows crashes the
                # process (services/paging.py; the contract run found it here too).
                facts = [] if past_the_end(db, "Fact", p.offset) else fq.list_facts(
                    db, as_of=p.as_of, include_superseded=p.include_superseded, limit=p.limit + 1,
                    offset=p.offset,
                )  # fmt: skip
                events = (
                    []
                    if past_the_end(db, "Event", p.offset)
                    else fq.list_events(db, limit=p.limit + 1, offset=p.offset)
                )
                roles = fq.event_entities(db)
            else:
                every = fq.list_facts(
                    db, as_of=p.as_of, include_superseded=p.include_superseded, limit=EVERY_FACT, offset=0
                )
                facts = [f for f in every if p.entity in f.entity_ids][p.offset : p.offset + p.limit + 1]
                roles = fq.event_entities(db)
                linked = [e for e, (subj, obj) in roles.items() if p.entity in subj or p.entity in obj]
                events = [
                    e for e in fq.list_events(db, limit=EVERY_FACT) if e.id in set(linked)
                ][p.offset : p.offset + p.limit + 1]  # fmt: skip
            out.more = len(facts) > p.limit or len(events) > p.limit
            facts, events = facts[: p.limit], events[: p.limit]
            entities = {e.id: e for e in fq.list_entities(db)}
            related = fq.related_edges(db)
            supersedes = fq.supersedes_edges(db)
        named: dict[str, None] = dict.fromkeys([p.entity] if p.entity in entities else [])
        for f in facts:
            out.nodes.append(_fact_node(f))
            for eid in f.entity_ids:
                named[eid] = None
                out.edges.append(GraphEdge(source=f.id, target=eid, kind="about"))
        for ev in events:
            out.nodes.append(
                GraphNode(id=ev.id, kind="event", label=ev.text, type="event", session_id=ev.session_id,
                          message_ids=ev.message_ids, date=ev.time_start)
            )  # fmt: skip
            subj, obj = roles.get(ev.id, ([], []))
            for kind, ids in (("subject", subj), ("object", obj)):
                for eid in ids:
                    named[eid] = None
                    out.edges.append(GraphEdge(source=ev.id, target=eid, kind=kind))  # type: ignore[arg-type]
        for eid in named:
            if eid in entities:
                e = entities[eid]
                out.nodes.append(GraphNode(id=e.id, kind="entity", label=e.name, type=e.type))
        present = {n.id for n in out.nodes}
        out.edges = [e for e in out.edges if e.target in present]
        for source, target, predicate, _ in related:
            if source in present and target in present:
                out.edges.append(GraphEdge(source=source, target=target, kind="related", label=predicate))
        for new, old, _, reason in supersedes:
            if new in present and old in present:
                out.edges.append(GraphEdge(source=new, target=old, kind="supersedes", label=reason))
        return out

    def extraction_queue(self, scope: Scope, p: ExtractionQueueParams) -> ExtractionQueue:
        """The scope's jobs newest first (what an operator looks for: what failed lately, what waits)."""
        jobs = self.knowledge.jobs(scope)
        counts = {"pending": 0, "running": 0, "done": 0, "failed": 0}
        for j in jobs:
            counts[j.status] += 1
        chosen = [j for j in reversed(jobs) if p.status is None or j.status == p.status]
        return ExtractionQueue(
            scope=scope, counts=counts, total=len(chosen), jobs=chosen[p.offset : p.offset + p.limit]
        )


def _fact_node(f: Fact) -> GraphNode:
    return GraphNode(
        id=f.id, kind="fact", label=f.text, type=f.kind.value, session_id=f.session_id,
        message_ids=f.message_ids, date=f.valid_from, current=f.current,
    )  # fmt: skip
