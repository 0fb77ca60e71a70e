"""``TailIndex``: the unflushed part of a scope's history, in memory, searched exactly.

Why: an acknowledged write must be visible to the next search (read-your-writes) although it reaches Kuzu only at
the next flush. The tail is small (at most a few batches), so exact search costs less than a Kuzu index lookup:
cosine over its user and reply vectors, and BM25 with the project's own tokenization (``graphrecall.text.tokenize``, the
terms Kuzu's FTS indexes) and the same k1/b as every BM25 of the project (``graphrecall.text``).

Life cycle: built from ``WriteLog.pending()`` on open, ``add`` after every append, ``trim(upto_seq)`` after every
flush. A round id written again (a session that got more turns) keeps only its newest version, and ``shadowed()``
tells the retriever which Kuzu rows are stale or deleted: **the tail wins on id**. Between a flush's Kuzu commit
and the trim a round is in both; dropping Kuzu's hits whose id is shadowed keeps each round once.

Scores: the cosine is the same measure as Kuzu's (1 - cosine distance), so tail and store vector lists can be
merged by score. The tail's BM25 uses the tail's own document statistics, so it is a separate ranked list for rank
fusion, not comparable score for score with Kuzu's. ``question_date`` filtering is the caller's (``Round.at``).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from graphrecall.models import Round
from graphrecall.store.rows import MessageRow, RoundRow, SessionRow
from graphrecall.store.wal.entry import WriteEntry
from graphrecall.text import BM25_B as B
from graphrecall.text import BM25_K1 as K1
from graphrecall.text import query_tokens, tokenize

Side = Literal["user", "reply"]


@dataclass(frozen=True)
class _Indexed:
    """A round of the tail with what exact search needs: its normalized vectors and its term counts. The round
    itself is the entry's ``RoundRow``, shared, not copied."""

    seq: int
    row: RoundRow
    user_vec: np.ndarray[Any, np.dtype[np.float32]]
    reply_vec: np.ndarray[Any, np.dtype[np.float32]]
    terms: Counter[str]
    length: int
    passages: np.ndarray[Any, np.dtype[np.float32]] | None = None  # a long user turn's passage vectors


def _unit(v: np.ndarray[Any, np.dtype[Any]]) -> np.ndarray[Any, np.dtype[np.float32]]:
    out: np.ndarray[Any, np.dtype[np.float32]] = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(out))
    return (out / np.float32(n)).astype(np.float32) if n > 0 else out


