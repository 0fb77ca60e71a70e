"""Domain models: the one schema for API bodies, LLM structured output and storage rows.

Every object that crosses a boundary (HTTP, CLI files, LLM output, Kuzu rows) is one of these pydantic models, so
validation happens once, at the edge, with messages that name the offending field.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from graphrecall import docref

MAX_ID_LENGTH = 128
_ID_FORBIDDEN = re.compile(r"[/\\:*?\"<>|]")

# What an id may not contain besides the path characters above, as fixed code point ranges (inclusive): control
# characters (Cc), surrogates (Cs), and in the Basic Multilingual Plane private use (Co) and the invisible format
# characters (Cf, as of Unicode 15.1: soft hyphen, zero-width and direction marks...). Fixed ranges rather than
# ``unicodedata`` categories so the rule (and ``ID_PATTERN``, which states it in the OpenAPI document) is the same
# on every Python, whatever Unicode version it ships. Characters outside the BMP are allowed whatever they are
# (unassigned today, private use, tags): all are valid UTF-8 in a file name, assigning one later must not
# invalidate stored ids, and a pattern excluding them made schema-driven generators (schemathesis) 20-60x slower.
_CONTROL = ((0x00, 0x1F), (0x7F, 0x9F))
_INVISIBLE = (
    (0xD800, 0xDFFF), (0xE000, 0xF8FF),
    (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2),
    (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
)  # fmt: skip
# The whitespace ``str.strip`` removes that is not a control character: an id may not start or end with it.
_SPACES = ((0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
           (0x205F, 0x205F), (0x3000, 0x3000))  # fmt: skip


def _in(ranges: tuple[tuple[int, int], ...], ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in ranges)


def _class(ranges: tuple[tuple[int, int], ...], extra: str = "") -> str:
    r"""A regex character class body, code points as ``\uXXXX`` escapes (read alike by ECMA-262 and Python; all
    are in the BMP, where one escape is one code point)."""
    return extra + "".join(f"\\u{lo:04x}" + ("" if lo == hi else f"-\\u{hi:04x}") for lo, hi in ranges)


# Surrogates stay out of the pattern: no UTF-8 text holds one (a JSON body can escape one, which the validator
# refuses), and regex engines over UTF-8 (Rust's, in JSON-schema validators) refuse a pattern naming them. '"' is
# not escaped: ECMA-262's unicode mode refuses an escape of a character that is not special.
_NEVER = _class(tuple(r for r in _CONTROL + _INVISIBLE if r != (0xD800, 0xDFFF)), r'/\\:*?"<>|')
ID_PATTERN = f"^[^{_NEVER}{_class(_SPACES)}.](?:[^{_NEVER}]*[^{_NEVER}{_class(_SPACES)}])?$"
"""``validate_identifier``'s rule as a regular expression (with ``maxLength`` ``MAX_ID_LENGTH``): what the OpenAPI
document says of every id, so a client or a fuzzer knows before sending which ids the server takes."""


SHARED_ID_PATTERN = f"^_(?:[^{_NEVER}]*[^{_NEVER}{_class(_SPACES)}])?$"
"""The user id of a shared scope (``params.is_shared``): an id that starts with ``_``."""


NOT_BLANK = r"\S"
"""Text that must hold more than whitespace, as a JSON-schema ``pattern`` (the validators say it in words)."""
ID_SCHEMA: dict[str, Any] = {"minLength": 1, "maxLength": MAX_ID_LENGTH, "pattern": ID_PATTERN}
MAX_MESSAGE_ID_LENGTH = MAX_ID_LENGTH + 21
"""A message without an id of its own is ``<session id>#<index>``: one longer than any session id may be."""
Identifier = Annotated[str, Field(json_schema_extra=ID_SCHEMA)]
"""A field holding an id: the rule in the JSON schema (the model's own validator checks it, naming the problem)."""


