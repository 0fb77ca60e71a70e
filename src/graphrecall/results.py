"""What operations return across a wire (HTTP, MCP, the CLI's ``--json``), where that is not a domain model itself.

A list goes out inside an object (a top-level JSON object can grow fields; a bare array cannot), and every surface
sends the same object: the CLI's ``search --json`` prints exactly what ``GET .../search`` returns. Which operation
returns which envelope is declared once, in ``graphrecall.operations``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from graphrecall.models import Entity, Event, Fact, Hit, Session
from graphrecall.params import SESSIONS_FORMAT


class SearchResponse(BaseModel):
    """Ranked evidence for a query, best first."""

    query: str
    hits: list[Hit]


class FactsResponse(BaseModel):
    """Extracted facts, oldest first."""

    facts: list[Fact]


class FactHistoryResponse(BaseModel):
    fact_id: str
    versions: list[Fact] = Field(description="oldest first; the last one is the current version")


class EntitiesResponse(BaseModel):
    entities: list[Entity]


class EventsResponse(BaseModel):
    events: list[Event]


class ForgetResponse(BaseModel):
    erased: bool = Field(description="whether anything was stored for the user (false: nothing to erase)")


class SessionsResponse(BaseModel):
    sessions: list[Session]


class ExportDocument(BaseModel):
    """A user's raw history: what ``export_sessions`` writes on every surface and ``import_sessions`` (and the CLI's
    ``ingest``) reads back."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["graphrecall.sessions/v1"] = SESSIONS_FORMAT
    org_id: str | None = Field(default=None, description="where it was exported from (ignored on import)")
    user_id: str | None = Field(default=None, description="where it was exported from (ignored on import)")
    sessions: list[Session]


class RetryResponse(BaseModel):
    requeued: int = Field(description="failed background extractions queued again")