class TailIndex:
    """Thread-safe: ``add``/``trim`` build new dicts and swap them in under a lock; searches run on an immutable
    ``snapshot()`` (cached until the next change), so they never wait for a writer or a flush."""

    def __init__(self, dim: int, entries: Iterable[WriteEntry] = ()) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._rounds: dict[str, _Indexed] = {}
        self._tombstones: dict[str, int] = {}  # round id -> seq of the entry that deleted it
        self._messages: dict[str, tuple[int, MessageRow]] = {}
        self._sessions: dict[str, tuple[int, SessionRow]] = {}
        self._trimmed_upto = 0
        self._snapshot: TailSnapshot | None = None
        for e in entries:
            self.add(e)

    # -- maintenance -----------------------------------------------------------------------------------------
    def add(self, entry: WriteEntry) -> None:
        """Take in an appended entry (``seq`` set). An older seq never overwrites a newer version of an id."""
        if entry.seq <= 0:
            raise ValueError("only entries with a seq (returned by WriteLog.append) can enter the tail")
        if entry.dim != self.dim:
            raise ValueError(f"entry seq {entry.seq} has dim {entry.dim}; this tail holds dim {self.dim}")
        users, replies, passages = entry.user_matrix(), entry.reply_matrix(), entry.passages()
        built = []
        for i, r in enumerate(entry.rounds):
            toks = tokenize(f"{r.user_text}\n{r.reply_text}")  # the text ingest's ``terms`` are made from
            parts = passages[i]
            built.append(
                _Indexed(
                    entry.seq,
                    r,
                    _unit(users[i]),
                    _unit(replies[i]),
                    Counter(toks),
                    len(toks),
                    None if parts is None else np.stack([_unit(p) for p in parts]),
                )
            )
        with self._lock:
            if entry.seq <= self._trimmed_upto:
                return  # flushed (and trimmed) before it got here: Kuzu has it
            # Copy, change, swap: readers take a reference to the current dicts without locking.
            rounds, tombstones = dict(self._rounds), dict(self._tombstones)
            messages, sessions = dict(self._messages), dict(self._sessions)
            for rid in entry.replaced_round_ids:
                if tombstones.get(rid, 0) < entry.seq:
                    tombstones[rid] = entry.seq
                old = rounds.get(rid)
                if old is not None and old.seq < entry.seq:
                    del rounds[rid]
            for tr in built:
                old = rounds.get(tr.row.id)
                if old is None or old.seq < tr.seq:
                    rounds[tr.row.id] = tr
            for m in entry.messages:
                if m.id not in messages or messages[m.id][0] < entry.seq:
                    messages[m.id] = (entry.seq, m)
            for s in entry.sessions:
                if s.id not in sessions:
                    sessions[s.id] = (entry.seq, s)
            self._rounds, self._tombstones, self._messages, self._sessions = (
                rounds,
                tombstones,
                messages,
                sessions,
            )
            self._snapshot = None

    def trim(self, upto_seq: int) -> None:
        """Forget what entries up to ``upto_seq`` wrote: it is in Kuzu now."""
        with self._lock:
            self._trimmed_upto = max(self._trimmed_upto, upto_seq)
            self._rounds = {k: v for k, v in self._rounds.items() if v.seq > upto_seq}
            self._tombstones = {k: s for k, s in self._tombstones.items() if s > upto_seq}
            self._messages = {k: v for k, v in self._messages.items() if v[0] > upto_seq}
            self._sessions = {k: v for k, v in self._sessions.items() if v[0] > upto_seq}
            self._snapshot = None

    # -- reading ---------------------------------------------------------------------------------------------
    def snapshot(self) -> TailSnapshot:
        """An immutable view of the tail now. A search must take it BEFORE it queries Kuzu: a flush commits to Kuzu
        first and trims the tail after, so snapshot-then-Kuzu sees every round at least once (twice at worst,
        which ``shadowed`` resolves), while Kuzu-then-snapshot could miss a round flushed in between."""
        with self._lock:
            if self._snapshot is None:
                self._snapshot = TailSnapshot(
                    self.dim, self._rounds, frozenset(self._rounds) | set(self._tombstones)
                )
            return self._snapshot

    def __len__(self) -> int:
        return len(self._rounds)

    def messages(self, session_id: str) -> list[MessageRow]:
        """Unflushed messages of a session in order: with Kuzu's, what ingest must treat as stored."""
        snap = self._messages
        return sorted(
            (m for _, m in snap.values() if m.session_id == session_id), key=lambda m: (m.idx, m.id)
        )

    def message_ids(self) -> set[str]:
        return set(self._messages)

    def sessions(self) -> list[SessionRow]:
        """Sessions created by unflushed entries."""
        return [v[1] for v in self._sessions.values()]


