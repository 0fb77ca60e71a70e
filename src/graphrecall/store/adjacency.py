"""The graph around a scope's facts and events, held in memory: what the graph stage of a search reads instead of
Kuzu.

Why. Entity expansion and the fact and event lists (``retrieve.graph``) need, for a few hundred ids per search,
whether each is visible at the question's cutoff (``store.visibility``), the facts about and events involving the
entities the question names, and the rounds each came from. As Kuzu statements that was dozens of 2-6 ms queries per
search (~600 ms at 10,000 entities, against ~5 ms for the same sessions unextracted: docs/benchmarks.md, "Entity
expansion at 10,000 entities"). Here the same relations are dictionaries, and a search runs no Kuzu statement.

**The invariant.** An ``Adjacency`` is derived: built from one read of the scope's rows in Kuzu, never written to
by anyone, never a second source of truth. It is labelled with the scope's ``Generations`` (``store.database``) at
the time of its read (before it: a commit bumps them after it lands) and used only while they say nothing it
reflects has changed since. Every committed write goes through ``ScopeDatabase.write()``, which counts it: a write
of anything but chat (facts, events, entities, their edges, supersessions, reinforcements, erasures, disputes...)
bumps ``Generations.graph`` and the next search rebuilds the adjacency. A write of chat alone (sessions, messages,
rounds, passages: what ingest and the write log's replay write) leaves a ``ChatNote`` of the sessions and rounds
it inserted and the rounds it replaced, and rebuilds the adjacency only when one of those touches it (a session
that an event names and that was missing, a round that holds a message a fact or an event comes from); so a
service that ingests chat and searches does not rebuild it on every search. A build keeps its result only when
nothing it holds was written during its read.

**The semantics** are those of the Cypher it replaces, to the NULL: ``Adjacency.fact_visible`` is
``visibility.fact_condition`` and ``_session_visible`` is ``visibility.event_condition`` in Python; the similarity
of a neighbour to the question is Kuzu's ``array_cosine_similarity`` computed over the vectors of the derived
vector indexes (``fact_vec``, ``event_vec``, which hold the rows' embeddings normalized), equal to Kuzu's to float32
rounding (1.8e-7 at most, measured; every ranking identical). ``tests/integration/test_adjacency.py`` checks every
answer against the Kuzu queries of ``store.facts`` they replace.

Cost: the build reads the scope's facts, events, sessions, rounds and the edges between them (nine statements:
~270 ms and 12 MB held at 20,000 facts, docs/benchmarks.md); it runs on the first search after a write of extracted
memory, not after a write of chat, or at the end of an extraction run for a scope being searched (``renew``).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from graphrecall.embed.base import Vectors
from graphrecall.store.database import MATCH_SCOPE, ChatNote, Generations, ScopeDatabase, owned

VectorsById = Callable[[str, Sequence[str]], Mapping[str, np.ndarray]]
"""``DerivedIndexes.vectors``: index name, ids -> the stored vector of each id it holds."""


@dataclass(frozen=True, slots=True)
class FactTimes:
    """What ``visibility.fact_condition`` reads of one fact: its own times, and when it was first replaced."""

    recorded_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    expired: bool  # ``expired_at IS NOT NULL``: replaced, as known with no cutoff
    replaced_always: bool  # a fact without ``recorded_at`` supersedes it: replaced at every cutoff
    replaced_at: datetime | None  # the earliest ``recorded_at`` of the facts that supersede it


@dataclass
class Adjacency:
    """The scope's facts, events and their edges as of ``writes``/``graph`` (``store.database.Generations``); read
    only, but for ``checked``."""

    writes: int
    graph: int
    facts: Mapping[str, FactTimes]
    event_session: Mapping[str, str | None]  # event id -> its session_id
    started: Mapping[str, datetime | None]  # session id -> started_at
    about: Mapping[str, Sequence[str]]  # entity id -> ids of the facts ABOUT it
    involving: Mapping[str, Sequence[str]]  # entity id -> ids of the events with it as SUBJECT or OBJECT
    rounds: Mapping[str, Mapping[str, list[str]]]  # "Fact"/"Event" -> id -> sorted ids of its source rounds
    source_messages: frozenset[str]  # every message a fact or an event comes from
    source_round_ids: frozenset[str]  # every round in ``rounds``
    orphans: frozenset[str]  # sessions that events name and the scope does not hold
    checked: int = 0  # the writes whose chat notes are known not to touch it (``writes`` at first)

    def touched_by(self, note: ChatNote) -> bool:
        """Whether a write of chat changed what this adjacency holds: it inserted a session an event names, or
        deleted a round that a fact or an event comes from, or inserted a round that holds a message one comes
        from (as the write log's replay replaces a round, or a session's last round grows)."""
        return not (
            self.orphans.isdisjoint(note.sessions)
            and self.source_round_ids.isdisjoint(note.rounds_deleted)
            and self.source_messages.isdisjoint(note.round_messages)
        )

    # -- visibility (``store.visibility``, in Python) -------------------------------------------------------------
    def fact_visible(self, fact_id: str, until: datetime | None, as_of: datetime | None) -> bool:
        """``fact_condition``: recorded by ``until`` and current then (not replaced by a fact recorded by then),
        or, with ``as_of``, valid at ``as_of``. A fact the scope does not hold is not visible."""
        f = self.facts.get(fact_id)
        if f is None:
            return False
        if until is None:
            replaced = f.expired
        else:
            if f.recorded_at is not None and f.recorded_at > until:
                return False
            replaced = f.replaced_always or (f.replaced_at is not None and f.replaced_at <= until)
        if as_of is None:
            return not replaced
        if f.valid_from is not None and f.valid_from > as_of:
            return False
        return f.valid_to is None or f.valid_to > as_of or not replaced

    def visible_fact_ids(
        self, ids: Iterable[str], until: datetime | None, as_of: datetime | None
    ) -> set[str]:
        """``store.facts.visible_fact_ids``."""
        until, as_of = _naive(until), _naive(as_of)
        return {i for i in ids if self.fact_visible(i, until, as_of)}

    def event_visible(self, event_id: str, until: datetime | None, as_of: datetime | None) -> bool:
        """``event_condition`` over the event's session, which must be stored."""
        sid = self.event_session.get(event_id)
        return sid is not None and sid in self.started and _session_visible(self.started[sid], until, as_of)

    def visible_event_ids(
        self, ids: Iterable[str], until: datetime | None, as_of: datetime | None
    ) -> set[str]:
        """``store.facts.visible_event_ids``: with no cutoff and no ``as_of``, every id as given."""
        if until is None and as_of is None:
            return set(ids)
        until, as_of = _naive(until), _naive(as_of)
        return {i for i in ids if self.event_visible(i, until, as_of)}

    # -- the neighbourhood of named entities ----------------------------------------------------------------------
    def entity_neighbourhood(
        self,
        entity_ids: Sequence[str],
        vec: Vectors,
        k: int,
        vectors: VectorsById,
        *,
        until: datetime | None,
        as_of: datetime | None,
    ) -> list[tuple[str, str, float]]:
        """``store.facts.entity_neighbourhood``: (kind, id, similarity) of the visible current facts about, and
        the visible events involving, the entities, the ``k`` most similar of each kind (ties by id)."""
        facts, events = self.neighbourhood_ids(entity_ids, until=until, as_of=as_of)
        return self.rank_neighbourhood(facts, events, vec, k, vectors)

    def neighbourhood_ids(
        self, entity_ids: Sequence[str], *, until: datetime | None, as_of: datetime | None
    ) -> tuple[list[str], list[str]]:
        """The visible current facts about, and the visible events involving, the entities: the half of
        ``entity_neighbourhood`` that needs no query vector (the retriever reads it while the query is embedded)."""
        until, as_of = _naive(until), _naive(as_of)
        named = list(dict.fromkeys(entity_ids))
        fact_ids = [
            f
            for f in dict.fromkeys(f for e in named for f in self.about.get(e, ()))
            if self.fact_visible(f, until, as_of)
        ]
        event_ids = [
            x
            for x in dict.fromkeys(x for e in named for x in self.involving.get(e, ()))
            if self.event_visible(x, until, as_of)
        ]
        return fact_ids, event_ids

    @staticmethod
    def rank_neighbourhood(
        fact_ids: Sequence[str], event_ids: Sequence[str], vec: Vectors, k: int, vectors: VectorsById
    ) -> list[tuple[str, str, float]]:
        """(kind, id, similarity) of the ``k`` facts and ``k`` events most similar to ``vec`` (ties by id)."""
        out: list[tuple[str, str, float]] = []
        for kind, index, ids in (("fact", "fact_vec", fact_ids), ("event", "event_vec", event_ids)):
            if ids:
                sims = _cosines(vec, vectors(index, ids))
                out += [(kind, i, s) for i, s in sorted(sims.items(), key=lambda x: (-x[1], x[0]))[:k]]
        return out

    def source_rounds(self, table: str, ids: Iterable[str]) -> dict[str, list[str]]:
        """``store.facts.source_rounds``: fact or event id -> ids of the rounds holding its source messages (ids
        with none are left out)."""
        by_id = self.rounds[table]
        return {i: list(by_id[i]) for i in ids if i in by_id}


