"""The parameters of every public operation, written down once for every surface.

Why one model per operation: the Python API, the HTTP API, the MCP tools and the CLI each used to declare these
parameters by hand, and they drifted (different names, defaults, bounds and wording for the same thing, a date
parsed two ways). Each surface now derives its own form from the models below (``graphrecall.operations`` binds
each model to its operation and says which surfaces expose it): ``Memory`` validates its arguments with them,
FastAPI uses them as query and body models, the MCP server builds its tool signatures from their fields, and the
CLI builds its argparse options from them (``add_arguments``). ``tests/integration/test_param_surfaces.py`` compares
every surface with these models.

The field names are the Python keyword names, so a validated model maps onto a ``Memory`` call with no table of
its own. Dates go through ``parse_date`` (ISO-8601, naive = UTC, and LongMemEval's format) on every surface, so a
bad date reads the same wherever it was typed.

This module sits on the ground floor: it imports pydantic and the ground floor only, never a surface.
"""

from __future__ import annotations

import argparse
import re
import types
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from graphrecall import docref
from graphrecall.dates import parse_date
from graphrecall.errors import InvalidInput
from graphrecall.models import (
    ID_PATTERN,
    MAX_ID_LENGTH,
    NOT_BLANK,
    SHARED_ID_PATTERN,
    Message,
    Role,
    Scope,
    SessionInput,
    validate_identifier,
)
from graphrecall.text import query_terms

MAX_QUERY_CHARS = 10_000
# Sessions per transaction in bulk ingest (``Memory.add_sessions``, the CLI's ``ingest --batch``): each transaction
# ends with a commit, a checkpoint and a derived-index update (~0.2-0.35 s) that nothing overlaps, so a 600-round
# call in two transactions of 64 sessions paid it twice (docs/benchmarks.md, ingest).
BATCH_SESSIONS = 128
MAX_BATCH_SESSIONS = 10_000
MAX_K = 100
MAX_CONTEXT_K = 200
MAX_TOKEN_BUDGET = 200_000
MIN_READER_BUDGET = 200
MAX_TOOL_STEPS = 16
MAX_FACTS = 1000
MAX_LISTED = 10_000
MAX_FACT_CHARS = 2000
MAX_FACT_ENTITIES = 32
MAX_ERASE_IDS = 1000

QUESTION_DATE_HELP = (
    "the moment the question is asked (ISO-8601, naive = UTC): relative time ('last week') is anchored on it and "
    "nothing recorded after it (beyond the same-day slack) is visible; omitted = now (UTC)"
)
ROLE_NAMES = ", ".join(r.value for r in Role)


# -- field types ----------------------------------------------------------------------------------------------------
def _date(value: Any) -> Any:
    """Strings become dates through the project's one parser; its message (not pydantic's) names the problem. A
    number is refused rather than read as seconds since 1970: the contract says a date is an ISO-8601 string, and
    ``0`` or ``0.5`` sent where a date belongs is a mistake, not 1970."""
    if isinstance(value, str):
        try:
            return parse_date(value, where="")
        except InvalidInput as e:
            raise ValueError(str(e)) from None
    if isinstance(value, bool | int | float):
        raise ValueError(f"expected an ISO-8601 date string, got the {type(value).__name__} {value!r}")
    return value


def _identifier(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str):
        validate_identifier(value, info.field_name or "id")
    return value


def _message(value: Any) -> Any:
    """A message must be an object with a role and content."""
    if isinstance(value, MessageIn):
        return value
    if isinstance(value, Message):
        return value.model_dump()
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object with role and content, got {type(value).__name__}")
    missing = [key for key in ("role", "content") if key not in value]
    if missing:
        raise ValueError(f"missing field {missing[0]!r}")
    return value


def _listed(value: Any) -> Any:
    """A list argument must be a list: a string or a dict would otherwise be iterated item by item."""
    if isinstance(value, str | bytes | Mapping):
        raise ValueError(f"expected a list, got {type(value).__name__}")
    if isinstance(value, Iterable) and not isinstance(value, list):
        return list(
            value
        )  # a tuple or a generator from Python callers: a list, which strict validation wants
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


