"""What the hooks keep between calls, under ``<root>/.hooks/`` (beside the store they feed, whether they reach it
in process or through a server): where each transcript was last read, and the errors the hooks swallowed.

Cursors (``cursors/<session>.json``): the byte offset up to which a transcript was stored, and the tool calls whose
output was not read yet. A cursor is written only after the store acknowledged the messages before it, so a failed
call leaves it where it was and the next call sends the same lines again; the messages' ids make that harmless.

Errors (``errors.jsonl``): a hook never fails its agent (it exits 0), so what went wrong is one line on stderr and
one JSON line here (when, which event, the error code, the message, the scope when known), kept to the last
``MAX_ERRORS`` lines;
``error_counts`` reads them back for ``graphrecall hook errors`` (and a later ``graphrecall report``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The errors file is read per scope by ``report`` (services) and written by the hooks: it lives below both.
from graphrecall.hook_errors import (
    ERRORS_FILE,
    MAX_ERRORS,
    STATE_DIR,
    error_counts,
    read_errors,
    record_error,
)

__all__ = ["ERRORS_FILE", "MAX_ERRORS", "STATE_DIR", "error_counts", "read_errors", "record_error"]


@dataclass
class Cursor:
    transcript: str = ""
    offset: int = 0
    messages: int = 0
    tools: dict[str, str] = field(default_factory=dict)


def state_dir(root: Path) -> Path:
    return root / STATE_DIR


def _cursor_file(root: Path, session_id: str) -> Path:
    name = hashlib.sha256(session_id.encode()).hexdigest()[:32]  # any session id is a safe file name
    return state_dir(root) / "cursors" / f"{name}.json"


def load_cursor(root: Path, session_id: str, transcript: Path) -> Cursor:
    """Where ``transcript`` was last stored up to (a fresh cursor for a new session or another file)."""
    try:
        raw: Any = json.loads(_cursor_file(root, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Cursor(str(transcript))
    if not isinstance(raw, dict) or raw.get("transcript") != str(transcript):
        return Cursor(str(transcript))
    found = raw.get("tools")
    tools = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    return Cursor(str(transcript), int(raw.get("offset") or 0), int(raw.get("messages") or 0), tools)


def save_cursor(root: Path, session_id: str, cursor: Cursor) -> None:
    path = _cursor_file(root, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cursor.__dict__), encoding="utf-8")
    os.replace(tmp, path)
