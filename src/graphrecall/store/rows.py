"""Storage rows: what the store writes and reads back, built by ingest and extraction.

They live with the store (not with their builders) so that the store depends on nothing above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from graphrecall.embed.base import Vectors
from graphrecall.names import is_user, match_keys, normalize_name


@dataclass
class MessageRow:
    id: str
    session_id: str
    idx: int
    role: str
    text: str
    at: datetime


@dataclass
class RoundRow:
    id: str
    session_id: str
    idx: int
    text: str
    user_text: str
    reply_text: str
    terms: str
    at: datetime
    message_ids: list[str] = field(default_factory=list)


@dataclass
class EntityRecord:
    """An entity as resolution sees it: stored ones have ``stored=True``; ``vec`` is the name embedding."""

    id: str
    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    vec: Vectors | None = None
    stored: bool = True
    aliases_changed: bool = False

    @property
    def keys(self) -> set[str]:
        return match_keys(self.name, self.aliases)

    def absorb(self, name: str, aliases: Sequence[str]) -> None:
        """Add the other mention's name and aliases as aliases (case-insensitively new ones only)."""
        known = {normalize_name(a) for a in (self.name, *self.aliases)}
        for a in (name, *aliases):
            n = normalize_name(a)
            if n and n not in known and not is_user(a):
                self.aliases.append(a)
                known.add(n)
                self.aliases_changed = True
