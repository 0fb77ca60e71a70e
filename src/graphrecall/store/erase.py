"""Selective forgetting: what erasing sessions, messages or facts removes from a scope, and removing it.

Why one module: "forget this" must reach everything derived from what is forgotten, or it is not forgotten. A
message goes with its rounds (a round holds the message's text and vectors), with every fact and event extracted
from it (``FACT_FROM`` / ``EVENT_FROM``), and with the entities that nothing else mentions any more; a session goes
with its messages. The derived indexes lose the same rows in the same ``ScopeDatabase.write()`` (``unindex``).
``plan`` only reads, so a dry run reports exactly what ``apply`` would delete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from graphrecall.store.database import MATCH_SCOPE, ScopeDatabase, owned
from graphrecall.store.rounds import delete_rounds


@dataclass
class ErasePlan:
    """Ids to delete, by table; ``orphans`` are entities left without any fact or event."""

    sessions: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    rounds: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.sessions or self.messages or self.rounds or self.facts or self.events)


def sessions_before(db: ScopeDatabase, before: datetime) -> list[str]:
    return [
        r[0]
        for r in db.query(
            f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} WHERE s.started_at < $t RETURN s.id", {"t": before}
        )
    ]


def plan(
    db: ScopeDatabase,
    *,
    sessions: Sequence[str] = (),
    messages: Sequence[str] = (),
    facts: Sequence[str] = (),
    events: Sequence[str] = (),
) -> ErasePlan:
    """Everything erasing these ids removes (ids that do not exist are ignored: check them before)."""
    p = ErasePlan(sessions=list(dict.fromkeys(sessions)))
    msg = dict.fromkeys(messages)
    for sid in p.sessions:
        for r in db.query(
            "MATCH (m:Message)-[:MSG_IN]->(:Session {key: $s}) RETURN m.id", {"s": db.key(sid)}
        ):
            msg[r[0]] = None
    p.messages = list(msg)
    # A session that loses every message goes too (no empty sessions left behind).
    gone = set(p.messages)
    for r in db.query_each(
        "MATCH (m:Message {key: $m})-[:MSG_IN]->(s:Session) RETURN s.id",
        [{"m": db.key(m)} for m in p.messages],
    ):
        if r[0] not in p.sessions:
            left = db.query(
                "MATCH (m:Message)-[:MSG_IN]->(:Session {key: $s}) RETURN m.id", {"s": db.key(r[0])}
            )
            if {x[0] for x in left} <= gone:
                p.sessions.append(r[0])
    rounds: dict[str, None] = {}
    fact_ids = dict.fromkeys(facts)
    event_ids = dict.fromkeys(events)
    # What hangs from the messages: for a whole session, three reads from the session (its rounds, and the facts and
    # events its messages are the source of); for single messages, three reads per message. Three point lookups per
    # message of a whole session took ~4 ms each: an erase preview of 2,000 messages ~8 s (docs/console.md).
    whole = set(p.sessions)
    by_session = [{"s": db.key(sid)} for sid in p.sessions]
    covered = _messages_of(db, whole)
    loose = [{"m": db.key(m)} for m in p.messages if m not in covered]
    for found, sql_session, sql_message in (
        (rounds, "MATCH (x:Round)-[:ROUND_IN]->(:Session {key: $s})", "MATCH (m:Message {key: $m})-[:MSG_IN]->(:Session)<-[:ROUND_IN]-(x:Round) WHERE list_contains(x.message_ids, m.id)"),
        (fact_ids, "MATCH (x:Fact)-[:FACT_FROM]->(:Message)-[:MSG_IN]->(:Session {key: $s})", "MATCH (x:Fact)-[:FACT_FROM]->(:Message {key: $m})"),
        (event_ids, "MATCH (x:Event)-[:EVENT_FROM]->(:Message)-[:MSG_IN]->(:Session {key: $s})", "MATCH (x:Event)-[:EVENT_FROM]->(:Message {key: $m})"),
    ):  # fmt: skip
        rows = db.query_each(f"{sql_session} RETURN DISTINCT x.id", by_session) if by_session else []
        rows += db.query_each(f"{sql_message} RETURN x.id", loose) if loose else []
        for r in rows:
            found[r[0]] = None
    p.rounds, p.facts, p.events = list(rounds), list(fact_ids), list(event_ids)
    p.entities = _orphans(db, set(p.facts), set(p.events))
    return p


def _messages_of(db: ScopeDatabase, sessions: set[str]) -> set[str]:
    """The ids of the messages of ``sessions``."""
    if not sessions:
        return set()
    rows = db.query_each(
        "MATCH (m:Message)-[:MSG_IN]->(:Session {key: $s}) RETURN m.id", [{"s": db.key(s)} for s in sessions]
    )
    return {r[0] for r in rows}


def _orphans(db: ScopeDatabase, facts: set[str], events: set[str]) -> list[str]:
    """Entities that only the erased facts and events mention."""
    touched: dict[str, None] = {}
    for r in db.query_each(
        "MATCH (:Fact {key: $k})-[:ABOUT]->(e:Entity) RETURN e.id", [{"k": db.key(f)} for f in facts]
    ) + db.query_each(
        "MATCH (:Event {key: $k})-[:SUBJECT|OBJECT]->(n:Entity) RETURN n.id",
        [{"k": db.key(e)} for e in events],
    ):
        touched[r[0]] = None
    users: dict[str, set[str]] = {nid: set() for nid in touched}
    for r in db.query_each(
        "MATCH (x)-[:ABOUT|SUBJECT|OBJECT]->(n:Entity {key: $n}) RETURN DISTINCT n.id, x.id",
        [{"n": db.key(nid)} for nid in touched],
    ):
        users[r[0]].add(r[1])
    return [nid for nid in touched if users[nid] <= facts | events]


def apply(db: ScopeDatabase, p: ErasePlan) -> None:
    """Delete everything in the plan, in one transaction; the derived indexes follow at its commit."""
    with db.write() as txn:
        for table, ids in (
            ("Round", p.rounds),
            ("Fact", p.facts),
            ("Event", p.events),
            ("Entity", p.entities),
            ("Message", p.messages),
            ("Session", p.sessions),
        ):
            if not ids:
                continue
            if table == "Round":  # with its passages
                delete_rounds(txn, ids)
                continue
            if table == "Fact":  # entity-to-entity relations extracted from the erased facts
                for i in ids:
                    txn.execute(
                        f"{MATCH_SCOPE}MATCH {owned('a', 'Entity')}-[r:RELATED]->() WHERE r.fact_id = $f DELETE r",
                        {"f": i},
                    )
            stmt = f"MATCH (n:{table} {{key: $k}}) DETACH DELETE n"
            for i in ids:  # point deletes: ``UNWIND ... MATCH`` would scan the table
                txn.execute(stmt, {"k": txn.key(i)})
            txn.unindex(table, ids)


def matching_ids(db: ScopeDatabase, table: str, index: str, terms: str, limit: int = 100_000) -> list[str]:
    """Ids of ``table`` rows whose terms hold every one of ``terms`` (a conjunctive match, so what a dry run lists
    is exactly what the words select, not a ranking's top k)."""
    wanted = set(terms.split())
    if not wanted:
        return []
    candidates = [rid for rid, _ in db.indexes.lexical_search(index, terms, limit)]
    rows = db.query_each(
        f"MATCH (n:{table} {{key: $k}}) RETURN n.id, n.terms", [{"k": db.key(i)} for i in candidates]
    )
    return [r[0] for r in rows if wanted <= set((r[1] or "").split())]


def round_messages(db: ScopeDatabase, round_ids: Sequence[str]) -> list[str]:
    rows = db.query_each(
        "MATCH (r:Round {key: $r}) RETURN r.message_ids", [{"r": db.key(r)} for r in round_ids]
    )
    return list(dict.fromkeys(m for r in rows for m in r[0] or []))


@dataclass
class Matched:
    """What ``matching`` words select for an erase: the messages of every matched round (a round is erased with
    its messages), and the matched facts and events."""

    messages: list[str]
    facts: list[str]
    events: list[str]


def matching(db: ScopeDatabase, terms: str) -> Matched:
    """Every round, fact and event whose text holds all of ``terms`` (``text.query_terms`` of the words)."""
    return Matched(
        messages=round_messages(db, matching_ids(db, "Round", "round_terms", terms)),
        facts=matching_ids(db, "Fact", "fact_terms", terms),
        events=matching_ids(db, "Event", "event_terms", terms),
    )
