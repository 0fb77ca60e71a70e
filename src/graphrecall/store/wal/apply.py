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
One batch is one transaction: all of it or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.known import existing_ids
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow
from graphrecall.store.wal.entry import WriteEntry


def apply_entries(db: ScopeDatabase, entries: Sequence[WriteEntry], *, durable: bool = True) -> None:
    """``durable=False``: commit without a checkpoint (the caller checkpoints later: ``ScopeDatabase.write``)."""
    if not entries:
        return
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
        known_sessions = existing_ids(db, "Session", sessions)
        new_sessions = [s for sid, s in sessions.items() if sid not in known_sessions]
        known_messages = existing_ids(db, "Message", messages)
        new_messages = [m for mid, m in messages.items() if mid not in known_messages]
        rows = [v[0] for v in latest.values()]
        stale = sorted(deleted | set(latest))  # every round id written is replaced, if Kuzu has it
        with db.write(durable=durable) as txn:
            q.write_messages(
                txn,
                new_sessions=new_sessions,
                messages=new_messages,
                replaced_round_ids=stale,
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
