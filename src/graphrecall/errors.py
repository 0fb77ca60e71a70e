"""Exceptions. Each names what was wrong, so a caller (or an HTTP client) can act on it."""

from __future__ import annotations

from pathlib import Path


class GraphRecallError(Exception):
    """Base class: every error this library raises on purpose."""

    code = "error"


class InvalidInput(GraphRecallError, ValueError):
    """Input was rejected before anything was written. ``where`` locates it (file, item, field)."""

    code = "invalid_input"

    def __init__(self, message: str, *, where: str = "") -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class EmbedderMismatch(GraphRecallError):
    """The database was built with another embedder; its vectors are not comparable with ours. ``stored_id`` and
    ``stored_dim`` name the one that wrote it (``graphrecall reembed`` reads them)."""

    code = "embedder_mismatch"

    def __init__(self, message: str, *, stored_id: str | None = None, stored_dim: int | None = None) -> None:
        super().__init__(message)
        self.stored_id = stored_id
        self.stored_dim = stored_dim


def reembed_hint(path: Path) -> str:
    """The command that moves the scope stored at ``path`` (``<root>/<org>/<user>.kuzu`` or its write log) to
    another embedder."""
    user = path.name.removesuffix(".kuzu").removesuffix(".log.sqlite")
    return (
        f"To move it to this Memory's embedder: graphrecall reembed --embedder SPEC --root {path.parent.parent} "
        f"--org {path.parent.name} --user {user} (SPEC: the embedder this Memory was opened with, e.g. e5-small); "
        "or open it with the embedder that wrote it."
    )


class SchemaMismatch(GraphRecallError):
    code = "schema_mismatch"


class NotFound(GraphRecallError, KeyError):
    code = "not_found"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class StoreBusy(GraphRecallError):
    """The scope's database is held elsewhere: by another process (Kuzu allows one read-write process per file),
    or, for an erase, by requests of this process that did not finish in time."""

    code = "store_busy"


class StorageFull(GraphRecallError):
    """A write found no room: the file system is full, or a file reached the largest size allowed (the process's
    file-size limit, ``ulimit -f``). Nothing of that write was acknowledged; what was acknowledged before is safe.
    The message says which it was and where; free space (or raise the limit) and retry."""

    code = "storage_full"


class NotAvailable(GraphRecallError):
    """A feature needs a component that is not configured (an LLM, a reranker model)."""

    code = "not_available"


class ConfigurationError(GraphRecallError, ValueError):
    """A setting cannot be used as given (a malformed ``--llm`` spec, an unknown provider, a missing API key).
    ``where`` names the setting (``--llm``, ``GRAPHRECALL_LLM``, ``OPENAI_API_KEY``) so the person knows what to fix."""

    code = "invalid_config"

    def __init__(self, message: str, *, where: str = "") -> None:
        self.where = where
        super().__init__(message)


class Unreachable(GraphRecallError):
    """A configured service (an LLM provider) did not accept a connection; the message names the URL tried."""

    code = "unreachable"


class RerankFailed(GraphRecallError):
    """A rerank server answered wrongly (a missing or out-of-range index, a malformed body) or kept failing after
    its retries; the message names the server. The search fails rather than quietly ranking without it."""

    code = "rerank_failed"


class EmbeddingFailed(GraphRecallError):
    """An embeddings server answered wrongly (another dimension, a missing vector, a malformed body) or kept failing
    after its retries. Nothing of the write that needed the vectors was stored; the message names the server."""

    code = "embedding_failed"
