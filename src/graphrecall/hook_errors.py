"""The errors agent hooks swallowed (``graphrecall hook``: a hook never fails its agent), one JSON line each in
``<root>/.hooks/errors.jsonl``, kept to the last ``MAX_ERRORS``. Written by the hooks (``hooks.state``), read by
``graphrecall hook errors`` and by ``report``, which counts a scope's own.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STATE_DIR = ".hooks"
ERRORS_FILE = "errors.jsonl"
MAX_ERRORS = 1000


def _path(root: Path) -> Path:
    return root / STATE_DIR / ERRORS_FILE


def record_error(root: Path, event: str, code: str, message: str, scope: str | None = None) -> None:
    """Append one error line (never raises: the hook is already failing). ``scope``: the scope the hook was
    working on (``org/user``), when it got that far."""
    with contextlib.suppress(OSError):
        path = _path(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = {"at": datetime.now(UTC).isoformat(), "event": event, "code": code, "message": message}
        if scope is not None:
            line["scope"] = scope
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
        if path.stat().st_size > MAX_ERRORS * 400:  # keep the file small: the last MAX_ERRORS lines
            lines = path.read_text(encoding="utf-8").splitlines()[-MAX_ERRORS:]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_errors(root: Path) -> list[dict[str, Any]]:
    try:
        text = _path(root).read_text(encoding="utf-8")
    except OSError:
        return []
    out = []
    for raw in text.splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(raw)
            if isinstance(item, dict):
                out.append(item)
    return out


def error_counts(root: Path) -> dict[str, Any]:
    """How many errors the hooks recorded, in all, by event, by code and by scope (those that got as far as
    knowing theirs), and the last one."""
    errors = read_errors(root)
    return {
        "errors": len(errors),
        "by_event": dict(Counter(str(e.get("event")) for e in errors)),
        "by_code": dict(Counter(str(e.get("code")) for e in errors)),
        "by_scope": dict(Counter(str(e["scope"]) for e in errors if isinstance(e.get("scope"), str))),
        "last": errors[-1] if errors else None,
    }
