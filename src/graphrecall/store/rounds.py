"""Queries over raw history: sessions, messages and rounds (writes in bulk, reads by id, vector and BM25 search)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import pyarrow as pa

from graphrecall.embed.base import Vectors
from graphrecall.models import Round, Session, utcnow
from graphrecall.store import schema
from graphrecall.store.arrow import TS, edge_table
from graphrecall.store.database import MATCH_SCOPE, ScopeDatabase, WriteTxn, owned
from graphrecall.store.known import (
    existing_ids as existing_ids,  # the facade checks ids by table through here
)
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow, round_texts_of
from graphrecall.store.vectors import half_column, is_half, matrix
from graphrecall.store.visibility import round_condition


def session_messages(db: ScopeDatabase, session_id: str) -> list[MessageRow]:
    """A session's messages in order, through its edges (a filter on ``m.session_id`` would scan every message)."""
    rows = db.query(
        "MATCH (m:Message)-[:MSG_IN]->(:Session {key: $s}) RETURN m.id, m.session_id, m.idx, m.role, m.text, m.at, "
        "m.lang ORDER BY m.idx",
        {"s": db.key(session_id)},
    )
    return [MessageRow(*r) for r in rows]


def write_batch(
    txn: WriteTxn,
    *,
    new_sessions: Sequence[SessionRow],
    messages: Sequence[MessageRow],
    rounds: Sequence[RoundRow],
    user_vecs: Vectors,
    reply_vecs: Vectors,
    replaced_round_ids: Sequence[str],
    dim: int,
    passages: Sequence[Vectors | None] = (),
) -> None:
    """Write one ingest batch whose vectors are all known, inside the caller's transaction: bulk COPY for nodes
    and edges. (A large batch is written in chunks while the next one embeds: ``graphrecall.writer``.)"""
    write_messages(txn, new_sessions=new_sessions, messages=messages, replaced_round_ids=replaced_round_ids)
    write_rounds(txn, rounds, user_vecs, reply_vecs, dim, passages)
    touch_sessions(txn, messages)


def write_messages(
    txn: WriteTxn,
    *,
    new_sessions: Sequence[SessionRow],
    messages: Sequence[MessageRow],
    replaced_round_ids: Sequence[str],
) -> None:
    """The part of a batch that needs no vectors: replaced rounds out, new sessions and messages in."""
    now = utcnow()
    delete_rounds(txn, replaced_round_ids)
    if new_sessions:
        txn.copy(
            "Session",
            pa.table(
                {
                    "id": [s.id for s in new_sessions],
                    "started_at": pa.array([s.started_at for s in new_sessions], TS),
                    "extract_status": ["none"] * len(new_sessions),
                    "extract_error": pa.array([None] * len(new_sessions), pa.string()),
                    "updated_at": pa.array([now] * len(new_sessions), TS),
                }
            ),
        )
    if messages:
        txn.copy(
            "Message",
            pa.table(
                {
                    "id": [m.id for m in messages],
                    "session_id": [m.session_id for m in messages],
                    "idx": pa.array([m.idx for m in messages], pa.int64()),
                    "role": [m.role for m in messages],
                    "text": [m.text for m in messages],
                    "at": pa.array([m.at for m in messages], TS),
                    "lang": [m.lang for m in messages],
                }
            ),
        )
        txn.copy("MSG_IN", edge_table([(m.id, m.session_id) for m in messages]))


def delete_rounds(txn: WriteTxn, round_ids: Sequence[str]) -> None:
    """Delete rounds with their passages: one statement per round, which returns the passage ids it deleted (point
    deletes: ``UNWIND ... MATCH`` plans a scan of the whole table)."""
    if not round_ids:
        return
    passages: list[str] = []
    for rid in round_ids:
        rows = txn.execute(
            "MATCH (r:Round {key: $k}) OPTIONAL MATCH (p:Passage)-[:PASSAGE_OF]->(r) "
            "WITH r, p, p.id AS pid DETACH DELETE p, r RETURN pid",
            {"k": txn.key(rid)},
        )
        passages += [row[0] for row in rows if row[0] is not None]
    txn.unindex("Passage", passages)
    txn.unindex("Round", round_ids)


