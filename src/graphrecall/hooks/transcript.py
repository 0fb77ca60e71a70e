"""A Claude Code transcript (JSONL, one event per line) read from where the last read stopped, as chat messages.

Lines that become messages (each message's id is the line's ``uuid``, or a hash of the line where it has none,
with ``-N`` for its N-th block after the first, so the same line always gives the same ids: sending it twice stores
it once):

- a ``user`` line whose content is text: the user's prompt (``user``);
- an ``assistant`` line's ``text`` blocks: the reply (``assistant``);
- an ``assistant`` line's ``tool_use`` blocks: one short line saying which tool ran on what, ``[Bash] git status``
  (``tool``): the argument that says the most (a command, a file path, a pattern, a URL, a query, a
  description), cut to ``CALL_CHARS``;
- a ``user`` line's ``tool_result`` blocks: the tool's output, cut to its first ``OUTPUT_CHARS`` characters
  (``tool``), for the tools whose output says something the repository does not (a command's output, a web page,
  a sub-agent's answer, an MCP tool's) and for every failed call; the output of tools that read or edit files
  (``Read``, ``Edit``, ``MultiEdit``, ``Write``, ``NotebookEdit``, ``Glob``, ``Grep``, ``LS``, ``TodoWrite``) is
  skipped: the repository holds it, and it is most of a transcript's bytes.

Skipped: ``thinking`` blocks, images, lines of other types (``summary``, ``system``, ``file-history-snapshot``...),
side-chain lines (a sub-agent's own conversation), meta lines (``isMeta``: notices the agent adds), the summary a
compaction writes (``isCompactSummary``: a restatement of turns already stored), and the echo of slash commands
(text made only of ``<command-...>`` / ``<local-command-...>`` tags). Every kept text goes through
``hooks.redact`` before it is cut (a key cut in half would no longer match its pattern).

Only complete lines are read: a line still being written (no newline yet) is left for the next read, and
``Read.offset`` is where that read starts.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrecall.hooks.redact import redact

CALL_CHARS = 200
OUTPUT_CHARS = 300
SILENT_TOOLS = frozenset(
    {"Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "NotebookRead", "Glob", "Grep", "LS", "TodoWrite"}
)
KEY_ARGUMENTS = (
    "command",
    "file_path",
    "notebook_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
)
_TAGS_ONLY = re.compile(r"^(?:\s*<(local-command-\w+|command-\w+)>.*?</\1>)+\s*$", re.S)


@dataclass
class Read:
    """What one read of a transcript gave: the messages, where the next read starts, and the names of the tools
    called whose output has not been read yet (carried to the next read, which may hold the output)."""

    messages: list[dict[str, Any]]
    offset: int
    tools: dict[str, str] = field(default_factory=dict)


def read_from(path: Path, offset: int = 0, tools: Mapping[str, str] | None = None) -> Read:
    """The messages of the complete lines of ``path`` from byte ``offset`` on."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        if offset > size:  # the file was replaced by a shorter one: read it again from the start
            offset = 0
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1  # after the last complete line
    pending = dict(tools or {})
    messages: list[dict[str, Any]] = []
    for raw in data[:end].splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a line that is not JSON is not the agent's: nothing to remember
        if isinstance(line, dict):
            messages.extend(_messages(line, pending))
    return Read(messages, offset + end, pending)


def _messages(line: dict[str, Any], tools: dict[str, str]) -> Iterator[dict[str, Any]]:
    kind = line.get("type")
    message = line.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return
    uuid = line.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        # Claude Code writes a ``uuid`` on every conversation line; a transcript from another agent or an older
        # version may not. The line's content then names it, so a line read twice still gives the same ids.
        uuid = "line-" + hashlib.sha256(json.dumps(line, sort_keys=True).encode()).hexdigest()[:32]
    if line.get("isSidechain") or line.get("isMeta") or line.get("isCompactSummary"):
        return
    at = line.get("timestamp") if isinstance(line.get("timestamp"), str) else None
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return
    n = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        role_text = _block(kind, block, tools)
        if role_text is None:
            continue
        role, text = role_text
        if not text.strip():
            continue
        yield {
            "id": uuid if n == 0 else f"{uuid}-{n}",
            "role": role,
            "content": text,
            **({"at": at} if at else {}),
        }
        n += 1


def _block(kind: str, block: dict[str, Any], tools: dict[str, str]) -> tuple[str, str] | None:
    """(role, text) of one content block, or ``None`` for what is skipped (module docstring)."""
    btype = block.get("type")
    if btype == "text" and isinstance(block.get("text"), str):
        text: str = block["text"]
        if kind == "user" and _TAGS_ONLY.match(text):
            return None
        return ("user" if kind == "user" else "assistant"), redact(text)
    if btype == "tool_use" and kind == "assistant":
        name = str(block.get("name") or "tool")
        if isinstance(block.get("id"), str):
            tools[block["id"]] = name
        return "tool", f"[{name}] {_cut(redact(_argument(block.get('input'))), CALL_CHARS)}".rstrip()
    if btype == "tool_result" and kind == "user":
        name = tools.pop(str(block.get("tool_use_id")), "tool")
        failed = bool(block.get("is_error"))
        if name in SILENT_TOOLS and not failed:
            return None
        output = _cut(redact(_output(block.get("content"))), OUTPUT_CHARS)  # redacted whole, then cut
        return ("tool", f"[{name} {'error' if failed else 'output'}] {output}") if output else None
    return None


def _argument(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return ""
    for key in KEY_ARGUMENTS:
        if isinstance(arguments.get(key), str) and arguments[key].strip():
            return str(arguments[key])
    first = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), "")
    return str(first)


def _output(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
