"""A whole scope as portable data, and back: ``read_scope`` builds a ``ScopeExport``; ``check`` and
``graph_write`` turn one into the rows extraction writes.

Why a second export next to the sessions-only one: after months, a scope's value is not only its history but what
was learned from it, and re-extracting a year of sessions costs LLM calls and may decide versions differently.
So the export carries every fact (superseded ones with their ``valid_to``/``expired_at``), the SUPERSEDES edges
with their stamps and reasons, events, entities and relations, and an import restores them as they were.
Restoring goes through ``store.facts.write_extraction`` like extraction itself (COPY inside one transaction), so
the indexes are maintained the way they always are. Vectors and full-text terms are not exported: they are
derived, and the importing store recomputes them with its embedder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from graphrecall.embed.base import Embedder
from graphrecall.errors import InvalidInput
from graphrecall.extract.extractor import event_terms
from graphrecall.models import (
    ExportedEvent,
    ExportedSession,
    RelatedEdge,
    Scope,
    ScopeExport,
    Session,
    SupersedesEdge,
    utcnow,
)
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.rows import EntityRecord
from graphrecall.text import index_terms

ALL = 10**9


def raw_scope(scope: Scope, sessions: Sequence[Session], *, embedder_id: str) -> ScopeExport:
    """The export of a scope that holds raw history only (one that still lives in its write log)."""
    return ScopeExport(
        org_id=scope.org_id,
        user_id=scope.user_id,
        embedder_id=embedder_id,
        exported_at=utcnow(),
        sessions=[
            ExportedSession(id=x.id, started_at=x.started_at, messages=list(x.messages)) for x in sessions
        ],
    )


def read_scope(db: ScopeDatabase, scope: Scope, *, embedder_id: str) -> ScopeExport:
    """Everything ``db`` holds, as plain data (the caller flushes the scope's write log first)."""
    states = fq.extraction_states(db)
    sessions = []
    for s in q.list_sessions(db, limit=ALL):
        full = q.get_session(db, s.id)
        status, error = states.get(s.id, ("none", None))
        known = status in ("none", "pending", "running", "done", "failed")
        sessions.append(
            ExportedSession.model_validate(
                {
                    "id": s.id,
                    "started_at": s.started_at,
                    "extract_status": status if known else "none",
                    "extract_error": error,
                    "messages": full.messages if full is not None else [],
                }
            )
        )
    links = fq.event_entities(db)
    events = [
        ExportedEvent(
            **e.model_dump(),
            subject_ids=links.get(e.id, ([], []))[0],
            object_ids=links.get(e.id, ([], []))[1],
        )
        for e in fq.list_events(db, limit=ALL)
    ]
    return ScopeExport(
        org_id=scope.org_id,
        user_id=scope.user_id,
        embedder_id=embedder_id,
        exported_at=utcnow(),
        sessions=sessions,
        entities=fq.list_entities(db),
        facts=fq.list_facts(db, as_of=None, include_superseded=True, limit=ALL, offset=0),
        supersedes=[
            SupersedesEdge(new_id=n, old_id=o, at=at, reason=r) for n, o, at, r in fq.supersedes_edges(db)
        ],
        events=events,
        relations=[
            RelatedEdge(source=a, target=b, predicate=p, fact_id=f) for a, b, p, f in fq.related_edges(db)
        ],
    )


def graph_ids(doc: ScopeExport) -> dict[str, list[str]]:
    """The node ids of the export's extracted memory, by table."""
    return {
        "Fact": [f.id for f in doc.facts],
        "Event": [e.id for e in doc.events],
        "Entity": [e.id for e in doc.entities],
    }


def check(doc: ScopeExport) -> None:
    """Every reference inside the export resolves (a message, entity or fact it names is in it), every id is
    unique, and every superseded fact has the edge that superseded it: a broken file is refused as a whole,
    naming the item, before anything is written."""
    messages: set[str] = set()
    for i, s in enumerate(doc.sessions):
        for j, m in enumerate(s.messages):
            if m.id is None:
                raise InvalidInput(
                    "exported messages carry their ids", where=f"sessions[{i}].messages[{j}].id"
                )
            messages.add(m.id)
    _unique([s.id for s in doc.sessions], "sessions")
    for table, key in (("Fact", "facts"), ("Event", "events"), ("Entity", "entities")):
        _unique(graph_ids(doc)[table], key)
    entities = {e.id for e in doc.entities}
    facts = {f.id for f in doc.facts}
    replaced = {e.old_id for e in doc.supersedes}
    for i, f in enumerate(doc.facts):
        _within(f.message_ids, messages, f"facts[{i}].message_ids", "message")
        _within(f.entity_ids, entities, f"facts[{i}].entity_ids", "entity")
        if (f.expired_at is not None or f.valid_to is not None) and f.id not in replaced:
            raise InvalidInput(
                "a superseded fact needs the SUPERSEDES edge that replaced it", where=f"facts[{i}]"
            )
    for i, e in enumerate(doc.events):
        _within(e.message_ids, messages, f"events[{i}].message_ids", "message")
        _within([*e.subject_ids, *e.object_ids], entities, f"events[{i}]", "entity")
    for i, r in enumerate(doc.relations):
        _within([r.source, r.target], entities, f"relations[{i}]", "entity")
    for i, x in enumerate(doc.supersedes):
        _within([x.new_id, x.old_id], facts, f"supersedes[{i}]", "fact")


def _unique(ids: Iterable[str], where: str) -> None:
    dup = [x for x, n in Counter(ids).items() if n > 1]
    if dup:
        raise InvalidInput(f"id {dup[0]!r} appears twice", where=where)


def _within(ids: Iterable[str], known: set[str], where: str, what: str) -> None:
    missing = [x for x in ids if x not in known]
    if missing:
        raise InvalidInput(f"names {what} {missing[0]!r}, which the file does not hold", where=where)


def graph_write(doc: ScopeExport, embedder: Embedder) -> fq.ExtractionWrite:
    """The export's extracted memory as one ``ExtractionWrite``: nodes with freshly computed vectors and terms,
    their edges, and each SUPERSEDES edge as the supersession that sets the old fact's ``valid_to`` and
    ``expired_at`` to the exported values. ``check`` first."""
    texts = [e.name for e in doc.entities] + [f.text for f in doc.facts] + [e.text for e in doc.events]
    vecs = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), dtype=np.float32)
    n_ent, n_fact = len(doc.entities), len(doc.facts)
    write = fq.ExtractionWrite(session_id="import")
    write.new_entities = [
        EntityRecord(id=e.id, name=e.name, type=e.type, aliases=list(e.aliases), vec=v, stored=False)
        for e, v in zip(doc.entities, vecs[:n_ent], strict=True)
    ]
    write.facts = [
        fq.FactRow(
            id=f.id,
            text=f.text,
            terms=index_terms(f.text),
            kind=f.kind.value,
            polarity=f.polarity,
            confidence=f.confidence,
            valid_from=f.valid_from,
            recorded_at=f.recorded_at,
            last_seen=f.last_seen,
            session_id=f.session_id,
            message_ids=list(f.message_ids),
            entity_ids=list(f.entity_ids),
            vec=v,
            reinforcement=f.reinforcement,
            key=f.key,
        )
        for f, v in zip(doc.facts, vecs[n_ent : n_ent + n_fact], strict=True)
    ]
    write.events = [
        fq.EventRow(
            id=e.id,
            subject=e.subject,
            verb=e.verb,
            object=e.object,
            text=e.text,
            terms=event_terms(e.text, e.subject, e.verb, e.object),
            time_start=e.time_start,
            time_end=e.time_end,
            session_id=e.session_id,
            message_ids=list(e.message_ids),
            subject_ids=list(e.subject_ids),
            object_ids=list(e.object_ids),
            vec=v,
        )
        for e, v in zip(doc.events, vecs[n_ent + n_fact :], strict=True)
    ]
    write.related = [(r.source, r.target, r.predicate, r.fact_id) for r in doc.relations]
    old = {f.id: f for f in doc.facts}
    for x in doc.supersedes:
        was = old[x.old_id]
        expired = was.expired_at or x.at or utcnow()
        write.supersessions.append(
            fq.Supersession(x.old_id, x.new_id, was.valid_to, expired, x.reason, at=x.at or expired)
        )
    return write