def delete_passages(txn: WriteTxn, passage_ids: Sequence[str]) -> None:
    """Delete passages by key, whether or not an edge reaches them (a torn commit, ``store.wal.apply``)."""
    gone: list[str] = []
    for pid in passage_ids:
        rows = txn.execute(
            "MATCH (p:Passage {key: $k}) WITH p, p.id AS pid DETACH DELETE p RETURN pid", {"k": txn.key(pid)}
        )
        gone += [row[0] for row in rows]
    txn.unindex("Passage", gone)


def write_rounds(
    txn: WriteTxn,
    rounds: Sequence[RoundRow],
    user_vecs: Vectors,
    reply_vecs: Vectors,
    dim: int,
    passages: Sequence[Vectors | None] = (),
) -> None:
    """Rounds with their vectors and edges (their messages must be written already), and the passage vectors of
    long user turns (``passages[i]`` for ``rounds[i]``: ``None``, or (passages, dim) from
    ``embed.passages.embed_passages``). Several calls may share one transaction: ingest writes a batch's rounds in
    chunks while it embeds the next chunk."""
    if not rounds:
        return
    if passages and len(passages) != len(rounds):
        raise ValueError(f"{len(passages)} passage arrays for {len(rounds)} rounds")
    txn.copy(
        "Round",
        pa.table(
            {
                "id": [r.id for r in rounds],
                "session_id": [r.session_id for r in rounds],
                "idx": pa.array([r.idx for r in rounds], pa.int64()),
                "text": [r.text for r in rounds],
                "user_text": [r.user_text for r in rounds],
                "terms": [r.terms for r in rounds],
                "at": pa.array([r.at for r in rounds], TS),
                "message_ids": pa.array([r.message_ids for r in rounds], pa.list_(pa.string())),
                "embedding": half_column(user_vecs, dim),
                "reply_embedding": half_column(reply_vecs, dim),
            }
        ),
    )
    txn.copy("ROUND_IN", edge_table([(r.id, r.session_id) for r in rounds]))
    if passages:
        write_passages(txn, list(zip((r.id for r in rounds), passages, strict=True)), dim)


def write_passages(txn: WriteTxn, owned: Sequence[tuple[str, Vectors | None]], dim: int) -> None:
    """Passage rows and their ``PASSAGE_OF`` edges for rounds already written (or written in this transaction):
    ``(round id, (passages, dim) vectors or None)`` per round."""
    kept = [(rid, p) for rid, p in owned if p is not None and len(p)]
    if not kept:
        return
    keys = [(rid, i) for rid, p in kept for i in range(len(p))]  # (round id, passage index), in row order
    ids = [schema.passage_id(rid, i) for rid, i in keys]
    owners = [rid for rid, _ in keys]
    txn.copy(
        "Passage",
        pa.table(
            {
                "id": ids,
                "round_id": owners,
                "idx": pa.array([i for _, i in keys], pa.int64()),
                "embedding": half_column(np.concatenate([p for _, p in kept]), dim),
            }
        ),
    )
    txn.copy("PASSAGE_OF", edge_table(list(zip(ids, owners, strict=True))))


def rounds_without_passages(
    db: ScopeDatabase, longer_than: int, limit: int, after: str = "", *, among: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """``(id, user text)`` of rounds whose user side is longer than ``longer_than`` characters and that have no
    passages: stored before schema 4, or while a higher ``passage_from_chars`` was set (``Memory.backfill_passages``).
    At most ``limit``, by id, from the first id above ``after`` (a page's last id: a round that gets no passages,
    one too short to split, is not read again); with ``among``, only those ids. A round's user side is its user
    messages joined by newlines (``rows.round_texts``), so its length is theirs plus one per join."""
    only = " AND r.id IN $among" if among is not None else ""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} WHERE r.id > $after{only} "
        "AND NOT EXISTS { MATCH (:Passage)-[:PASSAGE_OF]->(r) } "
        f"MATCH {schema.round_messages('r', 'm')} WHERE m.role = 'user' AND list_contains(r.message_ids, m.id) "
        "WITH r, sum(size(m.text)) + count(m) - 1 AS n WHERE n > $n "
        "RETURN r.id, r.message_ids, r.session_id ORDER BY r.id LIMIT $k",
        {
            "n": longer_than,
            "k": limit,
            "after": after,
            **({"among": list(among)} if among is not None else {}),
        },
    )
    texts = message_texts(db, [r[2] for r in rows])
    return [(r[0], round_texts_of(r[1] or [], texts)[1]) for r in rows]


