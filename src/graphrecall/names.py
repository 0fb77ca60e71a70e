"""Entity names: the canonical form under which "my sister Ana", "Ana" and "ana" are one entity.

Ground floor (pure text functions): the store keeps normalized names, extraction resolves entities with them and
retrieval finds entities named in a question with them, so none of those may own them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# Leading words that never distinguish one entity from another: articles, possessive determiners, honorifics.
LEADING_STOP: frozenset[str] = frozenset(
    "a an the my our your his her their its user users mr mrs ms miss mx dr doctor prof professor sir madam "
    "dame lord lady".split()
)
# Role words: "sister ana" is also reachable as "ana" (but "sister" alone stays "sister").
ROLE_WORDS: frozenset[str] = frozenset(
    "sister brother mother father mom mum dad mama papa son daughter wife husband partner girlfriend "
    "boyfriend fiance fiancee friend best cousin aunt uncle niece nephew grandma grandmother grandpa "
    "grandfather grandson granddaughter boss manager coworker colleague roommate neighbor neighbour "
    "dog cat pet puppy kitten teacher doctor dentist therapist coach".split()
)
USER_NAMES: frozenset[str] = frozenset({"user", "the user", "i", "me", "myself", "users"})

_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b|(?<=s)['’](?=\s|$)")
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize_name(name: str) -> str:
    """A canonical form for comparing names: NFKC, casefolded, possessives and punctuation removed, leading
    articles/possessive determiners/honorifics dropped, whitespace collapsed.

    Never empty when the input has a letter or digit: if dropping leading words would leave nothing ("the",
    "my"), the words are kept. Idempotent: ``normalize_name(normalize_name(x)) == normalize_name(x)``.
    """
    text = unicodedata.normalize("NFKC", name)
    # casefold maps Cherokee small letters to the capitals (U+13A0...); lower() after it keeps the output lowercase.
    text = unicodedata.normalize("NFKC", text.casefold().lower())
    text = _POSSESSIVE.sub("", text)
    tokens = _NON_WORD.sub(" ", text).split()
    i = 0
    while i < len(tokens) and tokens[i] in LEADING_STOP:
        i += 1
    kept = tokens[i:] or tokens
    return " ".join(kept)


def match_keys(name: str, aliases: Sequence[str] = ()) -> set[str]:
    """Every normalized form under which an entity can be found: its name, its aliases, and each of those
    without a leading role word ("sister ana" -> "ana")."""
    keys: set[str] = set()
    for raw in (name, *aliases):
        n = normalize_name(raw)
        if not n:
            continue
        keys.add(n)
        parts = n.split()
        while len(parts) > 1 and parts[0] in ROLE_WORDS:
            parts = parts[1:]
            keys.add(" ".join(parts))
    return keys


def is_user(name: str) -> bool:
    """The user is implicit in every personal memory; it is not stored as an entity."""
    return normalize_name(name) in USER_NAMES or name.strip().lower() in USER_NAMES
