"""Queries over extracted memory: facts (versioned), events, entities, and the edges that tie them to messages.

Writes happen inside the caller's ``db.write()`` transaction, so one session's extraction lands all at once or
not at all. Nodes go in through ``COPY`` (bulk, and the only write that never ``SET``s an indexed embedding);
superseding a fact only ``SET``s unindexed columns (``valid_to``, ``expired_at``) and adds a ``SUPERSEDES`` edge:
nothing extracted is ever deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from graphrecall.embed.base import Vectors
from graphrecall.models import Entity, Event, Fact, FactKind
from graphrecall.names import normalize_name
from graphrecall.store.arrow import TS, edge_table, vector_column
from graphrecall.store.database import MATCH_SCOPE, ScopeDatabase, WriteTxn, owned
from graphrecall.store.known import (
    existing_ids as existing_ids,  # extraction and import check ids through here
)
from graphrecall.store.rows import EntityRecord
from graphrecall.store.rows import EventRow as EventRow  # extraction builds them as ``store.facts`` rows
from graphrecall.store.rows import FactRow as FactRow
from graphrecall.store.visibility import event_condition, fact_condition

FACT_COLS = (
    "f.id, f.text, f.kind, f.polarity, f.confidence, f.valid_from, f.valid_to, f.recorded_at, f.expired_at, "
    "f.last_seen, f.session_id, f.message_ids, f.reinforcement, f.fact_key, f.disputed_at, f.dispute_note"
)


SUMMARY_PREFIX = "fsum_"
"""Ids of period summaries (``extract.consolidate``): facts about a stretch of time, not statements to version a new
fact against, so versioning never offers them as candidates (nor does consolidation cluster them)."""
NOT_SUMMARY = f"NOT starts_with(f.id, '{SUMMARY_PREFIX}')"


@dataclass
class Reinforcement:
    """A DUPLICATE: the stored fact gains confidence, a later ``last_seen``, the new source messages and ``count``
    more observations (``Fact.reinforcement``)."""

    fact_id: str
    confidence: float
    last_seen: datetime
    message_ids: list[str]
    count: int = 1


@dataclass
class Supersession:
    """``new_id`` replaces ``old_id``. ``at`` stamps the edge: by default ``expired_at`` (the same moment); an
    import passes the exported edge's own stamp."""

    old_id: str
    new_id: str
    valid_to: datetime | None
    expired_at: datetime
    reason: str
    at: datetime | None = None


