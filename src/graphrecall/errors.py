"""Exceptions. Each names what was wrong, so a caller (or an HTTP client) can act on it."""

from __future__ import annotations

import shlex
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
    ``stored_dim`` name the one that wrote it (``graphrecall reembed`` reads them), ``wanted_id``/``wanted_dim``
    the one it was opened with, ``command`` the ``graphrecall reembed`` command that moves it to the latter."""

    code = "embedder_mismatch"

    def __init__(
        self,
        message: str,
        *,
        stored_id: str | None = None,
        stored_dim: int | None = None,
        wanted_id: str | None = None,
        wanted_dim: int | None = None,
        command: str | None = None,
        public: str | None = None,
    ) -> None:
        super().__init__(message)
        self.stored_id = stored_id
        self.stored_dim = stored_dim
        self.wanted_id = wanted_id
        self.wanted_dim = wanted_dim
        self.command = command
        self.public = public or message
        """The message without server paths (what the HTTP API tells a client)."""

    @classmethod
    def of_store(
        cls,
        what: str,
        path: Path,
        *,
        stored: tuple[str | None, int | None],
        wanted: tuple[str, int],
        specs: tuple[str | None, str | None] = (None, None),
    ) -> EmbedderMismatch:
        """The refusal of the scope stored at ``path`` (``<root>/<org>/<user>.kuzu`` or its write log), naming both
        embedders and the command that moves it; ``specs``: the ``--embedder`` specs of the stored and the wanted
        embedder where known (``embed.spec.spec_of``), else the command says ``SPEC``."""
        user = path.name.removesuffix(".kuzu").removesuffix(".log.sqlite")
        org, root = path.parent.name, path.parent.parent
        stored_spec, wanted_spec = specs
        both = (
            f"was written with embedder {stored[0]!r} (dim {stored[1]}); this Memory uses {wanted[0]!r} "
            f"(dim {wanted[1]})"
        )
        spec = wanted_spec or "SPEC"
        command = reembed_command(spec, org, user, root)
        unknown = (
            "" if wanted_spec else " (SPEC: the spec this Memory's embedder was chosen by, e.g. e5-small)"
        )
        back = f" (--embedder {stored_spec})" if stored_spec else ""
        message = (
            f"{what} {path} {both}. Move it to this embedder with: {command}{unknown}; or open it with the "
            f"embedder that wrote it{back}."
        )
        public = f"scope {org}/{user} {both}. The operator moves it with: {reembed_command(spec, org, user)}{unknown}."
        return cls(
            message,
            stored_id=stored[0],
            stored_dim=stored[1],
            wanted_id=wanted[0],
            wanted_dim=wanted[1],
            command=command,
            public=public,
        )


def reembed_command(spec: str, org: str, user: str, root: Path | None = None) -> str:
    """The ``graphrecall reembed`` command that moves one scope to the embedder ``spec`` names."""
    where = f" --root {shlex.quote(str(root))}" if root is not None else ""
    return f"graphrecall reembed --embedder {shlex.quote(spec)}{where} --org {org} --user {user}"


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
