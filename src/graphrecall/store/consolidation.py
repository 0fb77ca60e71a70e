"""The store side of consolidation (``extract.consolidate``): what it reads, and the two writes of its own.

Everything else it writes goes through ``facts.write_extraction`` (merged facts with new wording, period
summaries, supersessions), so it lands in the derived indexes like any extracted fact. Its own writes change only
unindexed columns and edges: a kept fact absorbs its duplicates' evidence (``fold``), and an event gains a
SUBJECT or OBJECT edge to an entity it names (``link_event``). Nothing is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np

from graphrecall.embed.base import Vectors
from graphrecall.store.arrow import edge_table
from graphrecall.store.database import MATCH_SCOPE, ScopeDatabase, WriteTxn, owned


@dataclass
class Fold:
    """A kept fact after a merge: the cluster's summed reinforcement, every source message, the latest sighting,
    the earliest valid time and the highest confidence."""

    fact_id: str
    reinforcement: int
    message_ids: list[str]
    last_seen: datetime | None
    valid_from: datetime | None
    confidence: float


def current_fact_vectors(db: ScopeDatabase) -> dict[str, Vectors]:
    """Fact id -> embedding of every current fact."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')} WHERE f.expired_at IS NULL RETURN f.id, f.embedding"
    )
    return {r[0]: np.asarray(r[1], dtype=np.float32) for r in rows}


def all_sessions(db: ScopeDatabase) -> list[tuple[str, datetime]]:
    """(id, started_at) of every session, oldest first."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} RETURN s.id, s.started_at ORDER BY s.started_at, s.id"
    )
    return [(r[0], r[1]) for r in rows]


def fold(txn: WriteTxn, f: Fold) -> None:
    rows = txn.execute("MATCH (f:Fact {key: $k}) RETURN f.message_ids", {"k": txn.key(f.fact_id)})
    if not rows:
        return
    old = list(rows[0][0] or [])
    added = [m for m in dict.fromkeys(f.message_ids) if m not in old]
    txn.execute(
        "MATCH (f:Fact {key: $k}) SET f.reinforcement = $r, f.message_ids = $m, f.last_seen = $t, "
        "f.valid_from = $vf, f.confidence = $c",
        {
            "k": txn.key(f.fact_id),
            "r": f.reinforcement,
            "m": old + added,
            "t": f.last_seen,
            "vf": f.valid_from,
            "c": f.confidence,
        },
    )
    if added:
        txn.copy("FACT_FROM", edge_table([(f.fact_id, m) for m in added]))


def link_event(txn: WriteTxn, event_id: str, entity_id: str, role: Literal["subject", "object"]) -> None:
    rel = "SUBJECT" if role == "subject" else "OBJECT"
    txn.execute(
        f"MATCH (e:Event {{key: $e}}), (x:Entity {{key: $x}}) WHERE NOT EXISTS {{ MATCH (e)-[:{rel}]->(x) }} "
        f"CREATE (e)-[:{rel}]->(x)",
        {"e": txn.key(event_id), "x": txn.key(entity_id)},
    )


def message_ids_of(db: ScopeDatabase, session_ids: Sequence[str]) -> list[str]:
    """The ids of the sessions' messages, session by session in the given order, each in order."""
    if not session_ids:
        return []
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('s', 'Session')}<-[:MSG_IN]-(m:Message) WHERE s.id IN $ids RETURN s.id, m.id ORDER BY m.idx",
        {"ids": list(session_ids)},
    )
    by_session: dict[str, list[str]] = {}
    for sid, mid in rows:
        by_session.setdefault(sid, []).append(mid)
    return [m for sid in session_ids for m in by_session.get(sid, [])]