@dataclass
class ExtractionWrite:
    """Everything one session's extraction writes."""

    session_id: str
    facts: list[FactRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    new_entities: list[EntityRecord] = field(default_factory=list)
    alias_updates: list[EntityRecord] = field(default_factory=list)
    related: list[tuple[str, str, str, str]] = field(default_factory=list)  # (src, dst, predicate, fact_id)
    reinforcements: list[Reinforcement] = field(default_factory=list)
    supersessions: list[Supersession] = field(default_factory=list)


def _ts(values: Iterable[datetime | None]) -> pa.Array:
    return pa.array(list(values), TS)


def _edges(txn: WriteTxn, table: str, pairs: Sequence[tuple[str, str]]) -> None:
    if pairs:
        txn.copy(table, edge_table(pairs))


# -- writes ----------------------------------------------------------------------------------------------------
def write_extraction(txn: WriteTxn, w: ExtractionWrite, *, dim: int) -> None:
    """Write one session's extraction (nodes, edges, reinforcements, supersessions) in the caller's txn."""
    if w.new_entities:
        txn.copy(
            "Entity",
            pa.table(
                {
                    "id": [e.id for e in w.new_entities],
                    "name": [e.name for e in w.new_entities],
                    "norm": [_norm(e.name) for e in w.new_entities],
                    "type": [e.type for e in w.new_entities],
                    "aliases": pa.array([e.aliases for e in w.new_entities], pa.list_(pa.string())),
                    "embedding": vector_column([_require_vec(e) for e in w.new_entities], dim),
                }
            ),
        )
    for e in w.alias_updates:
        txn.execute(
            "MATCH (e:Entity {key: $k}) SET e.aliases = $a", {"k": txn.key(e.id), "a": list(e.aliases)}
        )
    if w.facts:
        n = len(w.facts)
        txn.copy(
            "Fact",
            pa.table(
                {
                    "id": [f.id for f in w.facts],
                    "text": [f.text for f in w.facts],
                    "terms": [f.terms for f in w.facts],
                    "kind": [f.kind for f in w.facts],
                    "polarity": [f.polarity for f in w.facts],
                    "confidence": pa.array([f.confidence for f in w.facts], pa.float64()),
                    "valid_from": _ts(f.valid_from for f in w.facts),
                    "valid_to": _ts([None] * n),
                    "recorded_at": _ts(f.recorded_at for f in w.facts),
                    "expired_at": _ts([None] * n),
                    "last_seen": _ts(f.last_seen for f in w.facts),
                    "session_id": [f.session_id for f in w.facts],
                    "message_ids": pa.array([f.message_ids for f in w.facts], pa.list_(pa.string())),
                    "embedding": vector_column([f.vec for f in w.facts], dim),
                    "reinforcement": pa.array([max(1, f.reinforcement) for f in w.facts], pa.int64()),
                    "fact_key": pa.array([f.key for f in w.facts], pa.string()),
                }
            ),
        )
        _edges(txn, "FACT_FROM", [(f.id, m) for f in w.facts for m in f.message_ids])
        _edges(txn, "ABOUT", [(f.id, e) for f in w.facts for e in dict.fromkeys(f.entity_ids)])
    if w.events:
        txn.copy(
            "Event",
            pa.table(
                {
                    "id": [e.id for e in w.events],
                    "subject": [e.subject for e in w.events],
                    "verb": [e.verb for e in w.events],
                    "object": [e.object for e in w.events],
                    "text": [e.text for e in w.events],
                    "terms": [e.terms for e in w.events],
                    "time_start": _ts(e.time_start for e in w.events),
                    "time_end": _ts(e.time_end for e in w.events),
                    "session_id": [e.session_id for e in w.events],
                    "message_ids": pa.array([e.message_ids for e in w.events], pa.list_(pa.string())),
                    "embedding": vector_column([e.vec for e in w.events], dim),
                }
            ),
        )
        _edges(txn, "EVENT_FROM", [(e.id, m) for e in w.events for m in e.message_ids])
        _edges(txn, "SUBJECT", [(e.id, x) for e in w.events for x in dict.fromkeys(e.subject_ids)])
        _edges(txn, "OBJECT", [(e.id, x) for e in w.events for x in dict.fromkeys(e.object_ids)])
    if w.related:
        txn.copy(
            "RELATED",
            pa.table(
                {
                    "from": [s for s, _, _, _ in w.related],
                    "to": [d for _, d, _, _ in w.related],
                    "predicate": [p for _, _, p, _ in w.related],
                    "fact_id": [f for _, _, _, f in w.related],
                }
            ),
        )
    for r in w.reinforcements:
        reinforce(txn, r)
    for s in w.supersessions:
        supersede(txn, s)


def _require_vec(e: EntityRecord) -> Vectors:
    if e.vec is None:
        raise ValueError(f"entity {e.id} has no embedding")
    return e.vec


def _norm(name: str) -> str:
    return normalize_name(name)


def reinforce(txn: WriteTxn, r: Reinforcement) -> None:
    rows = txn.execute(
        "MATCH (f:Fact {key: $k}) RETURN f.message_ids, f.last_seen", {"k": txn.key(r.fact_id)}
    )
    if not rows:
        return
    old_ids: list[str] = list(rows[0][0] or [])
    added = [m for m in dict.fromkeys(r.message_ids) if m not in old_ids]
    last_seen = max(d for d in (rows[0][1], r.last_seen) if d is not None)
    txn.execute(
        "MATCH (f:Fact {key: $k}) SET f.confidence = $c, f.last_seen = $t, f.message_ids = $m, "
        "f.reinforcement = coalesce(f.reinforcement, 1) + $n",
        {
            "k": txn.key(r.fact_id),
            "c": r.confidence,
            "t": last_seen,
            "m": old_ids + added,
            "n": max(0, r.count),
        },
    )
    if added:
        txn.copy("FACT_FROM", edge_table([(r.fact_id, m) for m in added]))


def supersede(txn: WriteTxn, s: Supersession) -> None:
    txn.execute(
        "MATCH (o:Fact {key: $old}), (n:Fact {key: $new}) SET o.valid_to = $vt, o.expired_at = $x "
        "CREATE (n)-[:SUPERSEDES {at: $at, reason: $r}]->(o)",
        {
            "old": txn.key(s.old_id),
            "new": txn.key(s.new_id),
            "vt": s.valid_to,
            "x": s.expired_at,
            "r": s.reason,
            "at": s.at or s.expired_at,
        },
    )


def set_extract_status(txn: WriteTxn, session_id: str, status: str, error: str | None) -> None:
    txn.execute(
        "MATCH (s:Session {key: $k}) SET s.extract_status = $st, s.extract_error = $err",
        {"k": txn.key(session_id), "st": status, "err": error},
    )


# -- reads -----------------------------------------------------------------------------------------------------
def sessions_to_extract(db: ScopeDatabase, statuses: Sequence[str]) -> list[tuple[str, datetime]]:
    """Sessions whose extract_status is one of ``statuses`` (null counts as none), oldest first."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} WHERE coalesce(s.extract_status, 'none') IN $st "
        "RETURN s.id, s.started_at ORDER BY s.started_at, s.id",
        {"st": list(statuses)},
    )
    return [(r[0], r[1]) for r in rows]


def session_info(db: ScopeDatabase, session_id: str) -> tuple[datetime, str, str | None] | None:
    rows = db.query(
        "MATCH (s:Session {key: $k}) RETURN s.started_at, coalesce(s.extract_status, 'none'), s.extract_error",
        {"k": db.key(session_id)},
    )
    return (rows[0][0], rows[0][1], rows[0][2]) if rows else None


def load_entities(db: ScopeDatabase) -> list[EntityRecord]:
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('e', 'Entity')} RETURN e.id, e.name, e.type, e.aliases, e.embedding ORDER BY e.id"
    )
    return [
        EntityRecord(
            id=r[0],
            name=r[1],
            type=r[2] or "thing",
            aliases=list(r[3] or []),
            vec=np.asarray(r[4], np.float32),
        )
        for r in rows
    ]


def list_entities(db: ScopeDatabase) -> list[Entity]:
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('e', 'Entity')} RETURN e.id, e.name, e.type, e.aliases ORDER BY e.name, e.id"
    )
    return [Entity(id=r[0], name=r[1], type=r[2] or "thing", aliases=list(r[3] or [])) for r in rows]


@dataclass
class Candidate:
    """A current fact similar to a new one, as the versioning prompt shows it."""

    id: str
    text: str
    confidence: float
    recorded_at: datetime | None
    valid_from: datetime | None
    last_seen: datetime | None
    similarity: float


def similar_current_facts(
    db: ScopeDatabase,
    vec: Vectors,
    *,
    k: int,
    min_similarity: float,
    entity_ids: Sequence[str] = (),
    min_similarity_shared: float = 0.0,
) -> list[Candidate]:
    """Current facts similar to ``vec``: the overall top-k above ``min_similarity``, plus the top-k among facts
    about any of ``entity_ids`` above the (lower) ``min_similarity_shared``. Exact scan: per-user fact counts are
    small, and an HNSW post-filter on ``expired_at`` would lose recall."""
    v = np.asarray(vec, dtype=np.float32).tolist()
    ret = "RETURN f.id, f.text, f.confidence, f.recorded_at, f.valid_from, f.last_seen, s ORDER BY s DESC LIMIT $k"
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} WHERE f.expired_at IS NULL AND {NOT_SUMMARY} "
        "WITH f, array_cosine_similarity(f.embedding, $v) AS s "
        f"WHERE s >= $t {ret}",
        {"v": v, "t": min_similarity, "k": k},
    )
    if entity_ids:
        rows += db.query(
            f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')}-[:ABOUT]->(e:Entity) WHERE e.id IN $ents AND f.expired_at IS NULL "
            f"AND {NOT_SUMMARY} "
            "WITH DISTINCT f WITH f, array_cosine_similarity(f.embedding, $v) AS s "
            f"WHERE s >= $t {ret}",
            {"v": v, "t": min_similarity_shared, "k": k, "ents": list(entity_ids)},
        )
    out: dict[str, Candidate] = {}
    for r in rows:
        out.setdefault(r[0], Candidate(r[0], r[1], float(r[2]), r[3], r[4], r[5], float(r[6])))
    return sorted(out.values(), key=lambda c: -c.similarity)[:k]


def _fact(r: Sequence[Any], superseded_by: str | None, entity_ids: Sequence[str]) -> Fact:
    kind = r[2] if r[2] in FactKind._value2member_map_ else FactKind.other.value
    return Fact(
        id=r[0],
        text=r[1],
        kind=FactKind(kind),
        polarity=r[3] if r[3] in ("positive", "negative") else "positive",
        confidence=min(1.0, max(0.0, float(r[4] if r[4] is not None else 1.0))),
        valid_from=r[5],
        valid_to=r[6],
        recorded_at=r[7],
        expired_at=r[8],
        last_seen=r[9],
        session_id=r[10],
        message_ids=list(r[11] or []),
        entity_ids=sorted(x for x in entity_ids if x),
        superseded_by=superseded_by,
        reinforcement=max(1, int(r[12] if r[12] is not None else 1)),
        key=r[13],
        disputed_at=r[14],
        dispute_note=r[15],
    )


def _facts_query(db: ScopeDatabase, where: str, params: dict[str, Any], tail: str = "") -> list[Fact]:
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} {where} "
        "OPTIONAL MATCH (n:Fact)-[:SUPERSEDES]->(f) "
        "OPTIONAL MATCH (f)-[:ABOUT]->(e:Entity) "
        f"RETURN {FACT_COLS}, min(n.id), collect(DISTINCT e.id) {tail}",
        params,
    )
    return [_fact(r, r[16], r[17] or []) for r in rows]


def get_facts(db: ScopeDatabase, ids: Sequence[str]) -> dict[str, Fact]:
    if not ids:
        return {}
    return {f.id: f for f in _facts_query(db, "WHERE f.id IN $ids", {"ids": list(ids)})}


def list_facts(
    db: ScopeDatabase,
    *,
    as_of: datetime | None,
    include_superseded: bool,
    limit: int,
    offset: int,
    until: datetime | None = None,
) -> list[Fact]:
    """Facts, oldest valid_from first: the current ones, or those valid at ``as_of``, or with
    ``include_superseded`` every one; with ``until`` only what was recorded by then (``store.visibility``)."""
    params: dict[str, Any] = {"o": offset, "n": limit}
    if include_superseded and as_of is None:
        where = "" if until is None else "WHERE f.recorded_at IS NULL OR f.recorded_at <= $cut_until"
        if until is not None:
            params["cut_until"] = until
    else:
        cond, extra = fact_condition("f", until, as_of)
        where = f"WHERE {cond}"
        params.update(extra)
    return _facts_query(db, where, params, "ORDER BY f.valid_from, f.recorded_at, f.id SKIP $o LIMIT $n")


def supersession_chain(db: ScopeDatabase, fact_id: str) -> list[Fact]:
    """Every fact connected to ``fact_id`` through SUPERSEDES edges (either direction), oldest first."""
    seen = {fact_id}
    frontier = [fact_id]
    while frontier:
        rows = db.query(
            f"{MATCH_SCOPE}MATCH {owned('a', 'Fact')}-[:SUPERSEDES]-(b:Fact) WHERE a.id IN $ids RETURN DISTINCT b.id",
            {"ids": frontier},
        )
        frontier = [r[0] for r in rows if r[0] not in seen]
        seen.update(frontier)
    facts = list(get_facts(db, sorted(seen)).values())
    return sorted(facts, key=lambda f: (f.valid_from or datetime.min, f.recorded_at or datetime.min, f.id))


# -- retrieval (every read applies ``store.visibility``) -----------------------------------------------------------
# A search reads ``visible_fact_ids``, ``visible_event_ids``, ``entity_neighbourhood`` and ``source_rounds`` from
# ``store.adjacency`` (in memory); these Kuzu queries are the reference its tests compare it with.
def visible_fact_ids(
    db: ScopeDatabase, ids: Sequence[str], until: datetime | None, as_of: datetime | None
) -> set[str]:
    """The subset of ``ids`` visible at the cutoff and current then (or valid at ``as_of``)."""
    if not ids:
        return set()
    cond, params = fact_condition("f", until, as_of)
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} WHERE f.id IN $ids AND {cond} RETURN f.id",
        {"ids": list(ids), **params},
    )
    return {r[0] for r in rows}


def visible_event_ids(
    db: ScopeDatabase, ids: Sequence[str], until: datetime | None, as_of: datetime | None
) -> set[str]:
    """The subset of ``ids`` visible at the cutoff (and known at ``as_of``)."""
    if not ids:
        return set()
    if until is None and as_of is None:
        return set(ids)
    cond, params = event_condition("s", until, as_of)
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('e', 'Event')}, {owned('s', 'Session')} WHERE e.id IN $ids AND s.id = e.session_id "
        f"AND {cond} RETURN e.id",
        {"ids": list(ids), **params},
    )
    return {r[0] for r in rows}


def entity_neighbourhood(
    db: ScopeDatabase,
    entity_ids: Sequence[str],
    vec: Vectors,
    k: int,
    *,
    until: datetime | None,
    as_of: datetime | None,
) -> list[tuple[str, str, float]]:
    """(kind, id, similarity) of the visible current facts about, and visible events involving, the entities."""
    if not entity_ids:
        return []
    v = np.asarray(vec, dtype=np.float32).tolist()
    # From each named entity by key along its edges: the cost follows the entities' neighbourhoods. Filtering the
    # scope's facts and events by ``e.id IN $ents`` read every fact of the scope (and joined every event with every
    # session) on each search: ~0.5 s at 20,000 facts (benchmarks/perf/entities.py).
    fcond, fparams = fact_condition("f", until, as_of)
    per_entity = [{"k": db.key(e), "v": v, **fparams} for e in dict.fromkeys(entity_ids)]
    fact_sims = {
        r[0]: float(r[1])
        for r in db.query_each(
            f"MATCH (e:Entity {{key: $k}})<-[:ABOUT]-(f:Fact) WHERE {fcond} "
            "RETURN f.id, array_cosine_similarity(f.embedding, $v)",
            per_entity,
        )
    }
    found = db.query_each(
        "MATCH (e:Entity {key: $k})<-[:SUBJECT|OBJECT]-(x:Event) "
        "RETURN x.id, x.session_id, array_cosine_similarity(x.embedding, $v)",
        [{"k": p["k"], "v": v} for p in per_entity],
    )
    started = {
        r[0]: r[1]
        for r in db.query_each(
            "MATCH (s:Session {key: $k}) RETURN s.id, s.started_at",
            [{"k": db.key(sid)} for sid in dict.fromkeys(r[1] for r in found if r[1] is not None)],
        )
    }
    event_sims = {
        r[0]: float(r[2]) for r in found if r[1] in started and _session_visible(started[r[1]], until, as_of)
    }
    facts = sorted(fact_sims.items(), key=lambda x: (-x[1], x[0]))[:k]
    events = sorted(event_sims.items(), key=lambda x: (-x[1], x[0]))[:k]
    return [("fact", r[0], float(r[1])) for r in facts] + [("event", r[0], float(r[1])) for r in events]


def _session_visible(started_at: datetime | None, until: datetime | None, as_of: datetime | None) -> bool:
    """``visibility.event_condition`` for one session's start, in Python (a NULL start fails a bound, as in Kuzu)."""
    for bound in (until, as_of):
        if bound is not None and (started_at is None or started_at > bound):
            return False
    return True


def events_between(
    db: ScopeDatabase, start: datetime, end: datetime, *, until: datetime | None, limit: int
) -> list[Event]:
    """Visible events whose time falls between ``start`` and ``end``, in time order."""
    cond, params = event_condition("s", until, None)
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('e', 'Event')}, {owned('s', 'Session')} WHERE s.id = e.session_id AND e.time_start >= $a "
        "AND e.time_start <= $b "
        f"AND {cond} RETURN {EVENT_COLS} ORDER BY e.time_start, e.id LIMIT $n",
        {"a": start, "b": end, "n": limit, **params},
    )
    return [_event(r) for r in rows]


