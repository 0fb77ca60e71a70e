"""Claude Code transcripts for the hook tests, written line by line in the shape Claude Code writes them
(``~/.claude/projects/<project>/<session>.jsonl``): each line an event with ``type``, ``uuid``, ``parentUuid``,
``sessionId``, ``timestamp``, ``cwd`` and a ``message`` whose ``content`` is a string (a typed prompt) or a list of
blocks (``text``, ``thinking``, ``tool_use``; ``tool_result`` on the ``user`` line that carries a tool's output),
plus the lines that are not conversation (``summary``, ``system``, ``file-history-snapshot``, meta notices)."""

from __future__ import annotations

import json
import uuid as uuids
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


class Transcript:
    """Appends events to ``path`` as the agent would; ``at`` advances a minute per line."""

    def __init__(self, path: Path, session_id: str, cwd: Path, start: datetime | None = None) -> None:
        self.path, self.session_id, self.cwd = path, session_id, cwd
        self.at = start or datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
        self.parent: str | None = None
        self._tool = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def _line(self, kind: str, message: dict[str, Any] | None, **extra: Any) -> str:
        uuid = str(uuids.uuid4())
        line: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(self.cwd),
            "sessionId": self.session_id,
            "version": "1.0.80",
            "gitBranch": "main",
            "type": kind,
            "uuid": uuid,
            "timestamp": self.at.isoformat().replace("+00:00", "Z"),
            **extra,
        }
        if message is not None:
            line["message"] = message
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        self.parent = uuid
        self.at += timedelta(minutes=1)
        return uuid

    def user(self, text: str) -> str:
        return self._line("user", {"role": "user", "content": text})

    def assistant(self, *blocks: dict[str, Any]) -> str:
        message = {"id": f"msg_{uuids.uuid4().hex[:12]}", "type": "message", "role": "assistant",
                   "model": "claude-sonnet-4-5", "content": list(blocks), "stop_reason": None,
                   "usage": {"input_tokens": 10, "output_tokens": 5}}  # fmt: skip
        return self._line("assistant", message, requestId=f"req_{uuids.uuid4().hex[:8]}")

    def say(self, text: str) -> str:
        return self.assistant({"type": "text", "text": text})

    def think(self, text: str) -> str:
        return self.assistant({"type": "thinking", "thinking": text, "signature": "sig"})

    def tool(self, name: str, arguments: dict[str, Any], output: str, *, error: bool = False) -> str:
        """A tool call and, on the next line, its result."""
        self._tool += 1
        tool_id = f"toolu_{self._tool:04d}"
        self.assistant({"type": "tool_use", "id": tool_id, "name": name, "input": arguments})
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}
        return self._line("user", {"role": "user", "content": [result]}, toolUseResult={"stdout": output})

    def meta(self, text: str) -> str:
        return self._line("user", {"role": "user", "content": text}, isMeta=True)

    def noise(self) -> None:
        """Lines that are not conversation."""
        self._line("summary", None, summary="Fixing the tests", leafUuid=self.parent)
        self._line("system", None, subtype="stop_hook_summary", content="hooks ran")
        self._line("file-history-snapshot", None, snapshot={"trackedFileBackups": {}}, messageId=self.parent)

    def partial(self, text: str) -> None:
        """A line still being written: no newline at its end yet."""
        with self.path.open("a", encoding="utf-8") as f:
            f.write(
                json.dumps({"type": "user", "uuid": "partial", "message": {"role": "user", "content": text}})
            )


def hook_input(event: str, transcript: Transcript, **extra: Any) -> str:
    """The JSON Claude Code sends a hook on stdin."""
    names = {"session-start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop",
             "session-end": "SessionEnd", "pre-compact": "PreCompact"}  # fmt: skip
    payload = {
        "session_id": transcript.session_id,
        "transcript_path": str(transcript.path),
        "cwd": str(transcript.cwd),
        "hook_event_name": names[event],
        **extra,
    }
    return json.dumps(payload)