Text = Annotated[str, AfterValidator(_not_blank), Field(json_schema_extra={"pattern": NOT_BLANK})]
"""Words a person wrote (a query, a question, a fact): empty or only whitespace is a mistake."""
DateArg = Annotated[datetime, BeforeValidator(_date)]
"""A moment: a ``datetime`` or an ISO-8601 string (naive = UTC; LongMemEval's ``2023/05/20 (Sat) 07:47`` too)."""
IdArg = Annotated[
    str, Field(min_length=1, max_length=MAX_ID_LENGTH, json_schema_extra={"pattern": ID_PATTERN}),
    BeforeValidator(_identifier),
]  # fmt: skip
"""An id that becomes part of a key or a file name: no path characters, no control characters (the schema's
``pattern`` states ``validate_identifier``'s rule; the validator gives the message naming what is wrong)."""


class MessageIn(Message):
    """A message as callers send it: ``at`` is read by the project's date rule, like every other date, and the
    types are strict like every parameter model's (``Params``): ``"idx": false`` is not the index 0."""

    model_config = ConfigDict(extra="ignore", strict=True)

    role: Role = Field(
        strict=False
    )  # the enum's values ("user") are how it is sent; strict wants the enum itself
    at: DateArg | None = None


MessageArg = Annotated[MessageIn, BeforeValidator(_message)]
Messages = Annotated[list[MessageArg], BeforeValidator(_listed)]


ScopeLike = Scope | tuple[str, str]


def as_scope(scope: ScopeLike) -> Scope:
    """Whose memory: a ``Scope``, or an ``(org_id, user_id)`` pair checked like one."""
    if isinstance(scope, Scope):
        return scope
    try:
        org, user = scope
    except (TypeError, ValueError):
        raise InvalidInput("scope must be a Scope or an (org_id, user_id) pair", where="scope") from None
    try:
        return Scope(org_id=org, user_id=user)
    except ValueError as e:
        raise InvalidInput(str(e), where="scope") from None


