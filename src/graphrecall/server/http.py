"""The FastAPI application: one ``Memory`` behind versioned JSON routes, one scope (org, user) per URL.

``Memory`` is synchronous and does blocking work (Kuzu, embedding), so every call runs in a worker thread: requests
for different users proceed in parallel, and writes to one user queue on that database's write lock instead of
failing. The routes are those of ``graphrecall.operations``
(``server.routes`` builds one per operation from its row: path, parameters, result, errors), shared with the MCP
tools and the CLI. What needs an LLM (``extract=true``, ``/answer``) answers 501 ``not_available`` when the server
has none configured. Each route has a short, stable ``operation_id`` (``search``, ``add_session``...): the method
names of clients generated from docs/openapi.json.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import Depends, FastAPI, Response
from fastapi.security import HTTPBearer
from fastapi_offline import FastAPIOffline
from starlette.middleware.trustedhost import TrustedHostMiddleware

from graphrecall import __version__
from graphrecall.memory import Memory
from graphrecall.server import errors
from graphrecall.server.auth import ApiKeyAuth, ServerConfigError
from graphrecall.server.errors import ApiError
from graphrecall.server.limits import DEFAULT_MAX_BODY_BYTES
from graphrecall.server.metrics import Metrics, batching_lines
from graphrecall.server.middleware import (
    DOCS_ASSETS,
    AccessLogMiddleware,
    AuthMiddleware,
    BodyLimitMiddleware,
    RouteTemplates,
)
from graphrecall.server.routes import OperationRoutes
from graphrecall.server.schemas import ErrorResponse, HealthResponse
from graphrecall.server.warmup import warm_up

DESCRIPTION = (
    "Long-term memory for chat assistants. Every route under /v1/scopes/{org}/{user} works on one user's "
    "memory (its own embedded database). Authenticate with `Authorization: Bearer <key>`; a key may touch only "
    'the orgs it was granted. Errors are `{"error": {"code", "message", "field"}}` with stable codes.'
)


def create_app(
    memory: Memory,
    *,
    auth: ApiKeyAuth | None,
    insecure_local: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    warm: bool = True,
    on_ready: Callable[[], None] | None = None,
    on_stop: Callable[[], None] | None = None,
    console: bool = True,
    loopback_only: bool = False,
) -> FastAPI:
    """Build the app around an open ``Memory`` (the caller opens and closes it). ``warm``: at start-up, load the
    embedding model and freeze the start-up heap out of garbage collection (``server.warmup``). ``on_ready`` runs once
    the app is ready to serve (``run_server`` writes the server file then), ``on_stop`` when it stops. ``console``:
    serve the web console under ``/ui`` (``server.console``). ``loopback_only``: answer only requests addressed to a
    loopback name (``graphrecall ui``: a web page cannot reach the server through DNS rebinding).

    ``auth=None`` serves without authentication and must be asked for with ``insecure_local=True``; binding such a
    server to loopback only is ``run_server``'s job, since only it knows the host.
    """
    if auth is None and not insecure_local:
        raise ServerConfigError(
            "create_app(auth=None) would serve without authentication; pass insecure_local=True"
        )
    if max_body_bytes < 1:
        raise ServerConfigError(f"max_body_bytes must be positive, got {max_body_bytes}")
    metrics = Metrics()
    ready = {"ok": True}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if warm:
            await anyio.to_thread.run_sync(warm_up, memory.embedder)
        ready["ok"] = True
        if on_ready is not None:
            on_ready()
        try:
            yield
        finally:
            ready["ok"] = False
            if on_stop is not None:
                on_stop()

    # The docs pages load Swagger UI and ReDoc from files in the fastapi-offline wheel, not from a CDN: an API
    # server is often on a network that reaches no CDN, and a blank /docs reads as a broken server.
    app = FastAPIOffline(
        title="graphrecall",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        static_url=DOCS_ASSETS,
    )
    errors.install(app)
    app.include_router(OperationRoutes(memory, metrics).router())
    if console:
        from graphrecall.server.console import mount_console

        mount_console(app, memory)

    @app.get(
        "/healthz",
        response_model=HealthResponse,
        tags=["operations"],
        summary="The process is alive",
        operation_id="healthz",
    )
    async def healthz() -> HealthResponse:
        return HealthResponse(status="ok")

    @app.get(
        "/readyz",
        response_model=HealthResponse,
        tags=["operations"],
        summary="Ready to serve: the store root is writable and the server is not shutting down",
        operation_id="readyz",
        responses={503: {"model": ErrorResponse}},
    )
    async def readyz() -> HealthResponse:
        if not ready["ok"]:
            raise ApiError(503, "not_ready", "the server is shutting down")
        # The root is created by the first write (reads never create it): writable, or creatable, is ready.
        existing = next((p for p in (memory.root, *memory.root.parents) if p.exists()), memory.root)
        if not os.access(existing, os.W_OK):
            raise ApiError(503, "not_ready", "the store root is not writable")
        return HealthResponse(status="ready")

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics (text format); needs an API key when keys are configured",
        operation_id="metrics",
        response_class=Response,
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            401: {
                "model": ErrorResponse,
                "description": "missing or invalid API key, when keys are configured",
            },
        },
        dependencies=[Depends(HTTPBearer(auto_error=False))],
    )
    async def prometheus() -> Response:
        return Response(
            metrics.render() + batching_lines(memory.embedder),
            media_type="text/plain; version=0.0.4; charset=utf-8",
        )

    # Added innermost first: the access log sees every request, auth runs before the body is read.
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(AuthMiddleware, auth=auth, metrics=metrics)
    app.add_middleware(AccessLogMiddleware, metrics=metrics, routes=RouteTemplates(app.openapi()["paths"]))
    if loopback_only:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "::1"])
    app.state.metrics = metrics
    app.state.allowed_methods = errors.AllowedMethods(app.openapi()["paths"])
    return app
