"""What a coding agent sends a hook on stdin: Claude Code's hook JSON, read into one model.

Claude Code sends every hook ``session_id``, ``transcript_path``, ``cwd`` and ``hook_event_name``, and per event a
field of its own: ``source`` (SessionStart: startup, resume, clear, compact), ``prompt`` (UserPromptSubmit),
``reason`` (SessionEnd), ``trigger`` (PreCompact). Fields this module does not know are ignored (a newer agent adds
some); a field of the wrong type, or JSON that is not an object, is an error naming it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from graphrecall.errors import InvalidInput
from graphrecall.params import first_problem


class HookInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    hook_event_name: str | None = None
    source: str | None = None
    prompt: str | None = None
    reason: str | None = None
    trigger: str | None = None


def read_payload(text: str) -> HookInput:
    """The hook's input from the text on stdin; ``InvalidInput`` naming what is wrong."""
    if not text.strip():
        raise InvalidInput("nothing on stdin: a hook reads the agent's hook JSON there", where="stdin")
    try:
        return HookInput.model_validate_json(text)
    except ValidationError as e:
        kinds = {err.get("type") for err in e.errors()}
        if kinds & {"json_invalid", "model_type", "json_type"}:
            raise InvalidInput("stdin is not a JSON object (the agent's hook input)", where="stdin") from None
        raise first_problem(e.errors()) from None