class Params(BaseModel):
    """The base of every parameter model: unknown names are errors (a misspelled option must not be dropped), and
    types are strict: a boolean is not an integer (``"idx": false``), an integer is not a boolean
    (``"extract": 0``), a number is not a date, a string is not a number. JSON bodies, MCP arguments and Python
    calls give values their real types; what arrives as text (a URL's query, the command line) is read from text
    first (``QueryParams``, ``from_cli``), by rules as narrow as these."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _whole_number(cls, value: Any, info: ValidationInfo) -> Any:
        """``2.0`` where an integer belongs is the integer 2: JSON Schema's ``integer`` is any number without a
        fractional part, and generated clients may send one so; ``2.5`` (and ``true``) stay refused. A tuple
        where a list belongs is that list."""
        field = cls.model_fields.get(info.field_name or "")
        kind = plain_type(field.annotation) if field else None
        if isinstance(value, float) and value.is_integer() and kind is int:
            return int(value)
        if isinstance(value, tuple) and get_origin(kind) is list:
            return list(value)  # Python callers' tuples (``kinds=("round", "fact")``): strict wants a list
        return value


# -- ingest ---------------------------------------------------------------------------------------------------------
class AddSessionParams(Params):
    """``add_session``: one whole conversation. Re-sending the same session id and message ids changes nothing."""

    messages: Messages = Field(min_length=1, description="the session's turns, in order")
    session_id: IdArg = Field(description="stable id of the conversation; re-adding it is idempotent")
    date: DateArg | None = Field(
        default=None, description="when the session happened (ISO-8601, naive = UTC); omitted = now"
    )
    extract: bool = Field(
        default=False,
        description="also extract facts, events and entities with the configured LLM: the session is stored and "
        "queued (extraction_job says so; failures are retried and end failed with the reason)",
    )


class AddMessagesParams(Params):
    """``add_messages``: turns appended to a session (created if new). Messages with ids are idempotent; messages
    without are numbered after those already stored, so sending them twice stores them twice."""

    messages: Messages = Field(min_length=1, description="the turns to append, in order")
    session_id: IdArg = Field(default="default", description="the session they belong to (created if new)")
    date: DateArg | None = Field(
        default=None, description="when they were said, for turns without their own 'at'; omitted = now"
    )


def _exported(value: Any) -> Any:
    """A ``Session`` (what ``export_sessions`` returns to Python callers) is taken as the data it holds."""
    return (
        value.model_dump()
        if isinstance(value, BaseModel) and not isinstance(value, ImportedSession)
        else value
    )


class ImportedSession(Params):
    """One session of ``import_sessions``, as ``export_sessions`` writes it (a ``Session``), checked like every
    input: strict types, the id rule, dates by the project's date rule (offset-less = UTC, as older exports wrote
    them). Keys it does not know (``extract_status``, ``extract_error``) are ignored, as they always were."""

    model_config = ConfigDict(extra="ignore", strict=True)

    id: IdArg
    started_at: DateArg
    messages: Messages = Field(min_length=1)


class SessionItem(Params):
    """One session of a bulk ingest, validated: its id, its date, and at least one message."""

    session_id: IdArg
    date: DateArg | None = None
    messages: Messages = Field(min_length=1)


def _session_item(value: Any) -> Any:
    return value.model_dump() if isinstance(value, SessionInput) else value


class AddSessionsParams(Params):
    """``add_sessions``: bulk ingest. Everything is validated before anything is written; each batch of
    ``batch_sessions`` sessions is one transaction (all or nothing)."""

    sessions: Annotated[
        list[Annotated[SessionItem, BeforeValidator(_session_item)]], BeforeValidator(_listed)
    ] = Field(description="the sessions: each a session_id, a date and its messages")
    batch_sessions: int = Field(
        default=BATCH_SESSIONS, ge=1, le=MAX_BATCH_SESSIONS, description="sessions per transaction"
    )

    @model_validator(mode="after")
    def _unique(self) -> AddSessionsParams:
        """Ids must be unique within one call: a clash would otherwise fail halfway through the write."""
        unique_ids([(s.session_id, s.messages) for s in self.sessions])
        return self


def unique_ids(sessions: Sequence[tuple[str, Sequence[Message]]]) -> None:
    """``InvalidInput`` naming the first session id, or message id, that appears twice among ``sessions``."""
    seen_sessions: set[str] = set()
    seen_messages: set[str] = set()
    for i, (session_id, messages) in enumerate(sessions):
        if session_id in seen_sessions:
            raise InvalidInput(f"session id {session_id!r} appears twice in one call", where="sessions")
        seen_sessions.add(session_id)
        for j, m in enumerate(messages):
            if m.id is not None:
                if m.id in seen_messages:
                    raise InvalidInput(
                        f"duplicate message id {m.id!r}", where=f"sessions[{i}].messages[{j}].id"
                    )
                seen_messages.add(m.id)


SESSIONS_FORMAT: Literal["graphrecall.sessions/v1"] = "graphrecall.sessions/v1"


class ImportSessionsParams(Params):
    """``import_sessions``: sessions in the export format (what ``export_sessions`` returns on every surface),
    added like ``add_sessions``: a session or message already stored is skipped."""

    format: Literal["graphrecall.sessions/v1"] = Field(
        default=SESSIONS_FORMAT, description="the export format's name and version"
    )
    org_id: str | None = Field(default=None, description="where it was exported from (ignored)")
    user_id: str | None = Field(default=None, description="where it was exported from (ignored)")
    sessions: Annotated[
        list[Annotated[ImportedSession, BeforeValidator(_exported)]], BeforeValidator(_listed)
    ] = Field(description="the sessions with their messages, as exported; ids unique within the call")

    @model_validator(mode="after")
    def _unique(self) -> ImportSessionsParams:
        """Checked here, where the error names the request's field, not by the ``add_sessions`` it becomes."""
        unique_ids([(s.id, s.messages) for s in self.sessions])
        return self


MAX_DOCUMENT_CHARS = 1_000_000
"""Longest document text (about 400 pages): more is several documents (a request body is capped at 2 MB anyway)."""


SOURCE_PATTERN = r"^[^\n\r]*\S[^\n\r]*$"
"""A document's source as a JSON-schema ``pattern``: one line, not blank (``_source`` says it in words)."""


