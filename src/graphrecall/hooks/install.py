"""``graphrecall hook install``: the Claude Code settings that run the hooks, printed or merged into a settings file.

The snippet registers one command per event (``SessionStart``, ``UserPromptSubmit``, ``Stop``, ``PreCompact``,
``SessionEnd``), each the running interpreter's ``-m graphrecall hook EVENT`` (so it works whatever the agent's
PATH) with the scope options given to ``install``. Merging (``--write FILE``) reads the file, replaces the hook
entries an earlier install wrote (a command with ``graphrecall`` and ``hook EVENT`` in it) and keeps everything
else as it was: other settings, other hooks of the same events, their order. A file that is not a JSON object is an
error naming it; nothing is written then. The new file replaces the old in one rename.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphrecall.errors import InvalidInput

EVENTS: dict[str, tuple[str, int]] = {
    "SessionStart": ("session-start", 30),
    "UserPromptSubmit": ("prompt", 30),
    "Stop": ("stop", 120),
    "PreCompact": ("pre-compact", 120),
    "SessionEnd": ("session-end", 120),
}
"""Claude Code's event -> (our event, timeout in seconds): reads are quick; a cold ingest loads the model."""


def command(event: str, options: Sequence[str]) -> str:
    return shlex.join([sys.executable, "-m", "graphrecall", "hook", event, *options])


def snippet(options: Sequence[str]) -> dict[str, Any]:
    """The settings that run every hook with ``options`` (``--root``, ``--org``...)."""
    return {
        "hooks": {
            name: [{"hooks": [{"type": "command", "command": command(event, options), "timeout": timeout}]}]
            for name, (event, timeout) in EVENTS.items()
        }
    }


def _ours(entry: Any, event: str) -> bool:
    hooks = entry.get("hooks") if isinstance(entry, dict) else None
    return isinstance(hooks, list) and any(
        isinstance(h, dict)
        and "graphrecall" in str(h.get("command", ""))
        and f" hook {event}" in str(h.get("command"))
        for h in hooks
    )


def merge(settings: dict[str, Any], options: Sequence[str]) -> dict[str, Any]:
    """``settings`` with our hooks in place of any earlier install's, everything else untouched."""
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput("'hooks' is not an object", where="hooks")
    merged = dict(hooks)
    for name, entries in snippet(options)["hooks"].items():
        event = EVENTS[name][0]
        existing = hooks.get(name, [])
        if not isinstance(existing, list):
            raise InvalidInput(f"'hooks.{name}' is not a list", where=f"hooks.{name}")
        merged[name] = [e for e in existing if not _ours(e, event)] + entries
    return {**settings, "hooks": merged}


def write(path: Path, options: Sequence[str]) -> dict[str, Any]:
    """Merge the hooks into the settings file at ``path`` (created if missing); returns what was written."""
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror or e}", where=str(path)) from None
    try:
        current: Any = json.loads(text) if text.strip() else {}
    except ValueError as e:
        raise InvalidInput(f"{path} is not valid JSON ({e}); nothing was written", where=str(path)) from None
    if not isinstance(current, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; nothing was written", where=str(path))
    try:
        updated = merge(current, options)
    except InvalidInput as e:
        raise InvalidInput(f"{path}: {e}; nothing was written", where=str(path)) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(updated, f, indent=2, ensure_ascii=False)
            f.write("\n")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return updated
