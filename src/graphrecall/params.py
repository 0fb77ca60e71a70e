"""The parameters of ``search``, ``context``, ``answer``, ``facts``, ``profile``, ``add_fact``, ``erase`` and
``consolidate``, written down once
for every surface.

Why one spec: the HTTP API, the MCP tools and the CLI each used to declare these parameters by hand, and they drifted
(different names, defaults, bounds and wording for the same thing). Each surface now derives its own form from the
models below: FastAPI uses them as query/body models, the MCP server builds its tool signatures from their fields,
and the CLI builds its argparse options from them (``graphrecall.params.add_arguments``). A test compares the three
surfaces against these models, so a parameter added here appears everywhere or the test fails.

This module sits on the ground floor: it imports pydantic and ``graphrecall.models`` only, never a surface.
"""

from __future__ import annotations

import argparse
import types
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo

from graphrecall.errors import InvalidInput
from graphrecall.models import ensure_utc

MAX_QUERY_CHARS = 10_000
# Sessions per transaction in bulk ingest (``Memory.add_sessions``, the CLI's ``add --batch``): each transaction
# ends with a commit, a checkpoint and a derived-index update (~0.2-0.35 s) that nothing overlaps, so a 600-round
# call in two transactions of 64 sessions paid it twice (docs/benchmarks.md, ingest).
BATCH_SESSIONS = 128
MAX_K = 100
MAX_CONTEXT_K = 200
MAX_TOKEN_BUDGET = 200_000
MIN_READER_BUDGET = 200
MAX_TOOL_STEPS = 16
MAX_FACTS = 1000

QUESTION_DATE_HELP = (
    "the moment the question is asked (ISO-8601, naive = UTC): relative time ('last week') is anchored on it and "
    "nothing recorded after it (beyond the same-day slack) is visible; omitted = now (UTC)"
)


UtcDatetime = Annotated[datetime, AfterValidator(ensure_utc)]
AnswerMode = Literal["auto", "recall", "synthesis"]
ToolProtocol = Literal["auto", "native", "text", "none"]


class SearchParams(BaseModel):
    """``search``: the ranked rounds of a scope's history that best match a query."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for")
    k: int = Field(default=10, ge=1, le=MAX_K, description="how many hits to return")
    question_date: UtcDatetime | None = Field(default=None, description=QUESTION_DATE_HELP)


class ContextParams(BaseModel):
    """``context``: the evidence for a question, dated and grouped by session, inside a token budget."""

    query: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="the question the evidence is for"
    )
    token_budget: int = Field(
        default=2000, ge=1, le=MAX_TOKEN_BUDGET, description="most tokens of evidence to return"
    )
    k: int = Field(default=30, ge=1, le=MAX_CONTEXT_K, description="candidate hits to fit into the budget")
    question_date: UtcDatetime | None = Field(default=None, description=QUESTION_DATE_HELP)
    include_profile: bool = Field(
        default=False,
        description="put the user's profile (current facts by kind, as of the question date) first, within a "
        "third of the budget",
    )


class AnswerParams(BaseModel):
    """``answer``: a reply from memory by the Reader (needs an LLM)."""

    question: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="the question to answer from memory"
    )
    question_date: UtcDatetime | None = Field(default=None, description=QUESTION_DATE_HELP)
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


class FactsParams(BaseModel):
    """``facts``: extracted facts, the current ones or those true at a moment."""

    as_of: UtcDatetime | None = Field(
        default=None,
        description="ISO-8601: the facts true at that moment (valid time); omitted = the current ones",
    )
    include_superseded: bool = Field(
        default=False, description="also list facts later replaced, with what replaced them"
    )
    limit: int = Field(default=100, ge=1, le=MAX_FACTS, description="most facts to return")
    offset: int = Field(default=0, ge=0, description="facts to skip, for paging")


class ProfileParams(BaseModel):
    """``profile``: what memory holds about the user, grouped by kind and dated, for a system prompt."""

    as_of: UtcDatetime | None = Field(
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


FactKindName = Literal["preference", "attribute", "plan", "event", "relationship", "opinion", "other"]
"""``models.FactKind``'s values as a ``Literal``, so every surface shows them as choices (a test keeps both equal)."""
MAX_FACT_CHARS = 2000
MAX_FACT_ENTITIES = 32