def _source(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("source must be one line (a file's path, a URL or a label)")
    return value


class AddDocumentParams(Params):
    """``add_document``: a document (Markdown or plain text) split into passages stored as a session of their own,
    searchable beside the chat history. Learning the same source again replaces its passages; the same text again
    changes nothing."""

    document: Text = Field(
        min_length=1,
        max_length=MAX_DOCUMENT_CHARS,
        description="the document's text (the Python API and the learn command also take a file: Markdown, plain "
        "text or PDF)",
    )
    source: (
        Annotated[
            str,
            AfterValidator(_not_blank),
            AfterValidator(_source),
            Field(json_schema_extra={"pattern": SOURCE_PATTERN}),
        ]
        | None
    ) = Field(
        default=None,
        min_length=1,
        max_length=docref.MAX_SOURCE_CHARS,
        description="the name the document is learned under (a file's path, a URL, a label): learning the same "
        "source again replaces it. Omitted: a file's path, else the document's title (or first line) and a hash of "
        "its text, so that the same text is the same document but a changed one is another",
    )
    format: Literal["auto", "markdown", "text"] = Field(
        default="auto",
        description="how to split it: markdown (headings and paragraphs), text (blank lines), or auto (by the "
        "source's suffix, else markdown when it has # headings)",
    )
    date: DateArg | None = Field(
        default=None,
        description="when the document was written or is valid from (ISO-8601, naive = UTC): questions asked "
        "before it do not see it; omitted = now",
    )
    extract: bool = Field(
        default=False,
        description="also extract facts, events and entities from its passages with the configured LLM (queued "
        "like add_session's)",
    )


# -- recall ---------------------------------------------------------------------------------------------------------
HitKindName = Literal["round", "fact", "event"]

SHARED_PREFIX = "_"
MAX_ALSO = 8


def is_shared(scope: Scope) -> bool:
    """A shared scope (an organisation's or a project's memory, not one person's) has a user id starting with
    ``_``: ``acme/_shared``, ``acme/_project-atlas``. Any key of the organisation may read it; writing to it needs a
    key that allows it (``server.auth``); erasing a user never touches it."""
    return scope.user_id.startswith(SHARED_PREFIX)


def same_org_also(scope: Scope, also: Iterable[Any]) -> list[Any]:
    """``also`` as user ids, for a Python caller who may name shared scopes as ``Scope`` objects or ``(org, user)``
    pairs: those must be of ``scope``'s organisation (over HTTP and MCP the organisation is the path's)."""
    out: list[Any] = []
    for item in also:
        if isinstance(item, Scope | tuple):
            other = as_scope(item)
            if other.org_id != scope.org_id:
                raise InvalidInput(
                    f"{other} belongs to another organisation than {scope}: only its own organisation's shared "
                    "scopes can be read with a user's memory",
                    where="also",
                )
            item = other.user_id
        out.append(item)
    return out


def _shared_name(value: str) -> str:
    user = validate_identifier(value, "shared scope")
    if not user.startswith(SHARED_PREFIX):
        raise ValueError(
            f"{user!r} is not a shared scope: only scopes whose user id starts with {SHARED_PREFIX!r} (an "
            "organisation's or a project's memory) can be searched together with a user's"
        )
    return value


SharedScopeName = Annotated[
    str,
    AfterValidator(_shared_name),
    Field(json_schema_extra={"minLength": 1, "maxLength": MAX_ID_LENGTH, "pattern": SHARED_ID_PATTERN}),
]
ALSO_HELP = (
    "shared scopes of the same organisation to read together with this one: their user ids (starting with '_', "
    "e.g. _shared, _project-atlas), at most 8; each hit's scope says where it came from"
)


def also_field() -> Any:
    return Field(default=[], max_length=MAX_ALSO, description=ALSO_HELP)


class SearchParams(Params):
    """``search``: the ranked evidence of a scope's memory that best matches a query."""

    query: Text = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for")
    k: int = Field(default=10, ge=1, le=MAX_K, description="how many hits to return")
    question_date: DateArg | None = Field(default=None, description=QUESTION_DATE_HELP)
    as_of: DateArg | None = Field(
        default=None,
        description="fact hits: those true at this moment (valid time) instead of the current ones",
    )
    kinds: list[HitKindName] = Field(
        default=["round"],
        min_length=1,
        description="what comes back: rounds of the history, and/or extracted facts and events",
    )
    also: list[SharedScopeName] = also_field()


class ContextParams(Params):
    """``context``: the evidence for a question, dated and grouped by session, inside a token budget."""

    query: Text = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="the question the evidence is for"
    )
    token_budget: int = Field(
        default=2000, ge=1, le=MAX_TOKEN_BUDGET, description="most tokens of evidence to return"
    )
    k: int = Field(default=30, ge=1, le=MAX_CONTEXT_K, description="candidate hits to fit into the budget")
    question_date: DateArg | None = Field(default=None, description=QUESTION_DATE_HELP)
    include_profile: bool = Field(
        default=False,
        description="put the user's profile (current facts by kind, as of the question date) first, within a "
        "third of the budget",
    )
    also: list[SharedScopeName] = also_field()