def source_rounds(db: ScopeDatabase, table: str, ids: Sequence[str]) -> dict[str, list[str]]:
    """Fact or event id -> ids of the rounds holding its source messages."""
    if not ids:
        return {}
    rel = "FACT_FROM" if table == "Fact" else "EVENT_FROM"
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('x', table)}-[:{rel}]->(m:Message)-[:MSG_IN]->(:Session)<-[:ROUND_IN]-(r:Round) "
        "WHERE x.id IN $ids AND list_contains(r.message_ids, m.id) RETURN x.id, collect(DISTINCT r.id)",
        {"ids": list(ids)},
    )
    return {r[0]: sorted(r[1]) for r in rows}


def fetch_nodes(
    db: ScopeDatabase, table: str, ids: Sequence[str]
) -> dict[str, tuple[str, str, datetime | None, list[str]]]:
    """id -> (text, session_id, date, message_ids) for facts (date: valid_from) or events (date: time_start,
    else the session date)."""
    if not ids:
        return {}
    if table == "Fact":
        rows = db.query(
            f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} WHERE f.id IN $ids RETURN f.id, f.text, f.session_id, f.valid_from, "
            "f.message_ids",
            {"ids": list(ids)},
        )
    else:
        rows = db.query(
            f"{MATCH_SCOPE}MATCH {owned('e', 'Event')}, {owned('s', 'Session')} WHERE e.id IN $ids AND s.id = e.session_id "
            "RETURN e.id, e.text, e.session_id, coalesce(e.time_start, s.started_at), e.message_ids",
            {"ids": list(ids)},
        )
    return {r[0]: (r[1], r[2], r[3], list(r[4] or [])) for r in rows}


