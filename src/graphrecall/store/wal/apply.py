"""``apply_entries``: write a batch of log entries into a scope's Kuzu database, idempotently.

This is the reference ``apply`` for a ``Flusher`` (the integrator may fold it into the store layer). It keeps the
replay invariant of docs/write-log.md: the result of applying entries ``e_i..e_n`` in order to a database that
already holds any prefix ``e_1..e_j`` (j >= i - 1) is the same as applying each once. It holds because every
write is an assignment keyed by an id fixed at append time, never relative to what is stored:
- a session is created only if absent (its ``started_at`` is the entry's, computed when it was acknowledged);
- a message is created only if absent (a message id never changes content);
- a round is replaced by id (delete then insert: Kuzu cannot SET an indexed vector column), with its passages, by
  the newest version in the batch; ``replaced_round_ids`` are deleted if present;
- ``updated_at`` of touched sessions is the newest entry's ``written_at``, not the wall clock.
One batch is one transaction: all of it or nothing, except where Kuzu 0.11.3 tears it: a kill inside the checkpoint
of a commit that ran a ``COPY`` (a flush of more than 256 rows) can keep the messages the ``COPY`` wrote without the
edges to their session (docs/architecture.md, "Decisions forced by measurement"). The entries are still in the log
(deleted only after the checkpoint), and their replay mends that: a message stored without its edge gets it again,
and so does a session stored without its ``OWNS`` edge (a flush of 2,000 sessions or more copies them too).
A passage kept without the edge to its round is not reached by the round's replacement; its key makes the batch
fail, and the batch applied again deletes the passages it writes by key first.
Such a message is found by key, so a batch whose ids were read from the scope's edges (past the point lookups,
``store.known``) and which then meets one of its keys fails on it; that batch is applied again with every session
and message id looked up by key. A session or message already stored costs one lookup more; a new one, nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.known import POINT_LOOKUPS_UP_TO, existing_ids, keyed_ids
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow
from graphrecall.store.schema import passage_id
from graphrecall.store.wal.entry import WriteEntry

log = logging.getLogger(__name__)


def apply_entries(db: ScopeDatabase, entries: Sequence[WriteEntry], *, durable: bool = True) -> None:
    """``durable=False``: commit without a checkpoint (the caller checkpoints later: ``ScopeDatabase.write``)."""
    if not entries:
        return
    try:
        _apply(db, entries, durable=durable, by_key=False)
    except RuntimeError as e:
        if "duplicated primary key" not in str(e):
            raise
        log.warning(
            "%s: a replayed batch met a message stored without its edge (a torn commit); applied again with every "
            "message looked up by key",
            db.path,
        )
        _apply(db, entries, durable=durable, by_key=True)


def _apply(db: ScopeDatabase, entries: Sequence[WriteEntry], *, durable: bool, by_key: bool) -> None:
    dim = entries[0].dim
    sessions: dict[str, SessionRow] = {}
    messages: dict[str, MessageRow] = {}
    latest: dict[str, tuple[RoundRow, np.ndarray, np.ndarray, np.ndarray | None]] = {}
    deleted: set[str] = set()
    for e in sorted(entries, key=lambda x: x.seq):
        if e.dim != dim:
            raise ValueError(f"entry seq {e.seq} has dim {e.dim}; the batch has dim {dim}")
        for s in e.sessions:
            sessions.setdefault(s.id, s)
        for m in e.messages:
            messages.setdefault(m.id, m)
        for rid in e.replaced_round_ids:
            deleted.add(rid)
            latest.pop(rid, None)
        users, replies, passages = e.user_matrix(), e.reply_matrix(), e.passages()
        for i, r in enumerate(e.rounds):
            latest[r.id] = (r, users[i], replies[i], passages[i])
    with db.write_lock:
        # Asked of Kuzu itself, not of ``db.known``: a replay must be right whatever any cache says.
        known_sessions, keyed = _stored(db, "Session", sessions, by_key)
        new_sessions = [s for sid, s in sessions.items() if sid not in known_sessions]
        unowned = _lacking(db, known_sessions, UNOWNED) if keyed else []
        known_messages, keyed = _stored(db, "Message", messages, by_key)
        new_messages = [m for mid, m in messages.items() if mid not in known_messages]
        unlinked = _lacking(db, known_messages, UNLINKED) if keyed else []
        rows = [v[0] for v in latest.values()]
        stale = sorted(deleted | set(latest))  # every round id written is replaced, if Kuzu has it
        with db.write(durable=durable) as txn:
            q.write_messages(
                txn,
                new_sessions=new_sessions,
                messages=new_messages,
                replaced_round_ids=stale,
            )
            if by_key:  # passages a torn commit kept without the edge that ``delete_rounds`` follows
                q.delete_passages(
                    txn, [passage_id(r.id, i) for r, _, _, pv in latest.values() for i in range(_n(pv))]
                )
            for sid in unowned:  # one by one: a COPY of edges is never safe (docs/architecture.md)
                txn.execute(
                    "MATCH (sc:Scope {key: $scope}), (s:Session {key: $s}) CREATE (sc)-[:OWNS]->(s)",
                    {"s": txn.key(sid)},
                )
            for mid in unlinked:
                txn.execute(
                    "MATCH (m:Message {key: $m}), (s:Session {key: $s}) CREATE (m)-[:MSG_IN]->(s)",
                    {"m": txn.key(mid), "s": txn.key(messages[mid].session_id)},
                )
            if rows:
                q.write_rounds(
                    txn,
                    rows,
                    np.stack([v[1] for v in latest.values()]),
                    np.stack([v[2] for v in latest.values()]),
                    dim,
                    [v[3] for v in latest.values()],
                )
            touched = sorted({m.session_id for m in messages.values()} | {r.session_id for r in rows})
            at = max(e.written_at for e in entries)
            for sid in touched:  # point updates: ``UNWIND ... MATCH`` plans a scan of the whole table
                txn.execute("MATCH (s:Session {key: $k}) SET s.updated_at = $t", {"k": txn.key(sid), "t": at})


UNOWNED = "MATCH (n:Session {key: $k}) WHERE NOT EXISTS { MATCH (:Scope)-[:OWNS]->(n) } RETURN n.id"
UNLINKED = "MATCH (n:Message {key: $k}) WHERE NOT EXISTS { MATCH (n)-[:MSG_IN]->(:Session) } RETURN n.id"


def _stored(db: ScopeDatabase, table: str, ids: dict[str, Any], by_key: bool) -> tuple[set[str], bool]:
    """The ids of ``ids`` that ``table`` holds, and whether they were found by key (then a row a torn commit left
    without its edge is among them; read from the scope's edges, it is not)."""
    keyed = by_key or len(ids) <= POINT_LOOKUPS_UP_TO
    return (keyed_ids if keyed else existing_ids)(db, table, ids), keyed


def _lacking(db: ScopeDatabase, ids: set[str], cypher: str) -> list[str]:
    """The rows of ``ids`` that ``cypher`` finds without their edge (a torn commit), one point lookup each: only
    rows already stored, so a batch of new turns asks nothing."""
    if not ids:
        return []
    return [r[0] for r in db.query_each(cypher, [{"k": db.key(i)} for i in sorted(ids)])]


def _n(passages: np.ndarray | None) -> int:
    return 0 if passages is None else len(passages)
