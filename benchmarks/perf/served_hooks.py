"""The hook commands as ``benchmarks.perf.served`` cases: ``stop`` over a Claude Code transcript that grows by one
exchange (a prompt, a tool call with its output, a reply) before each call, ``session-start`` of a new session, and
``prompt`` with a prompt about what was stored (so the search runs and finds something)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.perf.served import Case, graphrecall

TOPICS = (
    "the integration tests hang on CI when Postgres is not ready",
    "switch password hashing from bcrypt to argon2",
    "the reports endpoint is slow for large accounts",
    "shrink the Docker image",
    "the SQLite cache says database is locked",
    "rename the Customer model to Account",
    "emails to Outlook users land in spam",
    "add rate limiting to the public API",
)


def _line(kind: str, content: object, at: datetime, session: str, cwd: Path) -> str:
    return json.dumps({
        "type": kind, "uuid": str(uuid.uuid4()), "sessionId": session, "cwd": str(cwd),
        "timestamp": at.isoformat().replace("+00:00", "Z"), "message": {"role": kind, "content": content},
    })  # fmt: skip


def exchange(path: Path, i: int, session: str, cwd: Path) -> None:
    at = datetime(2024, 5, 1, 9, 0, tzinfo=UTC) + timedelta(minutes=10 * i)
    topic = TOPICS[i % len(TOPICS)]
    tool = f"toolu_{i:04d}"
    lines = [
        _line("user", f"Please look into this: {topic}.", at, session, cwd),
        _line(
            "assistant",
            [{"type": "tool_use", "id": tool, "name": "Bash", "input": {"command": "pytest -x"}}],
            at,
            session,
            cwd,
        ),
        _line(
            "user",
            [{"type": "tool_result", "tool_use_id": tool, "content": "1 failed, 41 passed"}],
            at,
            session,
            cwd,
        ),
        _line(
            "assistant",
            [{"type": "text", "text": f"Fixed: {topic}. The cause and the change are in the commit."}],
            at,
            session,
            cwd,
        ),
    ]
    with path.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def hook_cases(root: Path, work: Path, tag: str, org: str, user: str) -> list[Case]:
    repo = work / "tidewater"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    session = f"{tag}-session"
    transcript = work / f"{tag}.jsonl"
    scope = ["--org", org, "--user", user]

    def payload(event: str, **extra: str) -> str:
        return json.dumps({
            "session_id": session, "transcript_path": str(transcript), "cwd": str(repo), "hook_event_name": event,
            **extra,
        })  # fmt: skip

    return [
        Case(
            "hook stop (1 new exchange)",
            lambda i: graphrecall(root, "hook", "stop", *scope),
            stdin=lambda i: payload("Stop"),
            before=lambda i: exchange(transcript, i, session, repo),
        ),
        Case(
            "hook session-start",
            lambda i: graphrecall(root, "hook", "session-start", *scope),
            stdin=lambda i: json.dumps(
                {"session_id": f"{tag}-new-{i}", "cwd": str(repo), "source": "startup"}
            ),
        ),
        Case(
            "hook prompt",
            lambda i: graphrecall(root, "hook", "prompt", *scope),
            stdin=lambda i: payload(
                "UserPromptSubmit", prompt=f"what did we do about: {TOPICS[i % len(TOPICS)]}?"
            ),
        ),
    ]