def validate_identifier(value: str, what: str, *, limit: int = MAX_ID_LENGTH) -> str:
    """Check that ``value`` is safe as a single path component and as a Kuzu string key.

    Scope ids become directory and file names (``<root>/<org>/<user>.kuzu``), so anything that could escape the
    store root or confuse a filesystem is rejected here, with a message that says what was wrong. ``ID_PATTERN``
    states the same rule for the API's schema (a test holds the two equal).
    """
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {type(value).__name__}")
    if value == "":
        raise ValueError(f"{what} must not be empty")
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters long; the limit is {limit}")
    if value in {".", ".."} or value.startswith("."):
        raise ValueError(f"{what} {value!r} must not start with '.' (no hidden files or '..')")
    if value != value.strip():
        raise ValueError(f"{what} {value!r} must not start or end with whitespace")
    for ch in value:
        if _in(_CONTROL, ch):
            raise ValueError(f"{what} {value!r} contains a control character (U+{ord(ch):04X})")
        if _in(_INVISIBLE, ch):
            raise ValueError(
                f"{what} {value!r} contains an invisible, surrogate or private-use character (U+{ord(ch):04X})"
            )
    bad = _ID_FORBIDDEN.search(value)
    if bad:
        raise ValueError(f"{what} {value!r} contains the forbidden character {bad.group()!r}")
    return value


def ensure_utc(value: datetime) -> datetime:
    """Store every timestamp as naive UTC: Kuzu TIMESTAMP has no zone, and mixing zones silently corrupts order.

    A moment whose UTC form falls outside Python's years 1-9999 (``0001-01-01T00:00:00+05:00``) is a
    ``ValueError`` naming it, so every boundary refuses it as bad input rather than failing inside."""
    if value.tzinfo is not None:
        try:
            value = value.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            raise ValueError(
                f"{value.isoformat()} is outside the years 0001-9999 once taken to UTC"
            ) from None
    return value