AnswerMode = Literal["auto", "recall", "synthesis"]
ToolProtocol = Literal["auto", "native", "text", "none"]


class AnswerParams(Params):
    """``answer``: a reply from memory by the Reader (needs an LLM)."""

    question: Text = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="the question to answer from memory"
    )
    question_date: DateArg | None = Field(default=None, description=QUESTION_DATE_HELP)
    mode: AnswerMode = Field(
        default="auto",
        description="auto: the question classifier decides; recall: look a fact up; synthesis: combine many",
    )
    tools: ToolProtocol = Field(
        default="auto",
        description="how the reader calls memory tools: native function calling, a text protocol, none, or auto",
    )
    token_budget: int | None = Field(
        default=None,
        ge=MIN_READER_BUDGET,
        le=MAX_TOKEN_BUDGET,
        description="cap on the context the reader sees (for models with a small window); omitted = no cap",
    )
    max_tool_steps: int = Field(
        default=4,
        ge=0,
        le=MAX_TOOL_STEPS,
        description="most tool-calling rounds before the reader must answer",
    )
    also: list[SharedScopeName] = also_field()


class ProfileParams(Params):
    """``profile``: what memory holds about the user, grouped by kind and dated, for a system prompt."""

    as_of: DateArg | None = Field(
        default=None,
        description="the moment the profile describes (ISO-8601, naive = UTC): nothing recorded after it (beyond "
        "the same-day slack) is in it, nor anything superseded by then; omitted = now (UTC)",
    )
    token_budget: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKEN_BUDGET,
        description="most tokens of profile text (the top of every group is kept); omitted = everything current",
    )
    also: list[SharedScopeName] = also_field()


# -- history --------------------------------------------------------------------------------------------------------
class NoParams(Params):
    """An operation on a whole scope that takes nothing else."""


class SessionsParams(Params):
    """``sessions``: the scope's sessions, oldest first, without their messages."""

    limit: int = Field(default=1000, ge=1, le=MAX_LISTED, description="most sessions to return")
    offset: int = Field(default=0, ge=0, description="sessions to skip, for paging")


class GetSessionParams(Params):
    """``get_session``: one session with its messages."""

    session_id: IdArg = Field(description="the session's id")


# -- extracted memory -----------------------------------------------------------------------------------------------
class FactsParams(Params):
    """``facts``: extracted facts, the current ones or those true at a moment."""

    as_of: DateArg | None = Field(
        default=None,
        description="ISO-8601: the facts true at that moment (valid time); omitted = the current ones",
    )
    include_superseded: bool = Field(
        default=False, description="also list facts later replaced, with what replaced them"
    )
    limit: int = Field(default=100, ge=1, le=MAX_FACTS, description="most facts to return")
    offset: int = Field(default=0, ge=0, description="facts to skip, for paging")


class HistoryParams(Params):
    """``history``: the versions of one fact, oldest first."""

    fact_id: IdArg = Field(description="a fact id, as facts lists it")


class SupersedeParams(Params):
    """``supersede``: mark a fact as replaced by another by hand (nothing is deleted)."""

    old_id: IdArg = Field(description="the fact that is no longer true")
    new_id: IdArg = Field(description="the fact that replaces it")
    reason: str = Field(
        default="manual", min_length=1, max_length=200, description="why, kept with the supersession"
    )


class FeedbackParams(Params):
    """``feedback``: say that a hit (a round, fact or event id from a search) was useful or wrong."""

    item_id: IdArg = Field(
        description="the id of a hit from search or context (a round, fact or event), or a fact's"
    )
    useful: bool = Field(
        description="true: it helped (a fact is reinforced and any dispute lifted); false: it was wrong or "
        "irrelevant (a fact is marked disputed and leaves the profile until marked useful)"
    )
    note: str | None = Field(default=None, max_length=500, description="why, kept with a disputed fact")


class EventsParams(Params):
    """``events``: extracted events in time order (events without a time last)."""

    limit: int = Field(default=1000, ge=1, le=MAX_LISTED, description="most events to return")
    offset: int = Field(default=0, ge=0, description="events to skip, for paging")


class ExtractParams(Params):
    """``extract``: facts, events and entities from one session, or from every session not yet done."""

    session_id: IdArg | None = Field(
        default=None,
        description="only this session (re-extracted whatever its status); omitted = every one not done",
    )


