"""The text a hook hands the agent: what it remembers at a session's start, and the memory relevant to a prompt.

Plain Markdown the model reads as context, inside a token budget (~4 characters per token, the estimate of
``retrieve.context``): whole lines are kept or dropped, never cut in the middle of a sentence's last word, and the
newest or most relevant come first, so a small budget keeps what matters most. Every block says where it comes from
(graphrecall, which scope) so that the agent (and the person reading its context) can tell memory from instructions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from graphrecall.models import Hit, Message, Session

CHARS_PER_TOKEN = 4
USER_CHARS = 240
REPLY_CHARS = 360
HIT_CHARS = 600
EXCHANGES_PER_SESSION = 3
_CALL = re.compile(r"^\[[^\]\s]+\](?: |$)")  # "[Bash] git status", not "[Bash output] ..." (hooks.transcript)


def tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def day(d: datetime | None) -> str:
    return d.strftime("%Y-%m-%d %H:%M") if d else "undated"


def fit(lines: Sequence[str], budget: int) -> list[str]:
    """The leading lines of ``lines`` that fit in ``budget`` tokens."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = tokens(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return kept


def exchanges(messages: Sequence[Message]) -> list[tuple[str, str, int]]:
    """(what the user asked, what the assistant answered, tool calls in between) per exchange, in order."""
    out: list[tuple[str, str, int]] = []
    for m in messages:
        role = m.role.value
        if role == "user":
            out.append((m.content, "", 0))
        elif out and role == "assistant":
            user, reply, calls = out[-1]
            out[-1] = (user, f"{reply} {m.content}".strip(), calls)
        elif out and role == "tool" and _CALL.match(m.content):
            user, reply, calls = out[-1]
            out[-1] = (user, reply, calls + 1)
    return out


def session_lines(session: Session) -> list[str]:
    """A past session as a heading and its last exchanges, newest last."""
    lines = [f"### {day(session.started_at)} (session {session.id[:8]})"]
    for user, reply, calls in exchanges(session.messages)[-EXCHANGES_PER_SESSION:]:
        lines.append(f"- user: {cut(user, USER_CHARS)}")
        tools = f" ({calls} tool call{'s' if calls != 1 else ''})" if calls else ""
        if reply:
            lines.append(f"  assistant{tools}: {cut(reply, REPLY_CHARS)}")
    return lines


def session_start(
    *, profile: str, project: str | None, project_profile: str, sessions: Sequence[Session], budget: int
) -> str:
    """The memory a new session starts with: the user's profile, the project's, then its latest sessions."""
    head = ["# Memory from earlier sessions (graphrecall)"]
    lines: list[str] = []
    if profile.strip():
        lines += ["", "## About the user", *profile.strip().splitlines()]
    if project is not None and (project_profile.strip() or sessions):
        lines += ["", f"## Project {project}"]
        if project_profile.strip():
            lines += project_profile.strip().splitlines()
    elif sessions:
        lines += ["", "## Earlier sessions"]
    if sessions:
        lines += ["Latest sessions, newest first:"]
        for s in sessions:
            lines += session_lines(s)
    if not lines:
        return ""
    kept = fit([*head, *lines], budget)
    return "\n".join(kept).strip() + "\n" if len(kept) > len(head) + 1 else ""


def conversation_first(text: str) -> str:
    """A round's text with what was said before the tool lines: cut to a line's length, the request and the
    answer survive, and the tool calls and their output follow as far as they fit."""
    said: list[str] = []
    tools: list[str] = []
    for line in text.splitlines():
        (tools if line.startswith("tool: ") else said).append(line)
    return "\n".join(said + tools)


def prompt(hits: Sequence[Hit], *, where: str, budget: int) -> str:
    """The hits relevant to a prompt, best first, dated, each cut to ``HIT_CHARS``."""
    if not hits:
        return ""
    lines = [f"Relevant memory ({where}, graphrecall):"]
    for h in hits:
        lines.append(
            f"- {day(h.date)} (session {_short_session(h.session_id)}): {cut(conversation_first(h.text), HIT_CHARS)}"
        )
    kept = fit(lines, budget)
    return "\n".join(kept) + "\n" if len(kept) > 1 else ""


def _short_session(session_id: str | None) -> str:
    """A hit's session id as the agent can look it up: a shared scope's hit (the project's) carries it qualified
    by the scope's user id (``_project-atlas/s1``, ``recall.py``), whose first eight characters would name the
    scope, not the session."""
    return (session_id or "").rsplit("/", 1)[-1][:8]