def as_wire_utc(value: datetime) -> datetime:
    """A stored date as it leaves the process: the same instant, marked UTC. Stored dates are naive UTC (see
    ``ensure_utc``); on the wire a date without its offset is ambiguous (RFC 3339, OpenAPI's ``date-time``, and
    every client's parser want one), so JSON always carries it (``2024-05-20T14:30:00Z``)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDateTime = Annotated[
    datetime,
    AfterValidator(ensure_utc),
    PlainSerializer(as_wire_utc, return_type=datetime, when_used="json"),
]
"""A date of a model: naive UTC in Python (what the store holds; an aware value is converted on the way in, an
offset-less one is read as UTC), with its UTC offset in JSON (HTTP, MCP, the CLI's ``--json``, exports): one rule
for every boundary, written once here."""


class Scope(BaseModel):
    """Whose memory: one Kuzu database per (org, user), so no query can ever cross tenants."""

    model_config = ConfigDict(frozen=True)

    org_id: str
    user_id: str

    @field_validator("org_id", "user_id")
    @classmethod
    def _safe(cls, v: str, info: Any) -> str:
        return validate_identifier(v, info.field_name)

    def __str__(self) -> str:
        return f"{self.org_id}/{self.user_id}"


class Role(StrEnum):
    """Who said a message. ``document``: a passage of a learned document (``Memory.add_document``), stored as a round
    of its own and read as the user's side (``graphrecall.docref``)."""

    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"
    document = "document"


class Message(BaseModel):
    """One chat turn as it was said. ``id`` is derived from the session and position when not given."""

    model_config = ConfigDict(extra="ignore")

    role: Role
    content: str = Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK})
    id: Annotated[str, Field(json_schema_extra=ID_SCHEMA | {"maxLength": MAX_MESSAGE_ID_LENGTH})] | None = (
        None
    )
    at: UtcDateTime | None = None
    session_id: Identifier | None = None
    idx: int | None = None
    lang: str = Field(
        default="",
        description="the language the message is in (ISO 639-1: 'en', 'ru', 'zh', ...), detected when it was "
        "stored; '' when it is too short to tell or the detector was not sure. Set by the store: ignored on input",
    )

    @field_validator("content")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content must not be blank")
        return v

    @field_validator("id", "session_id")
    @classmethod
    def _ident(cls, v: str | None, info: Any) -> str | None:
        limit = MAX_MESSAGE_ID_LENGTH if info.field_name == "id" else MAX_ID_LENGTH
        return None if v is None else validate_identifier(v, info.field_name, limit=limit)

    @field_validator("at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else ensure_utc(v)


class SessionInput(BaseModel):
    """A session as callers hand it in (``Memory.add_sessions``): id, date, messages (dicts or ``Message``).
    Loose on purpose: the facade validates each field itself so that errors name the caller's position."""

    session_id: str
    date: datetime | str | None = None
    messages: list[Any] = Field(default_factory=list)


class Session(BaseModel):
    """A conversation: the unit of ingest, of extraction and of session-level retrieval."""

    id: Identifier
    started_at: UtcDateTime
    messages: list[Message] = Field(default_factory=list)
    extract_status: Literal["none", "pending", "running", "done", "failed"] = "none"

    @field_validator("id")
    @classmethod
    def _ident(cls, v: str) -> str:
        return validate_identifier(v, "session_id")

    @field_validator("started_at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return ensure_utc(v)


class Round(BaseModel):
    """A user turn with the assistant reply that followed: the default retrieval unit for raw history."""

    id: str
    session_id: str
    idx: int
    text: str
    user_text: str = ""
    at: UtcDateTime
    message_ids: list[str] = Field(default_factory=list)


class FactKind(StrEnum):
    preference = "preference"
    attribute = "attribute"
    plan = "plan"
    event = "event"
    relationship = "relationship"
    opinion = "opinion"
    other = "other"


class Fact(BaseModel):
    """An atomic statement about the user or the world, versioned: superseded facts keep ``valid_to``/``expired_at``."""

    id: str
    text: str
    kind: FactKind = FactKind.other
    polarity: Literal["positive", "negative"] = "positive"
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    valid_from: UtcDateTime | None = None
    valid_to: UtcDateTime | None = None
    recorded_at: UtcDateTime | None = None
    expired_at: UtcDateTime | None = None
    last_seen: UtcDateTime | None = None
    session_id: str | None = None
    message_ids: list[str] = Field(default_factory=list)
    entity_ids: list[str] = Field(default_factory=list)
    superseded_by: str | None = None
    reinforcement: int = Field(
        default=1,
        ge=1,
        description="how many times the fact was observed: said again (extraction), added again (add_fact) or "
        "merged from duplicates (consolidate); with last_seen it feeds the salience score",
    )
    key: str | None = Field(
        default=None,
        description="the application's key, for a fact added with one (add_fact key=...): the next fact of the same "
        "kind and key replaces it",
    )
    disputed_at: UtcDateTime | None = Field(
        default=None,
        description="when feedback said the fact is wrong (feedback useful=false); a disputed fact is left out of "
        "the profile until feedback marks it useful",
    )
    dispute_note: str | None = None

    @property
    def current(self) -> bool:
        return self.expired_at is None


class Event(BaseModel):
    """A subject-verb-object event with a resolved time span, for timeline and counting questions."""

    id: str
    subject: str
    verb: str
    object: str = ""
    text: str
    time_start: UtcDateTime | None = None
    time_end: UtcDateTime | None = None
    session_id: str | None = None
    message_ids: list[str] = Field(default_factory=list)


class Entity(BaseModel):
    """A named thing (person, place, organisation, item...) with aliases, the hub that links facts and events."""

    id: str
    name: str
    type: str = "thing"
    aliases: list[str] = Field(default_factory=list)


VersionDecision = Literal["NEW", "DUPLICATE", "UPDATE", "CONTRADICT"]


class FeedbackResult(BaseModel):
    """What ``Memory.feedback`` recorded. ``kind``: what the id named. For a fact: its ``reinforcement`` and
    whether it is now ``disputed``; for a round or an event: its net ``feedback`` count (useful minus wrong), which
    ranking reads only with ``RetrievalConfig.feedback_weight`` above 0."""

    id: str
    kind: Literal["fact", "round", "event"]
    useful: bool
    reinforcement: int | None = None
    disputed: bool = False
    feedback: int | None = None


class AddedFact(BaseModel):
    """What ``Memory.add_fact`` did with a fact the application already knew.

    ``decision``: NEW (stored), DUPLICATE (not stored again: ``fact`` is the stored one, reinforced), UPDATE or
    CONTRADICT (stored; ``superseded`` names the fact it replaced, which keeps its row with ``valid_to``).
    ``decided_by``: ``llm`` (the extractor's versioning call), ``rule`` (no LLM needed: no candidate, the same
    text, or a near-identical one), ``key`` (added with a key: the current fact of that kind and key, if any, is
    replaced, or reinforced by the same text) or ``default`` (the LLM gave no usable answer: NEW)."""

    fact: Fact
    decision: VersionDecision
    superseded: str | None = None
    decided_by: Literal["llm", "rule", "key", "default"]
    reason: str = ""


HitKind = Literal["round", "fact", "event"]


class DocumentRef(BaseModel):
    """Where a document passage comes from (``Memory.add_document``): the source it was learned under, the
    headings above it and its place in the document."""

    source: str = Field(description="the name the document was learned under (a file's path, a URL, a label)")
    title_path: list[str] = Field(
        default_factory=list,
        description="the headings above the passage, outermost first (['Install', 'Linux']); empty without any",
    )
    position: int = Field(ge=0, description="the passage's place in the document, from 0")

    @classmethod
    def of_round(cls, text: str, idx: int) -> DocumentRef | None:
        """The reference of a round that is a document passage (its text starts ``document:``), else None."""
        found = docref.parse_location(text)
        return None if found is None else cls(source=found[0], title_path=found[1], position=idx)


class Hit(BaseModel):
    """One retrieved piece of evidence with where it came from and why it ranked where it did.

    ``signals`` holds the per-generator scores (``vector``: cosine similarity, ``bm25``: BM25 score, ``time``:
    1.0 inside the question's time range, ``rerank``: cross-encoder score) and ``fused`` the fusion score.
    """

    id: str
    kind: HitKind = "round"
    text: str
    score: float
    rank: int = 0
    signals: dict[str, float] = Field(default_factory=dict)
    session_id: str
    date: UtcDateTime | None = None
    message_ids: list[str] = Field(default_factory=list)
    scope: Scope | None = Field(
        default=None,
        description="the scope it came from: the one searched, or a shared scope searched with it",
    )
    document: DocumentRef | None = Field(
        default=None,
        description="set when the hit is a passage of a learned document (add_document): its source, headings and "
        "position; its session is the document's",
    )


class TimeRange(BaseModel):
    """A closed interval parsed from a question, relative to the question date."""

    start: UtcDateTime
    end: UtcDateTime
    expression: str = ""

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.end < self.start:
            raise ValueError("time range end is before its start")
        return self


ProfileGroup = Literal["identity", "preferences", "relationships", "plans", "recent_events"]

PROFILE_GROUPS: dict[ProfileGroup, str] = {
    "identity": "Identity and attributes",
    "preferences": "Preferences",
    "relationships": "Relationships",
    "plans": "Plans and goals",
    "recent_events": "Recent events",
}
"""The profile's groups in the order they are rendered, with their headings."""

PROFILE_GROUP_OF_KIND: dict[FactKind, ProfileGroup] = {
    FactKind.attribute: "identity",
    FactKind.other: "identity",
    FactKind.preference: "preferences",
    FactKind.opinion: "preferences",
    FactKind.relationship: "relationships",
    FactKind.plan: "plans",
    FactKind.event: "recent_events",
}
"""Where each extracted fact kind goes in a profile. ``other`` joins the attributes (it is what a model answers
for a statement about the user that fits no kind); ``opinion`` joins the preferences (both say what the user
likes or thinks). Extracted events (and event-kind facts) go to recent events, or to plans when they lie after
the profile's date."""


class ProfileItem(BaseModel):
    """One line of a profile: a current fact, or an event, with where and when it was said."""

    id: str = Field(description="the fact or event id")
    source: Literal["fact", "event"]
    kind: str = Field(description="the fact kind (FactKind), or 'event' for an extracted event")
    text: str
    session_id: str | None = Field(default=None, description="the session it was said in (or its source)")
    date: UtcDateTime | None = Field(
        default=None, description="facts: when it was recorded (said); events: when they happen(ed)"
    )
    valid_from: UtcDateTime | None = Field(default=None, description="facts: since when it is true")
    last_seen: UtcDateTime | None = Field(
        default=None, description="facts: the latest session that restated it"
    )
    mentions: int = Field(
        default=1, ge=1, description="facts: how many sessions said it (reinforcement); events: 1"
    )
    upcoming: bool = Field(default=False, description="an event dated after the profile's date")
    scope: Scope | None = Field(
        default=None, description="a shared scope it came from (profile with also); omitted: the user's own"
    )


class ProfileSection(BaseModel):
    group: ProfileGroup
    title: str
    items: list[ProfileItem] = Field(default_factory=list)


class Profile(BaseModel):
    """What memory holds about the user at a moment, grouped by kind, for a system prompt.

    ``text`` is the rendered block (short lines, one per fact, each with its source session and date); the same
    content is structured in ``sections``. Items were chosen most reinforced and most recent first, round-robin
    over the groups, until ``token_budget`` (when given) was spent; ``omitted`` counts what did not fit."""

    scope: Scope
    as_of: UtcDateTime = Field(
        description="the moment the profile describes (nothing recorded later is in it)"
    )
    sections: list[ProfileSection] = Field(default_factory=list)
    text: str = ""
    token_count: int = 0
    token_budget: int | None = None
    truncated: bool = False
    omitted: int = 0

    @property
    def items(self) -> list[ProfileItem]:
        return [i for s in self.sections for i in s.items]


class Context(BaseModel):
    """Evidence rendered for a reader: dated, grouped by session, chronological, inside a token budget.
    With ``profile`` (``context(include_profile=True)``) the profile's text comes first in ``text`` and counts
    against the same budget."""

    query: str
    text: str
    hits: list[Hit]
    token_count: int
    token_budget: int
    truncated: bool = False
    excerpted: list[str] = Field(
        default_factory=list,
        description="ids of the hits shown in part (the sentences that bear on the query); the rest is elided",
    )
    profile: Profile | None = None


class ScopeStats(BaseModel):
    """Counts and sizes of one scope's database."""

    scope: Scope
    sessions: int
    messages: int
    rounds: int
    facts: int = 0
    events: int = 0
    entities: int = 0
    disk_bytes: int = Field(
        default=0,
        description="bytes on disk of the scope's own files: its derived indexes and its write log (its rows are in a "
        "Kuzu bucket shared with other scopes, which is not counted; a store written before buckets: its Kuzu file too)",
    )
    embedder_id: str = ""
    dim: int = 0


JobStatus = Literal["pending", "running", "done", "failed"]


class ExtractionJob(BaseModel):
    """One session's place in the background extraction queue, as the API, CLI and HTTP show it."""

    scope: Scope
    session_id: str
    status: JobStatus
    attempts: int
    reason: str | None = None
    next_attempt_at: UtcDateTime | None = None
    enqueued_at: UtcDateTime
    updated_at: UtcDateTime


ErasedKind = Literal["session", "message", "fact", "event", "entity"]


class ErasedItem(BaseModel):
    """One record an erase removes, with its text, so a person confirming it reads what goes rather than ids.

    Why the text: an erase by words takes whole messages (a message is stored, indexed and extracted as one unit),
    so ``matching="cilantro"`` also takes "I'm doing a PhD at MIT" when both were said in one message; only the
    text shows that before it is too late. ``beyond_match`` flags exactly those messages."""

    kind: ErasedKind
    id: str
    text: str = Field(
        description="a message's content, a fact's or event's text, an entity's name; a session: its size"
    )
    session_id: str | None = None
    date: UtcDateTime | None = Field(
        default=None, description="when it was said (a session: when it started)"
    )
    reason: str = Field(description="why it goes: named, matched, in an erased session, derived from one...")
    beyond_match: bool = Field(
        default=False,
        description="a message taken whole by a 'matching' erase that also says things without the matched "
        "words: they go too",
    )


class Erasure(BaseModel):
    """What ``Memory.erase`` removed (or, with ``dry_run``, would remove), by kind of record, and in ``items``
    each record's text and why it goes."""

    scope: Scope
    dry_run: bool
    sessions: list[str] = Field(default_factory=list)
    messages: list[str] = Field(default_factory=list)
    rounds: list[str] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list)
    events: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    items: list[ErasedItem] = Field(
        default_factory=list,
        description="sessions, messages, facts, events and entities with their text (rounds are their "
        "messages), at most items_limit of them",
    )
    items_omitted: int = Field(default=0, description="records left out of items beyond the limit")
    warnings: list[str] = Field(
        default_factory=list, description="what a person should read before confirming (whole messages taken)"
    )


class FactMerge(BaseModel):
    """One cluster of duplicate current facts merged by ``Memory.consolidate``: ``kept_id`` holds it now (one of
    the cluster's facts, or with ``new_fact`` a fact written with the LLM's merged ``text``); ``superseded`` were
    replaced by it (kept, with a SUPERSEDES edge: ``history`` shows them)."""

    kept_id: str
    text: str
    superseded: list[str]
    new_fact: bool = False
    reinforcement: int = Field(ge=1, description="the cluster's observations, summed")
    decided_by: Literal["rule", "llm"]
    reason: str = ""


class SeparateFacts(BaseModel):
    """A cluster of similar facts the LLM said are different facts: left as they are."""

    fact_ids: list[str]
    reason: str = ""


class EventLink(BaseModel):
    """An event linked to an entity its text names (a SUBJECT or OBJECT edge extraction did not make)."""

    event_id: str
    entity_id: str
    role: Literal["subject", "object"]


class PeriodSummary(BaseModel):
    """One dated summary fact of an old window of sessions (``consolidate(summaries=True)``)."""

    fact_id: str
    start: UtcDateTime
    end: UtcDateTime
    session_ids: list[str]
    text: str


class Consolidation(BaseModel):
    """What ``Memory.consolidate`` changed (or, with ``dry_run``, would change), and what it cost. A second run
    over an unchanged scope changes nothing."""

    scope: Scope
    dry_run: bool
    merges: list[FactMerge] = Field(default_factory=list)
    kept_separate: list[SeparateFacts] = Field(default_factory=list)
    event_links: list[EventLink] = Field(default_factory=list)
    summaries: list[PeriodSummary] = Field(default_factory=list)
    deferred: int = Field(
        default=0, description="clusters or windows left for a later run: the run reached max_llm_calls"
    )
    errors: list[str] = Field(
        default_factory=list, description="clusters or windows left alone because the LLM call failed"
    )
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def changes(self) -> int:
        """How many things were (or would be) written: merges, links and summaries."""
        return len(self.merges) + len(self.event_links) + len(self.summaries)


class IngestResult(BaseModel):
    """What an ingest call changed: new ids are counted, known ids are skipped (ingest is idempotent).
    ``extraction``: what a synchronous extraction did; ``extraction_job``: the queued background extraction."""

    sessions_added: int = 0
    messages_added: int = 0
    messages_skipped: int = 0
    rounds_written: int = 0
    extraction: ExtractionResult | None = None
    extraction_job: ExtractionJob | None = None

    COUNTERS: ClassVar[tuple[str, ...]] = (
        "sessions_added",
        "messages_added",
        "messages_skipped",
        "rounds_written",
    )

    def __add__(self, other: IngestResult) -> IngestResult:
        """The counts of two ingest calls together (batches of one call, files of one command); what a single
        call queued or extracted is not summed and stays with that call's result."""
        return IngestResult(**{name: getattr(self, name) + getattr(other, name) for name in self.COUNTERS})


class ExtractionResult(BaseModel):
    """What an extraction run did, and what it cost (LLM calls and tokens, summed over every session)."""

    sessions: int = 0
    sessions_done: int = 0
    sessions_failed: int = 0
    facts_added: int = 0
    facts_reinforced: int = 0
    facts_superseded: int = 0
    events_added: int = 0
    entities_added: int = 0
    entities_merged: int = 0
    relations_added: int = 0
    items_dropped: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    errors: dict[str, str] = Field(default_factory=dict)
    retry_later: list[str] = Field(
        default_factory=list,
        description="failed sessions (also in errors) whose LLM could not answer now: it timed out, was unreachable, "
        "overloaded or rate-limited; the same call may work later (the background queue defers these)",
    )

    def __add__(self, other: ExtractionResult) -> ExtractionResult:
        data: dict[str, Any] = {}
        for name in type(self).model_fields:
            a, b = getattr(self, name), getattr(other, name)
            data[name] = {**a, **b} if isinstance(a, dict) else a + b
        return ExtractionResult(**data)


DocumentFormat = Literal["markdown", "text"]


class LearnedDocument(BaseModel):
    """What ``Memory.add_document`` did. ``status``: ``added`` (a new source), ``replaced`` (the source's earlier
    passages were erased, with what was extracted from them, and the new ones stored) or ``unchanged`` (the same
    passages are stored already: nothing written)."""

    source: str
    session_id: str = Field(description="the document's session: its passages are that session's messages")
    status: Literal["added", "replaced", "unchanged"]
    format: DocumentFormat
    passages: int = Field(description="the passages the document is stored as")
    removed: int = Field(default=0, description="passages of the earlier version erased (replaced)")
    title: str | None = Field(default=None, description="the document's first heading, if it has one")
    extraction: ExtractionResult | None = None
    extraction_job: ExtractionJob | None = None


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


Timestamp = Annotated[datetime, Field(description="ISO-8601; naive values are taken as UTC")]

# -- a whole scope, portable ----------------------------------------------------------------------------------------
SCOPE_EXPORT_FORMAT: Literal["graphrecall.scope/v1"] = "graphrecall.scope/v1"


class ExportedSession(BaseModel):
    """A session with its messages and its extraction state (so a restored scope is not extracted again)."""

    id: Identifier
    started_at: UtcDateTime
    extract_status: Literal["none", "pending", "running", "done", "failed"] = "none"
    extract_error: str | None = None
    messages: list[Message] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _ident(cls, v: str) -> str:
        return validate_identifier(v, "session_id")

    @field_validator("started_at")
    @classmethod
    def _utc(cls, v: datetime) -> datetime:
        return ensure_utc(v)


class ExportedEvent(Event):
    """An event with the entities it links to (SUBJECT and OBJECT edges)."""

    subject_ids: list[str] = Field(default_factory=list)
    object_ids: list[str] = Field(default_factory=list)


class SupersedesEdge(BaseModel):
    """``new`` replaced ``old`` (UPDATE, CONTRADICT or by hand) at ``at``, for ``reason``."""

    new_id: str
    old_id: str
    at: UtcDateTime | None = None
    reason: str = ""


class RelatedEdge(BaseModel):
    """A relation between two entities, as extraction found it (``sister_of``, ``works_at``)."""

    source: str
    target: str
    predicate: str
    fact_id: str = ""


class ScopeExport(BaseModel):
    """Everything one scope holds, as plain data: raw history (sessions, messages) and extracted memory (every
    fact, superseded ones included, the SUPERSEDES edges, events, entities, relations). Vectors and full-text
    terms are left out: they are derived, and ``Memory.import_scope`` recomputes them with the importing store's
    embedder (the same model gives the same vectors)."""

    format: Literal["graphrecall.scope/v1"] = SCOPE_EXPORT_FORMAT
    org_id: str | None = Field(default=None, description="where it was exported from (ignored on import)")
    user_id: str | None = Field(default=None, description="where it was exported from (ignored on import)")
    embedder_id: str | None = None
    exported_at: UtcDateTime | None = None
    sessions: list[ExportedSession] = Field(default_factory=list)
    entities: list[Entity] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    supersedes: list[SupersedesEdge] = Field(default_factory=list)
    events: list[ExportedEvent] = Field(default_factory=list)
    relations: list[RelatedEdge] = Field(default_factory=list)


class ImportResult(BaseModel):
    """What ``Memory.import_scope`` wrote. ``graph_skipped``: the scope already held exactly this extracted
    memory (a repeated import), so only the sessions were checked."""

    sessions_added: int = 0
    messages_added: int = 0
    messages_skipped: int = 0
    facts: int = 0
    supersedes: int = 0
    events: int = 0
    entities: int = 0
    relations: int = 0
    graph_skipped: bool = False


# -- what the console shows (graphrecall.services.overview) ----------------------------------------------------------
class ScopeSummary(BaseModel):
    """One user of an organisation at a glance: how much memory it holds, when it last changed, and how much of it
    still waits for extraction."""

    scope: Scope
    sessions: int = 0
    rounds: int = 0
    facts: int = 0
    events: int = 0
    entities: int = 0
    disk_bytes: int = 0
    last_write: UtcDateTime | None = Field(
        default=None,
        description="when its files last changed on disk (UTC): the latest write that reached them",
    )
    backlog: int = Field(
        default=0, description="sessions waiting for background extraction (pending, running)"
    )
    failed: int = Field(default=0, description="sessions whose background extraction failed")


class ScopePage(BaseModel):
    """A page of an organisation's users, by user id."""

    org_id: str
    total: int = Field(description="users that match the filter, over all pages")
    offset: int
    scopes: list[ScopeSummary]


GraphNodeKind = Literal["entity", "fact", "event"]
GraphEdgeKind = Literal["about", "subject", "object", "related", "supersedes"]


class GraphNode(BaseModel):
    """An entity, fact or event of the user's memory graph, with where it was said (click through to it)."""

    id: str
    kind: GraphNodeKind
    label: str = Field(description="an entity's name, a fact's or event's text")
    type: str = Field(default="", description="the entity type, the fact kind, or 'event'")
    session_id: str | None = None
    message_ids: list[str] = Field(default_factory=list)
    date: UtcDateTime | None = Field(default=None, description="a fact's valid_from, an event's start")
    current: bool = Field(default=True, description="facts: not superseded")


class GraphEdge(BaseModel):
    """``source`` -> ``target``: a fact ABOUT an entity, an event's SUBJECT or OBJECT, an entity RELATED to another
    (``label``: the predicate), a fact that SUPERSEDES another."""

    source: str
    target: str
    kind: GraphEdgeKind
    label: str = ""


class MemoryGraph(BaseModel):
    """Part of a user's memory graph: a page of facts and events, the entities they name, and the edges among
    them (only edges whose ends are both in the page)."""

    scope: Scope
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)
    more: bool = Field(default=False, description="more facts or events lie beyond this page (raise offset)")