def has_extracted(db: ScopeDatabase) -> bool:
    """Whether the scope holds any fact or event. The derived indexes hold exactly those tables' rows, so their
    counts answer without asking Kuzu: the two count queries this replaced ran on every search and took ~10% of a
    loaded server's samples (py-spy, HTTP load benchmark)."""
    return db.indexes.count("fact_terms") > 0 or db.indexes.count("event_terms") > 0


EVENT_COLS = (
    "e.id, e.subject, e.verb, e.object, e.text, e.time_start, e.time_end, e.session_id, e.message_ids"
)


def _event(r: Sequence[Any]) -> Event:
    return Event(
        id=r[0], subject=r[1], verb=r[2], object=r[3] or "", text=r[4], time_start=r[5], time_end=r[6],
        session_id=r[7], message_ids=list(r[8] or []),
    )  # fmt: skip


def list_events(db: ScopeDatabase, *, limit: int = 1000, offset: int = 0) -> list[Event]:
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('e', 'Event')} RETURN {EVENT_COLS} ORDER BY e.time_start, e.id SKIP $o LIMIT $n",
        {"o": offset, "n": limit},
    )
    return [_event(r) for r in rows]


def salience_inputs(
    db: ScopeDatabase, ids: Sequence[str]
) -> dict[str, tuple[datetime | None, datetime | None, int]]:
    """Fact id -> (last_seen, recorded_at, reinforcement): what ``retrieve.salience`` reads."""
    if not ids:
        return {}
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} WHERE f.id IN $ids RETURN f.id, f.last_seen, f.recorded_at, f.reinforcement",
        {"ids": list(ids)},
    )
    return {r[0]: (r[1], r[2], int(r[3] if r[3] is not None else 1)) for r in rows}


