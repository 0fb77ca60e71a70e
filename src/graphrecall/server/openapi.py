"""The OpenAPI description of the HTTP API, as committed in docs/openapi.json.

Regenerate after changing a route or a model: ``.venv/bin/python -m graphrecall.server.openapi docs/openapi.json``
(a test fails while the committed file and the app disagree).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from graphrecall.memory import Memory
from graphrecall.server.http import create_app


class _NoMemory:
    """Building the app never touches the Memory; the schema does not depend on which features it has."""

    root = Path(".")


def openapi_schema() -> dict[str, Any]:
    app = create_app(cast(Memory, _NoMemory()), auth=None, insecure_local=True)
    return cast(dict[str, Any], json.loads(json.dumps(app.openapi())))


def render() -> str:
    return json.dumps(openapi_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        Path(args[0]).write_text(render(), encoding="utf-8")
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
