"""Entity names: normalization, match keys, and resolution of newly extracted entities onto stored ones.

"my sister Ana", "Ana" and "ana" must become one node, or the graph fragments into one entity per mention.
Resolution is a cascade from cheap and certain to expensive and uncertain:

1. exact match of normalized names/aliases (``match_keys``) - free, and right in the vast majority of cases;
2. embedding similarity of the names: above ``auto`` it is the same entity (types permitting);
3. in the ambiguous band between ``ambiguous`` and ``auto``, the LLM decides (resolve_entity prompt), at most
   ``max_llm`` times per session so a chatty session cannot multiply the cost;
4. otherwise a new entity. A missed merge is cheaper to fix than a wrong one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from graphrecall.embed.base import Vectors
from graphrecall.names import is_user, match_keys, normalize_name
from graphrecall.store.rows import EntityRecord

log = logging.getLogger(__name__)

_COMPATIBLE_DEFAULT = {"thing", "other", ""}


def types_compatible(a: str, b: str) -> bool:
    """Two entity types can name the same thing unless both are specific and differ (a person is no place)."""
    a, b = a.lower(), b.lower()
    return a == b or a in _COMPATIBLE_DEFAULT or b in _COMPATIBLE_DEFAULT


@dataclass
class Resolution:
    """How one mention was resolved: ``method`` is key, embedding, llm or new."""

    entity: EntityRecord
    method: str
    similarity: float = 0.0


# ask(candidate, options) -> index into options, or None. Returns the LLM's choice; raises on LLM failure.
AskLLM = Callable[[str, Sequence[tuple[EntityRecord, float]]], int | None]


class EntityResolver:
    """Resolves mentions one by one against the stored entities plus those created earlier in the same run."""

    def __init__(
        self,
        existing: Sequence[EntityRecord],
        *,
        auto: float = 0.92,
        ambiguous: float = 0.75,
        max_llm: int = 3,
        ask: AskLLM | None = None,
        new_id: Callable[[], str],
    ) -> None:
        self.entities: list[EntityRecord] = list(existing)
        self.auto = auto
        self.ambiguous = ambiguous
        self.max_llm = max_llm
        self.ask = ask
        self.llm_calls = 0
        self._new_id = new_id
        self._by_key: dict[str, EntityRecord] = {}
        for e in self.entities:
            self._index(e)

    def _index(self, e: EntityRecord) -> None:
        for k in e.keys:
            self._by_key.setdefault(k, e)

    def find_by_key(self, name: str) -> EntityRecord | None:
        """The entity a name refers to by exact normalized match, if any (used to link facts to entities)."""
        for k in sorted(match_keys(name), key=len, reverse=True):
            if k in self._by_key:
                return self._by_key[k]
        return None

    def resolve(
        self, name: str, type_: str, aliases: Sequence[str], vec: Vectors, context: str = ""
    ) -> Resolution:
        keys = match_keys(name, aliases)
        primary = normalize_name(name)
        hits = [
            self._by_key[k] for k in sorted(keys, key=lambda k: (k != primary, -len(k))) if k in self._by_key
        ]
        for e in hits:
            if types_compatible(e.type, type_):
                e.absorb(name, aliases)
                self._index(e)
                return Resolution(e, "key", 1.0)
        scored = self._similar(vec, type_)
        if scored and scored[0][1] >= self.auto:
            e, sim = scored[0]
            e.absorb(name, aliases)
            self._index(e)
            return Resolution(e, "embedding", sim)
        band = [(e, s) for e, s in scored if s >= self.ambiguous][:5]
        if band and self.ask is not None and self.llm_calls < self.max_llm:
            self.llm_calls += 1
            desc = f"{name} (type: {type_}; aliases: {', '.join(aliases) or '-'})" + (
                f"\ncontext: {context}" if context else ""
            )
            choice = self.ask(desc, band)
            if choice is not None and 0 <= choice < len(band):
                e, sim = band[choice]
                e.absorb(name, aliases)
                self._index(e)
                return Resolution(e, "llm", sim)
        created = EntityRecord(
            id=self._new_id(),
            name=name,
            type=type_,
            aliases=[a for a in dict.fromkeys(aliases) if normalize_name(a) != primary and not is_user(a)],
            vec=vec,
            stored=False,
        )
        self.entities.append(created)
        self._index(created)
        return Resolution(created, "new", 0.0)

    def _similar(self, vec: Vectors, type_: str) -> list[tuple[EntityRecord, float]]:
        """Entities with a name vector, most similar first, excluding type clashes."""
        cands = [e for e in self.entities if e.vec is not None and types_compatible(e.type, type_)]
        if not cands:
            return []
        mat = np.stack([np.asarray(e.vec, dtype=np.float32) for e in cands])
        sims = mat @ np.asarray(vec, dtype=np.float32)
        order = np.argsort(-sims)
        return [(cands[i], float(sims[i])) for i in order]