def _session_visible(started_at: datetime | None, until: datetime | None, as_of: datetime | None) -> bool:
    """``visibility.event_condition`` for one session's start (a NULL start fails a bound, as in Kuzu)."""
    for bound in (until, as_of):
        if bound is not None and (started_at is None or started_at > bound):
            return False
    return True


def _naive(t: datetime | None) -> datetime | None:
    """A bound as Kuzu compares it with stored timestamps (naive UTC): an aware one converted to UTC."""
    return t.astimezone(UTC).replace(tzinfo=None) if t is not None and t.tzinfo is not None else t


def _cosines(vec: Vectors, stored: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Id -> cosine similarity of its stored vector to ``vec``, as Kuzu's ``array_cosine_similarity`` computes it
    in single precision (the vector indexes hold the vectors normalized; a zero vector has similarity 0)."""
    if not stored:
        return {}
    q = np.asarray(vec, dtype=np.float32).reshape(-1)
    ids = list(stored)
    mat = np.stack([stored[i] for i in ids]).astype(np.float32, copy=False)
    qn = float(np.linalg.norm(q))
    norms = np.linalg.norm(mat, axis=1)
    dots = mat @ q
    with np.errstate(divide="ignore", invalid="ignore"):
        sims = np.where((norms > 0) & (qn > 0), dots / (norms * qn), 0.0)
    return {i: float(s) for i, s in zip(ids, sims.astype(np.float32), strict=True)}


# -- building it, once per generation ---------------------------------------------------------------------------
def _rows(db: ScopeDatabase, pattern: str, returns: str) -> Iterator[tuple[Any, ...]]:
    """The rows of one statement over the scope, read as arrow (a Python row at a time from Kuzu costs ~3x more at
    20,000 rows)."""
    table = db.arrow(f"{MATCH_SCOPE}MATCH {pattern} RETURN {returns}")
    return zip(*(table.column(i).to_pylist() for i in range(table.num_columns)), strict=True)


def build(db: ScopeDatabase) -> Adjacency:
    """Read the scope's facts, events, sessions, rounds and the edges between them from Kuzu (nine statements)."""
    gen = db.generations
    writes, graph = gen.writes, gen.graph
    replaced_at: dict[str, datetime] = {}
    replaced_always: set[str] = set()
    for fid, at in _rows(db, f"{owned('f', 'Fact')}<-[:SUPERSEDES]-(n:Fact)", "f.id, n.recorded_at"):
        if at is None:
            replaced_always.add(fid)
        elif fid not in replaced_at or at < replaced_at[fid]:
            replaced_at[fid] = at
    facts = {
        fid: FactTimes(
            recorded_at=recorded,
            valid_from=valid_from,
            valid_to=valid_to,
            expired=expired is not None,
            replaced_always=fid in replaced_always,
            replaced_at=replaced_at.get(fid),
        )
        for fid, recorded, valid_from, valid_to, expired in _rows(
            db, owned("f", "Fact"), "f.id, f.recorded_at, f.valid_from, f.valid_to, f.expired_at"
        )
    }
    event_session = dict(_rows(db, owned("x", "Event"), "x.id, x.session_id"))
    started = dict(_rows(db, owned("s", "Session"), "s.id, s.started_at"))
    about = _grouped(_rows(db, f"{owned('f', 'Fact')}-[:ABOUT]->(e:Entity)", "e.id, f.id"))
    involving = _grouped(_rows(db, f"{owned('x', 'Event')}-[:SUBJECT|OBJECT]->(e:Entity)", "e.id, x.id"))
    # A source round of a fact or an event: a round of its message's session that lists that message.
    in_round: dict[tuple[str, str], list[str]] = {}
    for sid, rid, mids in _rows(
        db, "(sc)-[:OWNS]->(s:Session)<-[:ROUND_IN]-(r:Round)", "s.id, r.id, r.message_ids"
    ):
        for mid in dict.fromkeys(mids or ()):
            in_round.setdefault((sid, mid), []).append(rid)
    rounds: dict[str, dict[str, list[str]]] = {}
    messages: set[str] = set()
    for table, rel in (("Fact", "FACT_FROM"), ("Event", "EVENT_FROM")):
        found: dict[str, set[str]] = {}
        for xid, mid, sid in _rows(
            db, f"{owned('x', table)}-[:{rel}]->(m:Message)-[:MSG_IN]->(s:Session)", "x.id, m.id, s.id"
        ):
            messages.add(mid)
            if (sid, mid) in in_round:
                found.setdefault(xid, set()).update(in_round[(sid, mid)])
        rounds[table] = {xid: sorted(rids) for xid, rids in found.items()}
    round_ids = frozenset(r for by_id in rounds.values() for ids in by_id.values() for r in ids)
    orphans = frozenset(sid for sid in event_session.values() if sid is not None and sid not in started)
    return Adjacency(
        writes=writes,
        graph=graph,
        facts=facts,
        event_session=event_session,
        started=started,
        about=about,
        involving=involving,
        rounds=rounds,
        source_messages=frozenset(messages),
        source_round_ids=round_ids,
        orphans=orphans,
        checked=writes,
    )


def _grouped(rows: Iterable[tuple[Any, ...]]) -> dict[str, list[str]]:
    """Key -> its values (an event both SUBJECT and OBJECT of an entity is listed twice: readers dedupe)."""
    out: dict[str, list[str]] = {}
    for key, value in rows:
        if key in out:
            out[key].append(value)
        else:
            out[key] = [value]
    return out


_CACHE: weakref.WeakKeyDictionary[ScopeDatabase, Adjacency] = weakref.WeakKeyDictionary()
KEEP_ROWS = 200_000
"""Facts and events that adjacencies of closed views may hold in all (~0.55 KB each: ~110 MB), most recent first.
Why keep them past their view: the pool closes the view of a user not searched lately, and the next search of that
user would otherwise rebuild (~24 ms of a 50 ms cold search of a 20-round user, docs/benchmarks.md "A fleet of
users on one node"); the scope's ``Generations`` outlive its views (they are its bucket's), so an adjacency kept
with them is checked by the same rule as one kept with its view."""
_KEPT: OrderedDict[int, tuple[Generations, Adjacency, int]] = (
    OrderedDict()
)  # id(generations) -> (them, it, rows)
_KEPT_ROWS = 0
_BUILDING: weakref.WeakKeyDictionary[ScopeDatabase, threading.Lock] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _current(db: ScopeDatabase, adj: Adjacency | None) -> bool:
    """Whether nothing ``adj`` holds was written since its read: no graph write, and no write of chat that
    touched it (``Adjacency.touched_by``); the notes it was checked against are not checked again. ``writes`` is
    read first: ``Generations.committed`` moves it last, so ``graph`` and ``notes`` cover every commit it counts."""
    gen = db.generations
    writes = gen.writes
    if adj is None or adj.graph != gen.graph:
        return False
    if adj.checked < writes:
        # The notes since ``gen.graph`` (which ``adj.checked`` is not before): those after it are the ones to check.
        if any(n.writes > adj.checked and adj.touched_by(n) for n in gen.notes):
            return False
        adj.checked = max(adj.checked, writes)
    return True


def _cached(db: ScopeDatabase) -> Adjacency | None:
    """(Under ``_LOCK``.) The view's adjacency, else one kept from an earlier view of the same scope."""
    adj = _CACHE.get(db)
    if adj is None:
        kept = _KEPT.get(id(db.generations))
        if kept is not None and kept[0] is db.generations:
            _KEPT.move_to_end(id(db.generations))
            adj = kept[1]
    return adj


def _keep(db: ScopeDatabase, adj: Adjacency) -> None:
    """(Under ``_LOCK``.) ``adj`` for this view and, within ``KEEP_ROWS``, for the scope's later views."""
    global _KEPT_ROWS
    _CACHE[db] = adj
    gen = db.generations
    old = _KEPT.pop(id(gen), None)
    if old is not None:
        _KEPT_ROWS -= old[2]
    rows = len(adj.facts) + len(adj.event_session)
    if rows > KEEP_ROWS:
        return
    _KEPT[id(gen)] = (gen, adj, rows)  # holding ``gen`` keeps its id from being reused by another scope's
    _KEPT_ROWS += rows
    while _KEPT_ROWS > KEEP_ROWS:
        _, (_, _, dropped) = _KEPT.popitem(last=False)
        _KEPT_ROWS -= dropped


def renew(db: ScopeDatabase) -> bool:
    """Rebuild the scope's adjacency now when one is kept for it and a write has made it stale; whether it did.
    For a writer that has just changed the extracted memory of a scope that is being searched (an extraction run,
    in the background as a rule): its next search would otherwise pay the build (~35 ms at 1,000 entities, ~250 ms
    at 10,000: docs/benchmarks.md). A scope whose adjacency is not kept (never searched, or dropped for room) is
    left to build it when it is searched. The rebuilt one is kept as the most recently used: a scope whose chat is
    being extracted is one in use."""
    with _LOCK:
        kept = _cached(db)
    if kept is None or _current(db, kept):
        return False
    adjacency(db)
    return True


def adjacency(db: ScopeDatabase) -> Adjacency:
    """The scope's adjacency, rebuilt first when a write since its read may have changed it (module docstring).
    One thread builds while the others that need it wait for its result."""
    with _LOCK:
        adj = _cached(db)
        if _current(db, adj):
            assert adj is not None
            _CACHE[db] = adj
            return adj
        building = _BUILDING.setdefault(db, threading.Lock())
    with building:
        with _LOCK:
            adj = _cached(db)
        if _current(db, adj):
            assert adj is not None
            return adj
        adj = build(db)
        if _current(db, adj):  # nothing it reflects was written while it was read
            with _LOCK:
                _keep(db, adj)
        return adj