FactKindName = Literal["preference", "attribute", "plan", "event", "relationship", "opinion", "other"]
"""``models.FactKind``'s values as a ``Literal``, so every surface shows them as choices (a test keeps both equal)."""


class AddFactParams(Params):
    """``add_fact``: store a fact the application already knows, versioned like an extracted one."""

    text: Text = Field(
        min_length=1,
        max_length=MAX_FACT_CHARS,
        description="the fact, one self-contained sentence about the user ('The user works at Globex.')",
    )
    kind: FactKindName = Field(
        default="other",
        description="attribute (identity, job, home...), preference, opinion, relationship, plan, event, other",
    )
    entities: (
        Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], BeforeValidator(_listed)] | None
    ) = Field(
        default=None,
        max_length=MAX_FACT_ENTITIES,
        description="names of the people, places, things it is about (never the user); matched to stored ones",
    )
    valid_from: DateArg | None = Field(
        default=None, description="ISO-8601: since when it is true; omitted = when it is recorded"
    )
    source: IdArg | None = Field(
        default=None,
        description="a session of this user it comes from (its date is when it was said) or a label such as "
        "'crm' (said now); omitted = 'app'",
    )
    key: Text | None = Field(
        default=None,
        max_length=200,
        description="the application's name for what the fact states ('preferred_language', a settings field, a CRM "
        "column): the current fact of the same kind and key is replaced by this one, by that rule alone (no LLM, no "
        "similarity), and stays in history; the same text again reinforces it",
    )


class EraseParams(Params):
    """``erase``: forget part of a user's memory (``forget`` erases all of it). Everything derived from what goes
    (rounds, extracted facts and events, orphaned entities, index entries) goes with it; run with dry_run first."""

    session_ids: Annotated[list[IdArg], BeforeValidator(_listed)] | None = Field(
        default=None, max_length=MAX_ERASE_IDS, description="sessions to erase, with their messages"
    )
    fact_ids: Annotated[list[IdArg], BeforeValidator(_listed)] | None = Field(
        default=None, max_length=MAX_ERASE_IDS, description="facts to erase (what was said stays)"
    )
    before: DateArg | None = Field(
        default=None, description="ISO-8601: erase every session that started before this moment"
    )
    matching: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="erase every round, fact and event whose text holds all of these words",
    )
    dry_run: bool = Field(default=False, description="only list what would be erased")

    @model_validator(mode="after")
    def _something(self) -> EraseParams:
        """An erase that names nothing is a mistake, not a request to erase nothing (``forget`` erases all)."""
        if not (self.session_ids or self.fact_ids or self.before is not None or self.matching):
            raise InvalidInput(
                "say what to erase: session_ids, fact_ids, before or matching (forget erases a whole scope)",
                where="erase",
            )
        if self.matching is not None and not query_terms(self.matching):
            raise InvalidInput(f"matching {self.matching!r} has no words to match", where="matching")
        return self


class ConsolidateParams(Params):
    """``consolidate``: merge duplicate current facts (the rest are superseded, never deleted), link events to the
    entities they name, and optionally summarize old periods; with an LLM one call per cluster or period."""

    dry_run: bool = Field(default=False, description="only plan: list what would change, write nothing")
    summaries: bool = Field(
        default=False,
        description="also write one dated summary fact per old window of sessions (needs an LLM)",
    )


class MaintainParams(Params):
    """``maintain``: a backup, then consolidation, when the scope changed since its last maintenance and has been
    idle since; and on every call the scope's bucket and derived indexes rewritten once their free space passes
    the compaction bound (``services.maintenance``)."""

    dry_run: bool = Field(default=False, description="only say whether it is due and plan: write nothing")
    force: bool = Field(default=False, description="run now even if nothing changed or the scope is in use")
    idle_s: float = Field(
        default=1800.0,
        ge=0,
        le=30 * 86400,
        description="seconds without a change before a changed scope is due",
    )
    max_llm_calls: int = Field(default=20, ge=0, le=10_000, description="most model calls this run may make")
    keep_backups: int = Field(default=5, ge=1, le=1000, description="backups kept per scope (the newest)")