# -- the profile (``retrieve.profile``) ------------------------------------------------------------------------------
def fact_mentions(
    db: ScopeDatabase, ids: Sequence[str], *, until: datetime | None
) -> dict[str, tuple[int, datetime | None]]:
    """Fact id -> (how many distinct sessions recorded by ``until`` its source messages come from, the latest of
    their dates): its reinforcement and last confirmation as known at the cutoff. Facts without source messages
    (added by the application) are absent."""
    if not ids:
        return {}
    cond, params = event_condition("s", until, None)  # a session is visible when its date is
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')}-[:FACT_FROM]->(m:Message)-[:MSG_IN]->(s:Session) WHERE f.id IN $ids "
        f"AND {cond} RETURN f.id, count(DISTINCT s.id), max(s.started_at)",
        {"ids": list(ids), **params},
    )
    return {r[0]: (int(r[1]), r[2]) for r in rows}


def events_since(
    db: ScopeDatabase, since: datetime, *, until: datetime | None, limit: int
) -> list[tuple[Event, datetime]]:
    """Visible events dated ``since`` or later (their time, else their session's date), newest first, with
    that date."""
    cond, params = event_condition("s", until, None)
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('e', 'Event')}, {owned('s', 'Session')} WHERE s.id = e.session_id AND "
        f"coalesce(e.time_start, s.started_at) >= $since AND {cond} "
        f"RETURN {EVENT_COLS}, coalesce(e.time_start, s.started_at) AS d ORDER BY d DESC, e.id LIMIT $n",
        {"since": since, "n": limit, **params},
    )
    return [(_event(r), r[9]) for r in rows]