class ExtractionQueue(BaseModel):
    """A page of one user's background extraction jobs, newest first, and the count of each status."""

    scope: Scope
    counts: dict[str, int] = Field(default_factory=dict, description="jobs by status, over all pages")
    total: int = Field(default=0, description="jobs with the asked status, over all pages")
    jobs: list[ExtractionJob] = Field(default_factory=list)


class MaintenanceRun(BaseModel):
    """One maintenance of a scope: where its backup went and what consolidation changed, at what model cost."""

    at: UtcDateTime
    backup: str = Field(
        description="the whole-scope export written before anything changed (graphrecall import)"
    )
    facts_merged: int = Field(
        default=0, description="duplicate facts superseded by the fact that absorbed them"
    )
    event_links: int = 0
    summaries: int = 0
    deferred: int = Field(default=0, description="clusters or windows left for a later run (the LLM budget)")
    errors: int = 0
    llm_calls: int = 0
    cost_usd: float = 0.0


class Compaction(BaseModel):
    """The bucket that holds a scope's rows (one Kuzu file, shared with other scopes of its organisation) as
    maintenance found it, and whether it was rewritten into a fresh file to give its free space back
    (docs/architecture.md "Storage: buckets")."""

    bucket: str = Field(description="the bucket's file, relative to the store root")
    bytes: int = Field(description="the file's size when measured")
    free_bytes: int = Field(
        description="what a rewrite gives back, at least (measured from Kuzu's own accounting)"
    )
    free_fraction: float = Field(description="free_bytes / bytes")
    bound: float = Field(
        description="the free fraction from which it is compacted (GRAPHRECALL_COMPACT_FREE_FRACTION)"
    )
    compacted: bool
    reason: str
    bytes_after: int | None = Field(default=None, description="the file's size after the rewrite")
    seconds: float | None = Field(default=None, description="how long the rewrite held the bucket's requests")