class DatasetParams(Params):
    """``dataset``: records built from stored memory for fine-tuning or evaluating an assistant, each citing its
    sources (``graphrecall.dataset``)."""

    format: Literal["chat", "qa", "graph"] = Field(
        default="qa",
        description="chat: sessions with the facts taken from them; qa: question-answer pairs; graph: triples",
    )
    generate: bool = Field(
        default=False,
        description="qa: write the questions with the LLM and keep those its check finds supported (needs an LLM); "
        "otherwise they are built deterministically from events and facts",
    )
    limit: int | None = Field(default=None, ge=1, le=100_000, description="most records; omitted = all")


class ReportParams(Params):
    """``report``: how a scope grew and is used."""

    since_hours: float | None = Field(
        default=None,
        gt=0,
        le=24 * 3650,
        description="search and answer figures of the last hours; omitted = all",
    )


# -- errors ---------------------------------------------------------------------------------------------------------
def location(loc: Iterable[Any]) -> str:
    """``("messages", 0, "content")`` -> ``messages[0].content``: how every surface names a field."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def invalid(error: ValidationError, *, names: Mapping[str, str] | None = None) -> InvalidInput:
    """The first problem of a failed validation as the project's ``InvalidInput``: ``where`` is the field's path
    (``names`` renames its first part, e.g. to a CLI flag), the message the validator's own words."""
    return first_problem(error.errors(), names=names)


def first_problem(
    errors: Sequence[Mapping[str, Any]], *, names: Mapping[str, str] | None = None
) -> InvalidInput:
    """``invalid`` over pydantic's error list (what FastAPI hands its validation handler too)."""
    first = errors[0] if errors else {"loc": (), "msg": "invalid value", "type": ""}
    loc = list(first.get("loc", ()))
    kind = first.get("type", "")
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    ctx = first.get("ctx")
    ctx_error = ctx.get("error") if isinstance(ctx, Mapping) else None
    if isinstance(ctx_error, InvalidInput):  # raised on purpose by a model validator: it names its own field
        return ctx_error
    if kind == "missing" and loc:
        message = f"missing field {loc[-1]!r}"
        loc = loc[:-1] or loc
    elif kind == "enum" and loc and loc[-1] == "role":
        message = f"role {first.get('input')!r} is not one of {ROLE_NAMES}"
    elif kind == "too_short" and loc and loc[-1] == "messages":
        message = "a session needs at least one message"
    elif kind == "extra_forbidden" and loc:
        message = f"unknown parameter {loc[-1]!r}"
    if loc and names and str(loc[0]) in names:
        rest = location(["_", *loc[1:]])[1:]  # "[0].x" or ".x": the path below the renamed field
        return InvalidInput(message, where=names[str(loc[0])] + rest)
    return InvalidInput(message, where=location(loc))


def validate(spec: type[Params], values: Mapping[str, Any]) -> Any:
    """``values`` as the spec model, or ``InvalidInput`` naming the field (the one way every surface validates)."""
    try:
        return spec.model_validate(dict(values))
    except ValidationError as e:
        raise invalid(e) from None
    except InvalidInput:
        raise


