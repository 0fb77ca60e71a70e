"""graphrecall: long-term memory for chat assistants.

An embedded Kuzu graph per user, raw history plus extracted facts/events/entities, hybrid retrieval, and readers
that answer from memory. The public surface is re-exported here.

The re-exports are resolved on first use (a module ``__getattr__``), not at import: ``Memory`` pulls in Kuzu,
PyArrow and NumPy (about half a second), and ``import graphrecall`` runs first in every command line start, in
``python -m graphrecall.server.auth`` and in any program that only wants ``__version__``. Type checkers see plain
imports (the ``TYPE_CHECKING`` block), so the typed surface is the same as with eager imports, and a misspelled
name is still an error for them. ``tests/integration/test_import_weight.py`` keeps the package root light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

# name -> the module that defines it; the single list the lazy lookup and __all__ are built from.
_EXPORTS: dict[str, str] = {
    "AsyncMemory": "graphrecall.aio",
    "RetrievalConfig": "graphrecall.config",
    "Settings": "graphrecall.config",
    "EmbedderMismatch": "graphrecall.errors",
    "GraphRecallError": "graphrecall.errors",
    "InvalidInput": "graphrecall.errors",
    "NotAvailable": "graphrecall.errors",
    "NotFound": "graphrecall.errors",
    "SchemaMismatch": "graphrecall.errors",
    "StoreBusy": "graphrecall.errors",
    "Memory": "graphrecall.memory",
    "Context": "graphrecall.models",
    "Entity": "graphrecall.models",
    "Erasure": "graphrecall.models",
    "Event": "graphrecall.models",
    "ExtractionResult": "graphrecall.models",
    "Fact": "graphrecall.models",
    "FactKind": "graphrecall.models",
    "Hit": "graphrecall.models",
    "IngestResult": "graphrecall.models",
    "Message": "graphrecall.models",
    "Profile": "graphrecall.models",
    "ProfileItem": "graphrecall.models",
    "Role": "graphrecall.models",
    "Round": "graphrecall.models",
    "Scope": "graphrecall.models",
    "ScopeStats": "graphrecall.models",
    "Session": "graphrecall.models",
    "SessionInput": "graphrecall.models",
    "TimeRange": "graphrecall.models",
    "Answer": "graphrecall.read.models",
    "Citation": "graphrecall.read.models",
    "ToolTrace": "graphrecall.read.models",
}

if TYPE_CHECKING:
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
        Erasure,
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
else:

    def __getattr__(name: str) -> object:
        """Import a re-exported name's module on first access and keep the value, so later lookups are plain
        attribute reads. Hidden from type checkers: for them a module ``__getattr__`` would make every
        misspelled ``graphrecall.X`` a valid name."""
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'graphrecall' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_EXPORTS})


__all__ = [
    "Answer",
    "AsyncMemory",
    "Citation",
    "Context",
    "EmbedderMismatch",
    "Entity",
    "Erasure",
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
