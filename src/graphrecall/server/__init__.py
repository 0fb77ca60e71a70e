"""Servers that expose a Memory to other processes: the HTTP API and the MCP server.

``create_app`` and ``run_server`` are imported lazily so that ``import graphrecall.server.mcp`` does not pull in
FastAPI and uvicorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphrecall.server.limits import DEFAULT_MAX_BODY_BYTES

if TYPE_CHECKING:
    from graphrecall.server.http import create_app
    from graphrecall.server.serve import run_server

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app", "run_server"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from graphrecall.server.http import create_app

        return create_app
    if name == "run_server":
        from graphrecall.server.serve import run_server

        return run_server
    raise AttributeError(f"module 'graphrecall.server' has no attribute {name!r}")
