"""The custom commands' operations on a server (``cli_remote``): ``ingest``, ``stats``, ``export`` and ``forget``.

Their bodies in ``cli.py`` read files or print several scopes; what they ask of the store is one or two operations
of the table, sent here through ``RemoteMemory`` like every other command's. What has no route (the scopes of an
organisation, a whole-scope export) is refused with the way round, not attempted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from graphrecall import operations as ops
from graphrecall.cli_common import EXIT_USAGE, CliError
from graphrecall.errors import NotFound
from graphrecall.models import IngestResult, Scope, ScopeStats, SessionInput, utcnow
from graphrecall.params import ImportedSession, ImportSessionsParams, NoParams, SessionItem, validate

if TYPE_CHECKING:
    from graphrecall.remote.client import RemoteMemory

BODY_BYTES = 1_000_000
"""Most bytes of sessions per request: half the server's default ``--max-body-bytes``, so a batch of long sessions
is split rather than refused with 413."""


def no_route(what: str, server: RemoteMemory) -> CliError:
    return CliError(
        f"{what} is not served over HTTP, and the server at {server.server.url} holds the store: stop it, or "
        "run the command with --local once it has stopped",
        EXIT_USAGE,
        error_code="not_available",
    )


def ingest(
    server: RemoteMemory,
    scope: Scope,
    sessions: Iterable[SessionInput],
    *,
    batch: int,
    done: Callable[[int], None],
) -> IngestResult:
    """Sessions added through ``import_sessions`` (idempotent like ``add_sessions``), at most ``batch`` sessions
    and about ``BODY_BYTES`` per request; ``done(n)`` after each request."""
    total = IngestResult()
    for chunk in _chunks((_session(s) for s in sessions), batch):
        p = ImportSessionsParams(sessions=chunk)
        total = total + server.call(ops.IMPORT_SESSIONS, scope, p)
        done(len(chunk))
    return total


def _session(s: SessionInput) -> ImportedSession:
    """A session of an ingest file in the export format, validated as ``add_sessions`` validates it. A session
    without a date is dated now, as a new session is in process."""
    item: SessionItem = validate(SessionItem, s.model_dump())
    return ImportedSession(id=item.session_id, started_at=item.date or utcnow(), messages=item.messages)


def _chunks(sessions: Iterator[ImportedSession], most: int) -> Iterator[list[ImportedSession]]:
    chunk: list[ImportedSession] = []
    size = 0
    for s in sessions:
        n = len(s.model_dump_json())
        if chunk and (len(chunk) >= most or size + n > BODY_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(s)
        size += n
    if chunk:
        yield chunk


def stats(server: RemoteMemory, scope: Scope) -> ScopeStats:
    result: ScopeStats = server.call(ops.STATS, scope, NoParams())
    return result


def export_sessions(server: RemoteMemory, scope: Scope) -> tuple[str, int]:
    """The export document (as ``export --format sessions`` writes it) and how many sessions it holds."""
    wire: Any = server.wire(ops.EXPORT_SESSIONS, scope, NoParams())
    return wire.model_dump_json(indent=1) + "\n", len(wire.sessions)


def forget(server: RemoteMemory, scope: Scope) -> tuple[bool, ScopeStats | None]:
    """Erase the scope; what it held before (``None``: nothing)."""
    try:
        before: ScopeStats | None = stats(server, scope)
    except NotFound:
        before = None
    erased: bool = server.call(ops.FORGET, scope, NoParams())
    return erased, before
