"""Which stored entities a text names: the lookup behind entity expansion, bounded by the question.

Entity expansion (``retrieve.graph``) pulls in the facts and events of the entities a question names: those with a
match key (``names.match_keys``: the normalized name or an alias, also without a leading role word) that occurs in
the normalized question as whole words. Retrieval used to read every entity of the scope into Python on every
search and normalize all their names, so a search's cost grew with the graph (docs/benchmarks.md, "Entity
expansion"). Kuzu 0.11.3 indexes nothing but primary keys, and match keys are computed in Python, so they cannot be
looked up as such; but Kuzu can rule entities out where they are stored:

- every word of a match key is a word of the question, and a key is at least three characters long;
- for a name or alias written in ASCII, every word of its normalized form is a whole word (a run of letters and
  digits) of its lowercased text: normalization there only lowercases, drops possessives and splits on everything
  else, and Kuzu's ``lower`` is Python's on ASCII;
- a name or alias with any other character may normalize differently (NFKC, casefolding: "Straße" is "strasse"),
  so such an entity is always a candidate.

So one query keeps the entities whose names contain a word of the question as a whole word, or are not plain
ASCII, and only those are matched exactly, by the same rule as before: the same entities, without reading the rest.
"""

from __future__ import annotations

import re

from graphrecall.names import match_keys, normalize_name
from graphrecall.store.database import ScopeDatabase

MIN_KEY_CHARS = 3  # shorter keys ("al", "jo") would match by accident in too many questions
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_NOT_ASCII = "[^\\x00-\\x7F]"  # an RE2 pattern (Kuzu's regexp_matches)

_CANDIDATES = (
    "MATCH (e:Entity) "
    "WITH e, concat_ws('|', e.name, list_to_string('|', e.aliases)) AS names "
    "WHERE regexp_matches(names, $other) OR regexp_matches(lower(names), $words) "
    "RETURN e.id, e.name, e.aliases"
)


def entities_named_in(db: ScopeDatabase, text: str) -> list[str]:
    """Ids (sorted) of stored entities whose normalized name or alias occurs, as whole words, in ``text``."""
    normalized = normalize_name(text)
    if not normalized:
        return []
    words = sorted({w for w in normalized.split() if _ASCII_WORD.fullmatch(w)})
    # A question without an ASCII word can only name entities whose names have other characters.
    pattern = f"(^|[^a-z0-9])({'|'.join(words)})([^a-z0-9]|$)" if words else _NOT_ASCII
    padded = f" {normalized} "
    rows = db.query(_CANDIDATES, {"words": pattern, "other": _NOT_ASCII})
    return sorted(
        eid
        for eid, name, aliases in rows
        if any(len(k) >= MIN_KEY_CHARS and f" {k} " in padded for k in match_keys(name, list(aliases or [])))
    )