class AddFactParams(BaseModel):
    """``add_fact``: store a fact the application already knows, versioned like an extracted one."""

    text: str = Field(
        min_length=1,
        max_length=MAX_FACT_CHARS,
        description="the fact, one self-contained sentence about the user ('The user works at Globex.')",
    )
    kind: FactKindName = Field(
        default="other",
        description="attribute (identity, job, home...), preference, opinion, relationship, plan, event, other",
    )
    entities: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None,
        max_length=MAX_FACT_ENTITIES,
        description="names of the people, places, things it is about (never the user); matched to stored ones",
    )
    valid_from: UtcDatetime | None = Field(
        default=None, description="ISO-8601: since when it is true; omitted = when it is recorded"
    )
    source: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="a session of this user it comes from (its date is when it was said) or a label such as "
        "'crm' (said now); omitted = 'app'",
    )


MAX_ERASE_IDS = 1000


class EraseParams(BaseModel):
    """``erase``: forget part of a user's memory (``forget`` erases all of it). Everything derived from what goes
    (rounds, extracted facts and events, orphaned entities, index entries) goes with it; run with dry_run first."""

    session_ids: list[Annotated[str, Field(min_length=1, max_length=128)]] | None = Field(
        default=None, max_length=MAX_ERASE_IDS, description="sessions to erase, with their messages"
    )
    fact_ids: list[Annotated[str, Field(min_length=1, max_length=128)]] | None = Field(
        default=None, max_length=MAX_ERASE_IDS, description="facts to erase (what was said stays)"
    )
    before: UtcDatetime | None = Field(
        default=None, description="ISO-8601: erase every session that started before this moment"
    )
    matching: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="erase every round, fact and event whose text holds all of these words",
    )
    dry_run: bool = Field(default=False, description="only list what would be erased")

    def erase_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``Memory.erase`` (absent lists as empty ones), for every surface alike."""
        return {
            "session_ids": self.session_ids or [],
            "fact_ids": self.fact_ids or [],
            "before": self.before,
            "matching": self.matching,
            "dry_run": self.dry_run,
        }


class ConsolidateParams(BaseModel):
    """``consolidate``: merge duplicate current facts (the rest are superseded, never deleted), link events to the
    entities they name, and optionally summarize old periods; with an LLM one call per cluster or period."""

    dry_run: bool = Field(default=False, description="only plan: list what would change, write nothing")
    summaries: bool = Field(
        default=False,
        description="also write one dated summary fact per old window of sessions (needs an LLM)",
    )


SPECS: dict[str, type[BaseModel]] = {
    "search": SearchParams,
    "context": ContextParams,
    "answer": AnswerParams,
    "facts": FactsParams,
    "profile": ProfileParams,
    "add_fact": AddFactParams,
    "erase": EraseParams,
    "consolidate": ConsolidateParams,
}

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


def add_arguments(
    parser: argparse.ArgumentParser, spec: type[BaseModel], aliases: dict[str, list[str]] | None = None
) -> None:
    """Add one argparse option per field of ``spec``: required strings become positionals, booleans flags,
    literals choices, lists repeatable options; the rest are ``--dashed-name`` options whose text is checked by ``from_cli`` against the spec
    (so the CLI enforces the same bounds, and a bad value names the flag)."""
    aliases = aliases or {}
    for name, field in spec.model_fields.items():
        kind = plain_type(field.annotation)
        text = field.description or ""
        if field.is_required():
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
            parser.add_argument(
                *names, dest=name, action="append", default=None, metavar="VALUE", help=f"{text} (repeatable)"
            )
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


def from_cli(spec: type[BaseModel], args: argparse.Namespace) -> Any:
    """The spec model from parsed CLI arguments; a bad value raises ``InvalidInput`` naming the flag (or the
    positional) and what is wrong."""
    values = {name: getattr(args, name) for name in spec.model_fields}
    try:
        return spec.model_validate(values)
    except ValidationError as e:
        first = e.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else ""
        field = spec.model_fields.get(name)
        where = name if field is not None and field.is_required() else flag(name)
        raise InvalidInput(f"{first['msg']} (got {values.get(name)!r})", where=where) from None