def message_texts(db: ScopeDatabase, session_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Message id -> (role, text) of the messages of these sessions: what a round's texts are made of (Kuzu keeps
    them once, in ``Message``: ``schema.INDEX_ONLY``; a round's messages are those its ``message_ids`` name)."""
    rows = db.query_each(
        "MATCH (:Session {key: $k})<-[:MSG_IN]-(m:Message) RETURN m.id, m.role, m.text",
        [{"k": db.key(sid)} for sid in sorted(set(session_ids))],
    )
    return {r[0]: (r[1], r[2] or "") for r in rows}


def touch_sessions(txn: WriteTxn, messages: Sequence[MessageRow]) -> None:
    """Mark the sessions that received messages as updated now."""
    now = utcnow()
    for sid in sorted({m.session_id for m in messages}):  # point updates, as in ``write_messages``
        txn.execute("MATCH (s:Session {key: $k}) SET s.updated_at = $now", {"k": txn.key(sid), "now": now})


def vector_search(db: ScopeDatabase, index: str, vec: Vectors, k: int) -> list[tuple[str, float]]:
    """Top-k (id, cosine similarity), best first, from the derived vector index ``index`` (``store.derived``)."""
    return db.indexes.vector_search(index, vec, k)


def round_vectors(db: ScopeDatabase, ids: Sequence[str], side: str = "user") -> dict[str, Vectors]:
    """The stored user-side (or reply-side) vectors of these rounds, by id, from the derived index."""
    return db.indexes.vectors("round_user" if side == "user" else "round_reply", ids)


def exact_vector_search(
    db: ScopeDatabase, column: str, vec: Vectors, k: int, table: str = "Round"
) -> list[tuple[str, float]]:
    """The same ranking by a full scan in Kuzu, without an index: the reference the derived indexes are checked
    against (tests, ``benchmarks/perf``, and the retriever's ``use_index=False``, which only they set). Cosine
    similarity; a half-precision column (``store.vectors``) is read whole and scored here, since Kuzu's
    ``array_cosine_similarity`` takes only float arrays."""
    if is_half(table, column):
        return _exact_half_search(db, table, column, vec, k)
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('r', table)} WITH r, array_cosine_similarity(r.{column}, $v) AS s RETURN r.id, s ORDER BY s DESC "
        "LIMIT $k",
        {"v": np.asarray(vec, dtype=np.float32).tolist(), "k": k},
    )
    return [(r[0], float(r[1])) for r in rows]


def _exact_half_search(
    db: ScopeDatabase, table: str, column: str, vec: Vectors, k: int
) -> list[tuple[str, float]]:
    frame = db.arrow(f"{MATCH_SCOPE}MATCH {owned('r', table)} RETURN r.id AS id, r.{column} AS v")
    if frame.num_rows == 0 or k <= 0:
        return []
    q = np.asarray(vec, dtype=np.float32).reshape(-1)
    mat = matrix(frame.column("v"), q.shape[0])
    sims = (mat @ q) / np.maximum(np.linalg.norm(mat, axis=1) * np.linalg.norm(q), 1e-12)
    ids = frame.column("id").to_pylist()
    order = sorted(range(len(ids)), key=lambda i: (-float(sims[i]), ids[i]))[:k]
    return [(ids[i], float(sims[i])) for i in order]