# -- facts the application adds (``extract.known``) ----------------------------------------------------------------
def current_facts_of_kind(db: ScopeDatabase, kind: str, vec: Vectors) -> list[tuple[Candidate, list[str]]]:
    """Every current fact of ``kind`` with the ids of the entities it is about and its cosine similarity to
    ``vec``, most similar first. Exact scan: the rule that uses it compares whole entity sets."""
    v = np.asarray(vec, dtype=np.float32).tolist()
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} WHERE f.expired_at IS NULL AND f.kind = $kind AND {NOT_SUMMARY} "
        "OPTIONAL MATCH (f)-[:ABOUT]->(e:Entity) "
        "WITH f, collect(DISTINCT e.id) AS ents "
        "RETURN f.id, f.text, f.confidence, f.recorded_at, f.valid_from, f.last_seen, "
        "array_cosine_similarity(f.embedding, $v) AS s, ents ORDER BY s DESC, f.id",
        {"kind": kind, "v": v},
    )
    return [
        (
            Candidate(r[0], r[1], float(r[2]), r[3], r[4], r[5], float(r[6])),
            sorted(x for x in r[7] or [] if x),
        )
        for r in rows
    ]


def current_fact_with_key(db: ScopeDatabase, kind: str, key: str, vec: Vectors) -> Candidate | None:
    """The current fact of ``kind`` that the application added with ``key`` (``add_fact(key=...)``), as a
    versioning candidate (``similarity``: its cosine to ``vec``); the newest if an import brought several."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} WHERE f.expired_at IS NULL AND f.kind = $kind AND f.fact_key = $key "
        "RETURN f.id, f.text, f.confidence, f.recorded_at, f.valid_from, f.last_seen, "
        "array_cosine_similarity(f.embedding, $v) AS s ORDER BY f.recorded_at DESC, f.id LIMIT 1",
        {"kind": kind, "key": key, "v": np.asarray(vec, dtype=np.float32).tolist()},
    )
    if not rows:
        return None
    r = rows[0]
    return Candidate(r[0], r[1], float(r[2]), r[3], r[4], r[5], float(r[6]))


def session_date(db: ScopeDatabase, session_id: str) -> datetime | None:
    info = session_info(db, session_id)
    return info[0] if info is not None else None


# -- a whole scope (``exchange``) ------------------------------------------------------------------------------------
def extraction_states(db: ScopeDatabase) -> dict[str, tuple[str, str | None]]:
    """Session id -> (extract_status, extract_error)."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} RETURN s.id, coalesce(s.extract_status, 'none'), s.extract_error"
    )
    return {r[0]: (r[1], r[2]) for r in rows}


