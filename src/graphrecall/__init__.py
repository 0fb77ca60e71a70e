"""graphrecall: long-term memory for chat assistants.

An embedded Kuzu graph per user, raw history plus extracted facts/events/entities, hybrid retrieval, and readers
that answer from memory. The public surface is re-exported here.
"""

from graphrecall.aio import AsyncMemory
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.errors import (
    EmbedderMismatch,
    GraphRecallError,
    InvalidInput,
    NotAvailable,
    NotFound,
    SchemaMismatch,
    StoreBusy,
)
from graphrecall.memory import Memory
from graphrecall.models import (
    Context,
    Entity,
    Event,
    ExtractionResult,
    Fact,
    FactKind,
    Hit,
    IngestResult,
    Message,
    Profile,
    ProfileItem,
    Role,
    Round,
    Scope,
    ScopeStats,
    Session,
    SessionInput,
    TimeRange,
)
from graphrecall.read.models import Answer, Citation, ToolTrace

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "AsyncMemory",
    "Citation",
    "Context",
    "EmbedderMismatch",
    "Entity",
    "Event",
    "ExtractionResult",
    "Fact",
    "FactKind",
    "GraphRecallError",
    "Hit",
    "IngestResult",
    "InvalidInput",
    "Memory",
    "Message",
    "NotAvailable",
    "NotFound",
    "Profile",
    "ProfileItem",
    "RetrievalConfig",
    "Role",
    "Round",
    "SchemaMismatch",
    "Scope",
    "ScopeStats",
    "Session",
    "SessionInput",
    "Settings",
    "StoreBusy",
    "TimeRange",
    "ToolTrace",
    "__version__",
]