def passage_scores(hits: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Passage hits (id, similarity) as round id -> the best similarity of its passages."""
    out: dict[str, float] = {}
    for pid, s in hits:
        rid = schema.round_of_passage(pid)
        out[rid] = max(out.get(rid, -1.0), s)
    return out


def lexical_search(db: ScopeDatabase, index: str, terms: str, k: int) -> list[tuple[str, float]]:
    """BM25 top-k with OR semantics over normalized terms (see ``graphrecall.text``), from the derived lexical
    index ``index``."""
    return db.indexes.lexical_search(index, terms, k)


def rounds_between(
    db: ScopeDatabase, start: datetime, end: datetime, limit: int, *, until: datetime | None = None
) -> list[str]:
    """Ids of the rounds dated between ``start`` and ``end`` (and visible at ``until``), oldest first."""
    cond, params = round_condition("r", until)
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} WHERE r.at >= $a AND r.at <= $b AND {cond} RETURN r.id ORDER BY r.at "
        "LIMIT $n",
        {"a": start, "b": end, "n": limit, **params},
    )
    return [r[0] for r in rows]


def fetch_rounds(db: ScopeDatabase, ids: Sequence[str]) -> dict[str, Round]:
    """Rounds by id: from the round index's stored documents, and from Kuzu for any it lacks."""
    if not ids:
        return {}
    out = db.indexes.rounds(ids)
    missing = [rid for rid in dict.fromkeys(ids) if rid not in out]
    if missing:
        out.update(kuzu_rounds(db, missing))
    return out


def kuzu_rounds(db: ScopeDatabase, ids: Sequence[str]) -> dict[str, Round]:
    """Rounds by id from Kuzu. One primary-key lookup per id, on purpose: Kuzu 0.11.3 plans ``UNWIND $ids MATCH
    (r:Round {id: i})`` as a hash join over a scan of the whole table, which at 100k rounds exhausts a 64 MiB buffer
    pool (and an ``IN`` filter scans too: ~420 ms); 30 point lookups take ~25 ms at 100k rounds (benchmarks/perf).
    A round's texts are its messages' (``schema.INDEX_ONLY``), read from its session. Searches read rounds from
    the lexical index's stored documents, so this runs only for a round the index lacks."""
    rows = db.query_each(
        "MATCH (r:Round {key: $k}) RETURN r.id, r.session_id, r.idx, r.at, r.message_ids",
        [{"k": db.key(rid)} for rid in dict.fromkeys(ids)],
    )
    texts = message_texts(db, [r[1] for r in rows])
    out: dict[str, Round] = {}
    for rid, session_id, idx, at, message_ids in rows:
        text, user = round_texts_of(message_ids or [], texts)
        out[rid] = Round(
            id=rid, session_id=session_id, idx=idx, text=text, user_text=user, at=at, message_ids=message_ids
        )
    return out


def list_sessions(db: ScopeDatabase, *, limit: int = 1000, offset: int = 0) -> list[Session]:
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('s', 'Session')} RETURN s.id, s.started_at, s.extract_status ORDER BY s.started_at, s.id "
        "SKIP $o LIMIT $n",
        {"o": offset, "n": limit},
    )
    return [Session(id=r[0], started_at=r[1], extract_status=r[2] or "none") for r in rows]


def get_session(db: ScopeDatabase, session_id: str) -> Session | None:
    rows = db.query(
        "MATCH (s:Session {key: $k}) RETURN s.id, s.started_at, s.extract_status", {"k": db.key(session_id)}
    )
    if not rows:
        return None
    msgs = [m.to_message() for m in session_messages(db, session_id)]
    r = rows[0]
    return Session(id=r[0], started_at=r[1], extract_status=r[2] or "none", messages=msgs)


def count(db: ScopeDatabase, label: str) -> int:
    """How many rows of ``label`` the scope holds."""
    return int(db.query(f"{MATCH_SCOPE}MATCH {owned('n', label)} RETURN count(n)")[0][0])


def counts(db: ScopeDatabase) -> dict[str, int]:
    return {label: count(db, label) for label in ("Session", "Message", "Round", "Fact", "Event", "Entity")}
