"""Which stored entities a text names: the lookup behind entity expansion, through an index of match keys.

Entity expansion (``retrieve.graph``) pulls in the facts and events of the entities a question names: those with a
match key (``names.match_keys``: the normalized name or an alias, also without a leading role word; at least three
characters) that occurs in the normalized question as whole words. Retrieval used to read every entity of the scope
into Python on every search and normalize all their names: ~230 ms a search at 10,000 entities, growing with the
graph (docs/benchmarks.md, "Entity expansion").

Kuzu 0.11.3 indexes nothing but primary keys, and match keys are computed in Python (Unicode normalization,
casefolding, possessives, role words), so no Kuzu query can look them up, and a filter inside Kuzu is a scan of
the table all the same (its regular expressions cost ~70 us a row). So the keys live in an index in memory, one
per open database: match key -> entity ids, built from one read of the entity table. It is labelled with the
scope's ``Generations.graph`` (``store.database``) and read again when that moved: every write of an entity (added,
erased, given an alias, by any writer) goes through ``ScopeDatabase.write()`` and is not new chat, so it bumps the
generation, and the next search sees it. A lookup costs no Kuzu statement otherwise (it used to check the table
with an aggregate, the count of entities and a sum of hashes of their ids, names and aliases: ~11 ms a search at
10,000 entities). It is one dictionary probe per run of consecutive words of the question, which is the same rule
as before (a key occurs in the question as whole words exactly when it equals such a run), so it finds the same
entities.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphrecall.names import match_keys, normalize_name
from graphrecall.store.database import MATCH_SCOPE, ScopeDatabase, owned

MIN_KEY_CHARS = 3  # shorter keys ("al", "jo") would match by accident in too many questions

_ENTITIES = f"{MATCH_SCOPE}MATCH {owned('e', 'Entity')} RETURN e.id, e.name, e.aliases"


@dataclass(frozen=True)
class KeyIndex:
    """Match key -> ids of the entities that have it, as of ``generation`` (``Generations.graph``)."""

    generation: int
    ids: Mapping[str, frozenset[str]]
    longest: int  # words in the longest key: no longer run of the question can match

    @classmethod
    def build(cls, generation: int, rows: Sequence[Sequence[Any]]) -> KeyIndex:
        """From (id, name, aliases) rows of the entity table."""
        ids: dict[str, set[str]] = {}
        for eid, name, aliases in rows:
            for key in match_keys(name, list(aliases or [])):
                if len(key) >= MIN_KEY_CHARS:
                    ids.setdefault(key, set()).add(eid)
        longest = max((key.count(" ") + 1 for key in ids), default=0)
        return cls(generation, {k: frozenset(v) for k, v in ids.items()}, longest)

    def named_in(self, text: str) -> list[str]:
        """Ids (sorted) of the entities with a key equal to a run of consecutive words of the normalized text."""
        words = normalize_name(text).split()
        found: set[str] = set()
        for i in range(len(words)):
            for j in range(i + 1, min(len(words), i + self.longest) + 1):
                found |= self.ids.get(" ".join(words[i:j]), frozenset())
        return sorted(found)


_INDEXES: weakref.WeakKeyDictionary[ScopeDatabase, KeyIndex] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def key_index(db: ScopeDatabase) -> KeyIndex:
    """The database's index of match keys, rebuilt when the scope's graph generation moved. The label is read
    before the rows (a commit bumps it after it lands), so an index is never labelled later than the rows it holds;
    a rebuild keeps its result only when the generation did not move during its read."""
    now = db.generations.graph
    with _LOCK:
        index = _INDEXES.get(db)
    if index is not None and index.generation == now:
        return index
    rows = db.query(_ENTITIES)
    index = KeyIndex.build(now, rows)
    if db.generations.graph == now:
        with _LOCK:
            _INDEXES[db] = index
    return index


def entities_named_in(db: ScopeDatabase, text: str) -> list[str]:
    """Ids (sorted) of stored entities whose normalized name or alias occurs, as whole words, in ``text``."""
    return key_index(db).named_in(text)
