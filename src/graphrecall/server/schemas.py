"""Request and response bodies of the HTTP API that are not domain models themselves.

Domain objects (``Message``, ``Hit``, ``Context``, ``Session``, ``IngestResult``, ``ScopeStats``) come straight from
``graphrecall.models``, so the HTTP schema cannot drift from the library's. These wrappers only add what HTTP
needs: a request envelope, list wrappers (a top-level JSON object can grow fields; a bare array cannot), and the
error envelope.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from graphrecall.models import Fact, Hit, Message, Session, validate_identifier
from graphrecall.params import AddFactParams, AnswerParams, ConsolidateParams, EraseParams


def _identifier(value: str, info: ValidationInfo) -> str:
    return validate_identifier(value, info.field_name or "id")


EXPORT_FORMAT: Literal["graphrecall.sessions/v1"] = "graphrecall.sessions/v1"


class AddSessionRequest(BaseModel):
    """One whole conversation. Re-sending the same session id and message ids changes nothing (idempotent)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(min_length=1, max_length=128, examples=["conv-42"])
    date: datetime | None = Field(
        default=None, description="when the session happened (ISO-8601, naive = UTC); default: now"
    )
    messages: list[Message] = Field(min_length=1)
    extract: bool = Field(
        default=False,
        description="also extract facts/events with the server's LLM: the session is stored and queued, and the "
        "answer is 202 with extraction_job (its status: pending, running, done, failed with the reason); 501 "
        "not_available when the server has no LLM",
    )

    _ids = field_validator("session_id")(_identifier)


class AddMessagesRequest(BaseModel):
    """Turns appended to a session (created if new). Messages without ids are numbered after the stored ones."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(default="default", min_length=1, max_length=128)
    date: datetime | None = None
    messages: list[Message] = Field(min_length=1)

    _ids = field_validator("session_id")(_identifier)


class AnswerRequest(AnswerParams):
    """The body of ``POST .../answer``: the fields of ``graphrecall.params.AnswerParams``, and nothing else."""

    model_config = ConfigDict(extra="forbid")


class EraseRequest(EraseParams):
    """The body of ``POST .../erase``: the fields of ``graphrecall.params.EraseParams``, and nothing else."""

    model_config = ConfigDict(extra="forbid")


class ConsolidateRequest(ConsolidateParams):
    """The body of ``POST .../consolidate``: the fields of ``graphrecall.params.ConsolidateParams``, and nothing
    else. The LLM is the server's (``GRAPHRECALL_LLM``): without one, only the same or near-identical facts merge
    and ``summaries`` is refused (501)."""

    model_config = ConfigDict(extra="forbid")


class AddFactRequest(AddFactParams):
    """The body of ``POST .../facts``: the fields of ``graphrecall.params.AddFactParams``, and nothing else."""

    model_config = ConfigDict(extra="forbid")


class SupersedeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    new_id: str = Field(
        min_length=1, max_length=128, description="the fact that replaces the one in the path"
    )

    _ids = field_validator("new_id")(_identifier)


class SearchResponse(BaseModel):
    query: str
    hits: list[Hit]


class FactsResponse(BaseModel):
    facts: list[Fact]


class FactHistoryResponse(BaseModel):
    fact_id: str
    versions: list[Fact] = Field(description="oldest first; the last one is the current version")


class ForgetResponse(BaseModel):
    erased: bool = Field(description="whether anything was stored for the user (false: nothing to erase)")


class SessionsResponse(BaseModel):
    sessions: list[Session]


class ExportDocument(BaseModel):
    """A user's raw history: the format ``GET .../export`` writes and ``POST .../import`` reads."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["graphrecall.sessions/v1"] = EXPORT_FORMAT
    org_id: str | None = Field(default=None, description="where it was exported from (ignored on import)")
    user_id: str | None = Field(default=None, description="where it was exported from (ignored on import)")
    sessions: list[Session]


class HealthResponse(BaseModel):
    status: str


class ErrorDetail(BaseModel):
    code: str = Field(
        description="stable: invalid_input, unauthorized, forbidden, not_found, method_not_allowed, "
        "payload_too_large, not_available, store_busy, internal"
    )
    message: str
    field: str | None = Field(default=None, description="the offending input, e.g. messages[0].content")


class ErrorResponse(BaseModel):
    error: ErrorDetail