class TailSnapshot:
    """The tail at one moment: its rounds, the Kuzu ids they shadow, and exact search over them."""

    def __init__(self, dim: int, rounds: dict[str, _Indexed], shadowed: frozenset[str]) -> None:
        self.dim = dim
        self._rounds = rounds
        self._shadowed = shadowed
        self._public: dict[str, Round] = {}  # ``models.Round`` of each row, made when first asked for
        self._ids = list(rounds)
        if self._ids:
            self._user = np.stack([rounds[i].user_vec for i in self._ids])
            self._reply = np.stack([rounds[i].reply_vec for i in self._ids])
        else:
            self._user = self._reply = np.zeros((0, dim), dtype=np.float32)
        # Passages of long user turns, and the position in ``_ids`` of the round each belongs to.
        parts: list[tuple[int, np.ndarray[Any, np.dtype[np.float32]]]] = []
        for j, i in enumerate(self._ids):
            p = rounds[i].passages
            if p is not None:
                parts.append((j, p))
        self._passages = np.concatenate([p for _, p in parts]) if parts else np.zeros((0, dim), np.float32)
        self._owner = np.asarray([j for j, p in parts for _ in range(len(p))], dtype=np.int64)

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def shadowed(self) -> frozenset[str]:
        """Round ids whose Kuzu row, if any, must be ignored: rewritten or deleted by an unflushed entry."""
        return self._shadowed

    def rounds(self) -> list[Round]:
        """The tail's rounds (newest version of each id), oldest first."""
        rows = sorted((t.row for t in self._rounds.values()), key=lambda r: (r.at, r.session_id, r.idx))
        return [self._round(r.id) for r in rows]

    def get(self, ids: Sequence[str]) -> dict[str, Round]:
        return {i: self._round(i) for i in ids if i in self._rounds}

    def _round(self, rid: str) -> Round:
        found = self._public.get(rid)
        if found is None:  # two threads may both make it: the same value, either one is kept
            found = self._public.setdefault(rid, self._rounds[rid].row.to_round())
        return found

    def vectors(
        self, ids: Sequence[str], side: Side = "user"
    ) -> dict[str, np.ndarray[Any, np.dtype[np.float32]]]:
        """The user-side (or reply-side) vectors of these rounds that the tail holds, by id."""
        return {
            i: (self._rounds[i].user_vec if side == "user" else self._rounds[i].reply_vec)
            for i in ids
            if i in self._rounds
        }

    def vector_search(
        self, vec: Any, k: int, side: Side = "user", *, passages: bool = True, passage_penalty: float = 0.0
    ) -> list[tuple[str, float]]:
        """Top-k (round id, cosine similarity) over the user-side or reply-side vectors, best first. On the user
        side a long turn scores the best of its vector and its passages' (``passages=False``: its vector only),
        as the derived ``round_passage`` index makes it score once flushed (a passage less ``passage_penalty``)."""
        if not self._ids or k < 1:
            return []
        q = _unit(np.asarray(vec, dtype=np.float32).reshape(-1))
        if q.shape[0] != self.dim:
            raise ValueError(f"query vector has dim {q.shape[0]}; this tail holds dim {self.dim}")
        scores = (self._user if side == "user" else self._reply) @ q
        if side == "user" and passages and len(self._owner):
            np.maximum.at(scores, self._owner, self._passages @ q - np.float32(passage_penalty))
        ids = self._ids
        order = sorted(range(len(ids)), key=lambda i: (-float(scores[i]), ids[i]))[:k]
        return [(ids[i], float(scores[i])) for i in order]

    def bm25_search(
        self, query: str, k: int, k1: float = K1, b: float = B, *, drop_query_stopwords: bool = True
    ) -> list[tuple[str, float]]:
        """Top-k (round id, BM25) with OR semantics over the tail's rounds; statistics are the tail's own. The
        question's terms are the ones Kuzu's BM25 gets (``graphrecall.text.query_tokens``)."""
        terms = set(query_tokens(query, drop_query_stopwords=drop_query_stopwords))
        snap = list(self._rounds.values())
        if not terms or not snap or k < 1:
            return []
        n = len(snap)
        avg = sum(t.length for t in snap) / n or 1.0
        df: Counter[str] = Counter()
        for t in snap:
            df.update(w for w in terms if w in t.terms)
        idf = {w: math.log((n - df[w] + 0.5) / (df[w] + 0.5) + 1.0) for w in terms}
        out: list[tuple[str, float]] = []
        for t in snap:
            hit = [w for w in terms if w in t.terms]
            if not hit:
                continue
            norm = k1 * (1 - b + b * t.length / avg)
            score = sum(idf[w] * t.terms[w] * (k1 + 1) / (t.terms[w] + norm) for w in hit)
            out.append((t.row.id, score))
        out.sort(key=lambda kv: (-kv[1], kv[0]))
        return out[:k]