# -- derived forms --------------------------------------------------------------------------------------------------
def plain_type(annotation: Any) -> Any:
    """The annotation without ``None`` and ``Annotated`` wrappers: ``int | None`` -> ``int``."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return plain_type(rest[0])
    return annotation


def bounds(field: FieldInfo) -> tuple[int | None, int | None]:
    """The (ge, le) bounds of a numeric field, None where unbounded."""
    lo = hi = None
    for m in field.metadata:
        lo = getattr(m, "ge", None) if getattr(m, "ge", None) is not None else lo
        hi = getattr(m, "le", None) if getattr(m, "le", None) is not None else hi
    return lo, hi


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


_TRUTH = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _truth(text: str) -> bool:
    try:
        return _TRUTH[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}") from None


def add_arguments(
    parser: argparse.ArgumentParser, spec: type[BaseModel], aliases: Mapping[str, list[str]] | None = None
) -> None:
    """Add one argparse option per field of ``spec``: required strings become positionals, booleans flags,
    literals choices, lists repeatable options; the rest are ``--dashed-name`` options whose text is checked by
    ``from_cli`` against the spec (so the CLI enforces the same bounds, and a bad value names the flag)."""
    aliases = aliases or {}
    for name, field in spec.model_fields.items():
        kind = plain_type(field.annotation)
        text = field.description or ""
        if field.is_required():
            if kind is bool:  # a required yes/no (feedback's useful): a positional true or false
                parser.add_argument(name, type=_truth, metavar=f"{name}:true|false", help=text)
            else:
                parser.add_argument(name, help=text)
            continue
        extra = aliases.get(name, [])
        # Short forms (-k) read best first in --help; the spec's --dashed-name is always accepted.
        names = [
            *[a for a in extra if not a.startswith("--")],
            flag(name),
            *[a for a in extra if a.startswith("--")],
        ]
        if kind is bool:
            parser.add_argument(*names, dest=name, action="store_true", help=text)
            continue
        if get_origin(kind) is list:  # repeat the option once per value
            inner = plain_type(get_args(kind)[0])
            choices = [str(c) for c in get_args(inner)] if get_origin(inner) is Literal else None
            shown = f" (default: {' '.join(map(str, field.default))})" if field.default else ""
            parser.add_argument(
                *names, dest=name, action="append", default=None, choices=choices,
                metavar=None if choices else "VALUE", help=f"{text} (repeatable){shown}",
            )  # fmt: skip
            continue
        shown = f"(default: {field.default})" if field.default is not None else ""
        if get_origin(kind) is Literal:
            choices = [str(c) for c in get_args(kind)]
            parser.add_argument(
                *names, dest=name, choices=choices, default=field.default, help=f"{text} {shown}"
            )
            continue
        meta = "N" if kind is int else ("DATE" if kind is datetime else None)
        parser.add_argument(
            *names, dest=name, default=field.default, metavar=meta, help=f"{text} {shown}".strip()
        )


def from_cli(
    spec: type[BaseModel], args: argparse.Namespace, *, names: Mapping[str, str] | None = None
) -> Any:
    """The spec model from parsed CLI arguments; a bad value raises ``InvalidInput`` naming the flag (``names``:
    how the command line spells each field; default ``--dashed-name``, a positional by its name) and what is
    wrong. An option left out takes the spec's default."""
    values = {
        name: getattr(args, name)
        for name, field in spec.model_fields.items()
        if hasattr(args, name) and (field.is_required() or getattr(args, name) is not None)
    }
    shown = {n: n if f.is_required() else flag(n) for n, f in spec.model_fields.items()} | dict(names or {})
    try:
        return spec.model_validate(values, strict=False)  # argparse hands text: "5" is the number 5 here
    except ValidationError as e:
        err, loc = invalid(e, names=shown), e.errors()[0]["loc"]
    message = str(err).removeprefix(f"{err.where}: ")
    for name in sorted(spec.model_fields, key=len, reverse=True):  # a validator's words name fields
        message = re.sub(rf"(?<![\w-]){name}(?![\w-])", shown[name], message)
    given = repr(values[str(loc[0])]) if loc and str(loc[0]) in values else ""
    got = f" (got {given})" if given and given not in message else ""
    raise InvalidInput(message + got, where=shown.get(err.where, err.where)) from None


# -- the console's reads (graphrecall.services.overview) -------------------------------------------------------------
MAX_PAGE = 1000


class ListScopesParams(Params):
    """``list_scopes``: an organisation's users with their sizes, last write and extraction backlog, by user id,
    one page at a time (each listed user's database is opened; the others are only named)."""

    org_id: IdArg = Field(description="the organisation")
    contains: str | None = Field(
        default=None, min_length=1, max_length=MAX_ID_LENGTH, description="only user ids holding this text"
    )
    limit: int = Field(default=50, ge=1, le=MAX_PAGE, description="most users to return")
    offset: int = Field(default=0, ge=0, description="users to skip, for paging")


class GraphParams(Params):
    """``graph``: the user's memory graph (entities, facts, events and their edges), a page of facts and events at
    a time, optionally around one entity."""

    entity: IdArg | None = Field(default=None, description="only facts and events linked to this entity id")
    as_of: DateArg | None = Field(
        default=None, description="facts true at this moment (valid time) instead of the current ones"
    )
    include_superseded: bool = Field(default=False, description="also the facts later replaced")
    limit: int = Field(default=200, ge=1, le=MAX_PAGE, description="most facts, and most events, to return")
    offset: int = Field(default=0, ge=0, description="facts and events to skip, for paging")


class ExtractionQueueParams(Params):
    """``extraction_queue``: the user's background extraction jobs, newest first."""

    status: Literal["pending", "running", "done", "failed"] | None = Field(
        default=None, description="only jobs with this status"
    )
    limit: int = Field(default=100, ge=1, le=MAX_PAGE, description="most jobs to return")
    offset: int = Field(default=0, ge=0, description="jobs to skip, for paging")
