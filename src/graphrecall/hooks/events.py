"""What each hook does, over a ``Backend``: a ``Memory`` in this process or a server (``remote.client``), reached
through the same operations of the table, so a hook does the same whichever runs it.

- ``session_start``: the user's profile, the project's, and the project's latest sessions (the current one left
  out), within a budget. Nothing here embeds: it never loads the model.
- ``prompt``: the hits for the prompt, in the user's memory and the project's together (``also``), whose similarity
  reaches the measured threshold (``hooks.relevance``), within a small budget; nothing at all when none does, or
  when neither scope holds anything (then not even the model loads).
- ``ingest`` (stop, session-end, pre-compact): the transcript's lines not stored yet (``hooks.transcript`` from the
  session's cursor, ``hooks.state``), appended to the session with ``add_messages`` (idempotent by message id);
  the cursor moves once the store acknowledged them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from graphrecall import operations as ops
from graphrecall.errors import InvalidInput, NotFound
from graphrecall.hooks import render, state
from graphrecall.hooks.payload import HookInput
from graphrecall.hooks.project import HookScopes
from graphrecall.hooks.relevance import relevant, threshold_for
from graphrecall.hooks.transcript import read_from
from graphrecall.models import IngestResult, Scope, ScopeStats, Session, validate_identifier
from graphrecall.params import (
    MAX_QUERY_CHARS,
    AddMessagesParams,
    GetSessionParams,
    NoParams,
    Params,
    ProfileParams,
    SearchParams,
    SessionsParams,
    validate,
)

RECENT_SESSIONS = 3
PROMPT_HITS = 5
MESSAGES_PER_CALL = 500


class Backend(Protocol):
    def call(self, op: ops.Operation[Any], scope: Scope, p: Params) -> Any: ...


@dataclass(frozen=True)
class Budgets:
    session_start: int = 1500
    prompt: int = 400


def _stats(backend: Backend, scope: Scope) -> ScopeStats:
    """A scope's counts; a scope that holds nothing counts zero (a server answers 404 for it)."""
    try:
        found: ScopeStats = backend.call(ops.STATS, scope, NoParams())
    except NotFound:
        return ScopeStats(scope=scope, sessions=0, messages=0, rounds=0)
    return found


def _profile_text(backend: Backend, scope: Scope, budget: int) -> str:
    if _stats(backend, scope).facts == 0:
        return ""
    return str(backend.call(ops.PROFILE, scope, ProfileParams(token_budget=max(1, budget))).text)


def session_id_of(payload: HookInput) -> str:
    """The agent's session id as a session id of the store (hashed when the agent's would not be one)."""
    raw = (payload.session_id or "").strip()
    if not raw:
        raise InvalidInput("the hook input has no session_id", where="session_id")
    try:
        return validate_identifier(raw, "session_id")
    except ValueError:
        return "s-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def session_start(backend: Backend, scopes: HookScopes, payload: HookInput, budget: int) -> str:
    current = session_id_of(payload) if payload.session_id else None
    profile = _profile_text(backend, scopes.user, budget // 3)
    project_profile = _profile_text(backend, scopes.project, budget // 4) if scopes.project else ""
    held = _stats(backend, scopes.memory).sessions
    sessions: list[Session] = []
    if held:
        listed: list[Session] = backend.call(
            ops.SESSIONS,
            scopes.memory,
            SessionsParams(offset=max(0, held - RECENT_SESSIONS - 1), limit=RECENT_SESSIONS + 1),
        )
        for s in reversed(listed):
            if s.id != current and len(sessions) < RECENT_SESSIONS:
                sessions.append(
                    backend.call(ops.GET_SESSION, scopes.memory, GetSessionParams(session_id=s.id))
                )
    return render.session_start(
        profile=profile,
        project=scopes.project_name,
        project_profile=project_profile,
        sessions=sessions,
        budget=budget,
    )


def prompt(backend: Backend, scopes: HookScopes, payload: HookInput, budget: int) -> str:
    text = (payload.prompt or "").strip()
    if not text:
        return ""
    held = [s for s in (_stats(backend, scope) for scope in scopes.reads) if s.rounds]
    if not held:  # nothing to search: not even the model is loaded
        return ""
    threshold = threshold_for(held[0].embedder_id)
    p = SearchParams(query=text[:MAX_QUERY_CHARS], k=PROMPT_HITS, also=scopes.also)
    found = backend.call(ops.SEARCH, scopes.user, p)
    hits = [h for h in found if relevant(h.signals, threshold)]
    where = f"project {scopes.project_name}" if scopes.project_name else str(scopes.memory)
    return render.prompt(hits, where=where, budget=budget)


def ingest(backend: Backend, scopes: HookScopes, payload: HookInput, root: Path) -> IngestResult:
    """Store the transcript's new lines; the result counts what was added and skipped."""
    session_id = session_id_of(payload)
    if not payload.transcript_path:
        raise InvalidInput("the hook input has no transcript_path", where="transcript_path")
    transcript = Path(payload.transcript_path).expanduser()
    if not transcript.is_file():
        raise InvalidInput(f"no transcript file at {transcript}", where="transcript_path")
    key = payload.session_id or session_id
    cursor = state.load_cursor(root, key, transcript)
    read = read_from(transcript, cursor.offset, cursor.tools)
    total = IngestResult()
    for chunk in _chunks(read.messages):
        p = validate(
            AddMessagesParams, {"messages": chunk, "session_id": session_id, "date": chunk[0].get("at")}
        )
        total = total + backend.call(ops.ADD_MESSAGES, scopes.memory, p)
    cursor.offset, cursor.tools = read.offset, read.tools
    cursor.messages += len(read.messages)
    state.save_cursor(root, key, cursor)
    return total


def _chunks(messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [list(messages[i : i + MESSAGES_PER_CALL]) for i in range(0, len(messages), MESSAGES_PER_CALL)]
