"""Which ids a scope's database holds: asked of Kuzu (``existing_ids``, any table), or, for Session and Message ids,
of ``KnownIds``, kept in memory while the database is open.

Why: planning a chat turn asks whether its session and message ids are stored (three point queries were ~8 ms of a
~20 ms turn on a loaded machine); a set answers at once.

Invariant: the sets are exactly what Kuzu has committed, at every moment a caller can look. That holds because
- every committed write reports itself (``ScopeDatabase.write`` calls ``committed`` under the database's write
  lock, after COMMIT and before ``write()`` returns): ids a ``WriteTxn.copy`` inserted are added, ids announced
  deleted with ``WriteTxn.unindex`` are removed, whoever wrote them (the write log's flusher, a bulk ingest, an
  import, an erase);
- the load records every report from before its scans start until the sets are in place, and replays them, in
  commit order, over what the scans read. A commit the scans already saw is applied again, which changes nothing:
  a report sets ids present or absent, so for each id the last commit that touched it decides, over the scans'
  state or over the one before them alike. The load does not take the write lock, so a turn planned while a flush
  writes (a scope moving from its log into Kuzu holds that lock for hundreds of milliseconds) does not wait for it.

What it replaced, and why that tore rounds: the writer kept these sets itself, loaded on its first write to a database
object and extended only by its own writes. Turns that reached Kuzu through the write log's flusher after the load
(a database closed by the pool and opened again while turns waited in the log, or a scope moving from its log into
Kuzu) were in neither the sets nor, once flushed, the log's tail. The next turn of such a session was planned
against nothing stored: numbered from 0, its round rebuilt from the new message alone (a round holding only the
assistant's reply), the message itself dropped by the flush as a duplicate id (``tests/integration/
test_lost_turn_race.py``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from graphrecall.store.schema import MATCH_SCOPE, owned

KNOWN_TABLES = ("Session", "Message")
ID_TABLES = frozenset(
    {"Session", "Message", "Round", "Passage", "Fact", "Event", "Entity"}
)  # keyed by ``id``
POINT_LOOKUPS_UP_TO = 256
"""``existing_ids`` looks up this many ids or fewer one by one by key (~0.8 ms each at 100k rows), more with one read
of the scope's ids (from its ``Scope`` node: ~0.4 s at 100k rows, whatever their number): Kuzu 0.11.3 plans
``UNWIND $keys MATCH`` and ``IN`` filters as scans of the whole table (``store.rounds.kuzu_rounds``)."""


class _Database(Protocol):
    def key(self, id_: str) -> str: ...

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]: ...

    def query_each(self, cypher: str, param_sets: list[dict[str, Any]]) -> list[list[Any]]: ...


def existing_ids(db: _Database, table: str, ids: Iterable[str]) -> set[str]:
    """The subset of ``ids`` that ``table`` holds now, asked of Kuzu (what a replay or an import must trust: not a
    cache). Any table keyed by ``id``."""
    wanted = _wanted(table, ids)
    if not wanted:
        return set()
    if len(wanted) <= POINT_LOOKUPS_UP_TO:
        return _looked_up(db, table, wanted)
    stored = {r[0] for r in db.query(f"{MATCH_SCOPE}MATCH {owned('n', table)} RETURN n.id")}
    return stored.intersection(wanted)


def keyed_ids(db: _Database, table: str, ids: Iterable[str]) -> set[str]:
    """The subset of ``ids`` whose key ``table`` holds, one point lookup each: a row counts whether or not an edge
    reaches it from the scope (what a torn commit can leave, ``store.wal.apply``)."""
    return _looked_up(db, table, _wanted(table, ids))


def _wanted(table: str, ids: Iterable[str]) -> list[str]:
    """``ids`` once each, in order, for a table keyed by ``id``."""
    if table not in ID_TABLES:
        raise ValueError(f"not a table keyed by id: {table}")
    return list(dict.fromkeys(ids))


def _looked_up(db: _Database, table: str, wanted: list[str]) -> set[str]:
    if not wanted:
        return set()
    rows = db.query_each(f"MATCH (n:{table} {{key: $k}}) RETURN n.id", [{"k": db.key(i)} for i in wanted])
    return {r[0] for r in rows}


class KnownIds:
    """The ids of ``KNOWN_TABLES`` one open database holds. Thread-safe; loaded on first use."""

    def __init__(self, db: _Database) -> None:
        # Weak: the database owns this object, and a cycle would keep a closed database (and the memory maps of its
        # derived indexes) alive until the garbage collector ran.
        self._db = weakref.ref(db)
        self._lock = threading.Lock()  # guards the sets (and the reports a load records) against a commit
        self._loading = threading.Lock()  # one load at a time
        self._ids: dict[str, set[str]] | None = None
        self._reports: list[tuple[dict[str, list[str]], dict[str, list[str]]]] | None = None  # during a load

    def stored(self, table: str, ids: Iterable[str]) -> set[str]:
        """The subset of ``ids`` that ``table`` holds."""
        known = self._loaded()[_check(table)]
        with self._lock:
            return {i for i in ids if i in known}

    def holds(self, table: str, id_: str) -> bool:
        known = self._loaded()[_check(table)]
        with self._lock:
            return id_ in known

    def committed(self, added: Mapping[str, Sequence[str]], deleted: Mapping[str, Sequence[str]]) -> None:
        """What one committed transaction inserted and deleted (the caller holds the database's write lock). Not
        loaded and no load running: nothing to do, a later load reads the committed state."""
        with self._lock:
            if self._ids is not None:
                _apply(self._ids, added, deleted)
            elif self._reports is not None:
                self._reports.append(
                    ({t: list(v) for t, v in added.items()}, {t: list(v) for t, v in deleted.items()})
                )

    def _loaded(self) -> dict[str, set[str]]:
        found = self._ids
        if found is not None:
            return found
        db = self._db()
        if db is None:
            raise RuntimeError("the database these ids belong to is gone")
        with self._loading:
            if self._ids is not None:
                return self._ids
            with self._lock:
                self._reports = []  # from here on, every commit is recorded (see the invariant above)
            try:
                scanned = {
                    t: {r[0] for r in db.query(f"{MATCH_SCOPE}MATCH {owned('n', t)} RETURN n.id")}
                    for t in KNOWN_TABLES
                }
                with self._lock:
                    for added, deleted in self._reports:
                        _apply(scanned, added, deleted)
                    self._ids = scanned
            finally:
                with self._lock:
                    self._reports = None
            return scanned


def _apply(
    ids: dict[str, set[str]], added: Mapping[str, Sequence[str]], deleted: Mapping[str, Sequence[str]]
) -> None:
    for table, gone in deleted.items():
        if table in ids:
            ids[table].difference_update(gone)
    for table, new in added.items():
        if table in ids:
            ids[table].update(new)


def _check(table: str) -> str:
    if table not in KNOWN_TABLES:
        raise ValueError(f"only {', '.join(KNOWN_TABLES)} ids are kept in memory, not {table}")
    return table
