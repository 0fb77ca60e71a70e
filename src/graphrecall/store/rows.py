"""The store's rows: one type per stored entity, the internal form of everything the store writes.

One type each, used end to end. A chat turn becomes a ``MessageRow`` once, in ``ingest.message_rows``, and its
round a ``RoundRow`` once, in ``ingest.build_rounds``; the same objects are planned by the writer, serialized into a
write-log entry (``wal.entry``: the JSON of these fields, so a new column is one field here plus, for Kuzu, its
schema and COPY column), kept by the log's tail, and written to Kuzu by the flusher or a bulk ingest. Dates in a row
are ``datetime``s, naive UTC (``models.ensure_utc``): parsed once, where a caller's string entered (the facade), or
where a stored one is read back (the log's JSON, by pydantic). The public models of ``graphrecall.models``
(``Message``, ``Round``, ``Session``, ``Fact``, ...) are the API; rows turn into them at one place each
(``MessageRow.to_message``, ``RoundRow.to_round``, ``SessionRow.to_session``).

They live with the store (not with their builders) so that the store depends on nothing above it. Frozen: a row
built once is shared by a write-log entry and the tail, so nothing may change it in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from graphrecall import docref
from graphrecall.embed.base import Vectors
from graphrecall.models import Message, Role, Round, Session
from graphrecall.names import is_user, match_keys, normalize_name


@dataclass(frozen=True)
class SessionRow:
    """A session as ingest creates it (its extraction state is the store's, set by extraction)."""

    id: str
    started_at: datetime

    def to_session(self, messages: Sequence[MessageRow] = ()) -> Session:
        return Session(id=self.id, started_at=self.started_at, messages=[m.to_message() for m in messages])


@dataclass(frozen=True)
class MessageRow:
    """A message with its final id and position (``session_id#idx`` unless the caller named it) and its language
    (``text.message_language``, detected once, in ``ingest.message_rows``; ``''`` in a write-log entry or a store
    older than the column until they are upgraded: ``wal.entry`` and the schema 5 upgrade detect it then)."""

    id: str
    session_id: str
    idx: int
    role: str
    text: str
    at: datetime
    lang: str = ""

    def to_message(self) -> Message:
        return Message(
            id=self.id,
            role=Role(self.role),
            content=self.text,
            at=self.at,
            session_id=self.session_id,
            idx=self.idx,
            lang=self.lang,
        )


USER_SIDE = frozenset({Role.user.value, Role.document.value})
"""Roles that open a round and are its user side: what the user said, and a passage of a document the user gave
memory (``graphrecall.docref``), which is what the user knows rather than what the assistant replied."""


def _user_side(role: str, body: str) -> str:
    """A user-side message as embedded and indexed: a document passage without its source (``docref``)."""
    return docref.indexed_text(body) if role == Role.document.value else body


def round_texts(messages: Sequence[tuple[str, str]]) -> tuple[str, str, str]:
    """A round's text (every message as ``role: text``), its user side and its reply side, from its messages'
    (role, text) in order. The one definition: ingest makes rounds with it (``ingest.build_rounds``), and the store
    makes a round's texts again from its messages with it (Kuzu keeps a round's text only in its messages:
    ``round_texts_of``)."""
    text = "\n".join(f"{role}: {body}" for role, body in messages)
    user = "\n".join(_user_side(role, body) for role, body in messages if role in USER_SIDE)
    reply = "\n".join(body for role, body in messages if role not in USER_SIDE)
    return text, user, reply


def round_texts_of(message_ids: Sequence[str], messages: Mapping[str, tuple[str, str]]) -> tuple[str, str]:
    """(text, user text) of a stored round from its message ids (in order) and its messages' (role, text) by id."""
    text, user, _ = round_texts([messages[m] for m in message_ids if m in messages])
    return text, user


@dataclass(frozen=True)
class RoundRow:
    """A user turn and the replies that followed (``ingest.build_rounds``); a round id written again replaces it.
    ``reply_text`` and ``terms`` are what the vectors and the lexical index are made from; Kuzu keeps ``terms``,
    the write log both."""

    id: str
    session_id: str
    idx: int
    text: str
    user_text: str
    reply_text: str
    terms: str
    at: datetime
    message_ids: list[str] = field(default_factory=list)

    def to_round(self) -> Round:
        return Round(
            id=self.id,
            session_id=self.session_id,
            idx=self.idx,
            text=self.text,
            user_text=self.user_text,
            at=self.at,
            message_ids=list(self.message_ids),
        )


@dataclass
class FactRow:
    """A fact as extraction, ``add_fact``, consolidation and import write it (``store.facts.write_extraction``)."""

    id: str
    text: str
    terms: str
    kind: str
    polarity: str
    confidence: float
    valid_from: datetime | None
    recorded_at: datetime | None
    last_seen: datetime | None
    session_id: str | None
    message_ids: list[str]
    entity_ids: list[str]
    vec: Vectors
    reinforcement: int = 1  # observations so far: 1 for a new fact, the exported count on import
    key: str | None = (
        None  # the application's key (``add_fact(key=...)``): the next fact with it replaces this one
    )


@dataclass
class EventRow:
    """An event as extraction and import write it."""

    id: str
    subject: str
    verb: str
    object: str
    text: str
    terms: str
    time_start: datetime | None
    time_end: datetime | None
    session_id: str | None
    message_ids: list[str]
    subject_ids: list[str]
    object_ids: list[str]
    vec: Vectors


@dataclass
class EntityRecord:
    """An entity as resolution sees it: stored ones have ``stored=True``; ``vec`` is the name embedding. Mutable:
    resolution merges aliases into it (``absorb``) before it is written."""

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