class Maintenance(BaseModel):
    """What ``Memory.maintain`` did to a scope, or why it did nothing (``reason``)."""

    scope: Scope
    ran: bool
    dry_run: bool = False
    reason: str
    run: MaintenanceRun | None = None
    consolidation: Consolidation | None = None
    compaction: Compaction | None = Field(
        default=None,
        description="the bucket holding the scope's rows: its free space and whether it was compacted (whether or "
        "not the scope itself was due); absent when the scope has no bucket yet",
    )


class GrowthPoint(BaseModel):
    """A scope's counts as maintenance saw them change."""

    at: UtcDateTime
    sessions: int
    messages: int
    facts: int
    events: int
    entities: int


class ScopeReport(BaseModel):
    """How a scope grew and is used: counts now and over time, extraction outcomes, search latency, the Reader's
    abstentions, maintenance runs (``Memory.report``, ``graphrecall report``)."""

    scope: Scope
    stats: ScopeStats
    growth: list[GrowthPoint] = Field(default_factory=list)
    extraction: dict[str, int] = Field(default_factory=dict, description="background jobs by status")
    searches: int = 0
    search_p50_ms: float | None = None
    search_p95_ms: float | None = None
    answers: int = 0
    abstained: int = 0
    abstention_rate: float | None = None
    maintenance: list[MaintenanceRun] = Field(default_factory=list)
    hook_errors: int = Field(default=0, description="errors agent hooks recorded while working on this scope")