def supersedes_edges(db: ScopeDatabase) -> list[tuple[str, str, datetime | None, str]]:
    """Every SUPERSEDES edge as (new id, old id, at, reason)."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('n', 'Fact')}-[s:SUPERSEDES]->(o:Fact) RETURN n.id, o.id, s.at, s.reason ORDER BY o.id, n.id"
    )
    return [(r[0], r[1], r[2], r[3] or "") for r in rows]


def event_entities(db: ScopeDatabase) -> dict[str, tuple[list[str], list[str]]]:
    """Event id -> (subject entity ids, object entity ids)."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for slot, rel in ((0, "SUBJECT"), (1, "OBJECT")):
        rows = db.query(
            f"{MATCH_SCOPE}MATCH {owned('e', 'Event')}-[:{rel}]->(x:Entity) RETURN e.id, x.id ORDER BY e.id, x.id"
        )
        for eid, xid in rows:
            out.setdefault(eid, ([], []))[slot].append(xid)
    return out


def related_edges(db: ScopeDatabase) -> list[tuple[str, str, str, str]]:
    """Every RELATED edge as (source, target, predicate, fact_id)."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('a', 'Entity')}-[r:RELATED]->(b:Entity) RETURN a.id, b.id, r.predicate, r.fact_id "
        "ORDER BY a.id, b.id, r.predicate"
    )
    return [(r[0], r[1], r[2] or "", r[3] or "") for r in rows]
