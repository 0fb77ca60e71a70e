"""The FastAPI application: one ``Memory`` behind versioned JSON routes, one scope (org, user) per URL.

``Memory`` is synchronous and does blocking work (Kuzu, embedding), so every call runs in a worker thread: requests
for different users proceed in parallel, and writes to one user queue on that database's write lock instead of
failing. Features that the library does not have yet (LLM extraction, the reader, fact versioning) answer 501
``not_implemented`` until the ``Memory`` methods appear; then the same routes pass their results through unchanged.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer

from graphrecall import __version__
from graphrecall.memory import Memory
from graphrecall.models import (
    Context,
    Fact,
    IngestResult,
    Scope,
    ScopeStats,
    Session,
    SessionInput,
    ensure_utc,
    validate_identifier,
)
from graphrecall.server import errors
from graphrecall.server.auth import ApiKeyAuth, ServerConfigError
from graphrecall.server.errors import ApiError
from graphrecall.server.metrics import Metrics
from graphrecall.server.middleware import (
    AccessLogMiddleware,
    AuthMiddleware,
    BodyLimitMiddleware,
    principal_of,
)
from graphrecall.server.schemas import (
    AddMessagesRequest,
    AddSessionRequest,
    AnswerRequest,
    ErrorResponse,
    ExportDocument,
    FactHistoryResponse,
    FactsResponse,
    ForgetResponse,
    HealthResponse,
    SearchResponse,
    SessionsResponse,
    SupersedeRequest,
)

T = TypeVar("T")

DEFAULT_MAX_BODY_BYTES = 2_000_000
DESCRIPTION = (
    "Long-term memory for chat assistants. Every route under /v1/scopes/{org}/{user} works on one user's "
    "memory (its own embedded database). Authenticate with `Authorization: Bearer <key>`; a key may touch only "
    'the orgs it was granted. Errors are `{"error": {"code", "message", "field"}}` with stable codes.'
)
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": desc}
    for status, desc in {
        401: "missing or invalid API key (unauthorized)",
        403: "the key may not access this org (forbidden)",
        413: "request body over the limit (payload_too_large)",
        422: "invalid input; `field` names it (invalid_input)",
        503: "the user's store is busy; retry (store_busy)",
    }.items()
}
_NOT_IMPLEMENTED: dict[int | str, dict[str, Any]] = {
    501: {
        "model": ErrorResponse,
        "description": "the server's graphrecall lacks this feature (not_implemented)",
    }
}
_PASS_THROUGH: dict[int | str, dict[str, Any]] = {
    200: {"description": "the library's result, as JSON", "content": {"application/json": {"schema": {}}}}
}

OrgId = Annotated[str, Path(min_length=1, max_length=128, description="tenant (organisation) id")]
UserId = Annotated[str, Path(min_length=1, max_length=128, description="end-user id within the org")]
FactId = Annotated[str, Path(min_length=1, max_length=128)]
SessionId = Annotated[str, Path(min_length=1, max_length=128)]
QuestionDate = Annotated[
    datetime | None,
    Query(description="ISO-8601; anchors relative time and hides what was said after it"),
]


def scope_of(request: Request, org: OrgId, user: UserId) -> Scope:
    """Validate the path ids before anything touches the filesystem, and re-check the org grant (the auth
    middleware already did; this keeps the guarantee local to the routes)."""
    for value, name in ((org, "org"), (user, "user")):
        try:
            validate_identifier(value, name)
        except ValueError as e:
            raise ApiError(422, "invalid_input", str(e), name) from None
    principal = principal_of(request.scope)
    if principal is None or not principal.allows(org):
        raise ApiError(403, "forbidden", f"not allowed to access org {org!r}")
    return Scope(org_id=org, user_id=user)


ScopeDep = Annotated[Scope, Depends(scope_of)]


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else ensure_utc(value)


def _required(memory: Memory, name: str, what: str) -> Callable[..., Any]:
    fn = getattr(memory, name, None)
    if not callable(fn):
        raise ApiError(
            501,
            "not_implemented",
            f"{what} is not available in this graphrecall version (Memory.{name} is missing)",
        )
    return fn  # type: ignore[no-any-return]


def _accepts(fn: Callable[..., Any], parameter: str) -> bool:
    try:
        return parameter in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _json(result: Any) -> JSONResponse:
    return JSONResponse(jsonable_encoder(result))


class _Routes:
    """Route handlers bound to one ``Memory`` and one ``Metrics``."""

    def __init__(self, memory: Memory, metrics: Metrics) -> None:
        self.memory = memory
        self.metrics = metrics

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run blocking library code in a worker thread so the event loop keeps serving other users."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    def router(self) -> APIRouter:
        r = APIRouter(
            prefix="/v1/scopes/{org}/{user}",
            tags=["memory"],
            dependencies=[Depends(HTTPBearer(auto_error=False))],
            responses=_ERRORS,
        )
        m = self.memory

        @r.post("/sessions", response_model=IngestResult, responses=_NOT_IMPLEMENTED, summary="Add a session")
        async def add_session(scope: ScopeDep, body: AddSessionRequest) -> IngestResult:
            kwargs: dict[str, Any] = {"session_id": body.session_id, "date": _utc(body.date)}
            if body.extract:
                if not _accepts(m.add_session, "extract"):
                    raise ApiError(
                        501,
                        "not_implemented",
                        "extract=true needs LLM extraction, which this graphrecall version lacks; "
                        "send extract=false to store the raw history only",
                        "extract",
                    )
                kwargs["extract"] = True
            result = await self.call(m.add_session, scope, body.messages, **kwargs)
            self.metrics.ingest(result)
            return result

        @r.post("/messages", response_model=IngestResult, summary="Append messages to a session")
        async def add_messages(scope: ScopeDep, body: AddMessagesRequest) -> IngestResult:
            result = await self.call(
                m.add_messages, scope, body.messages, session_id=body.session_id, date=_utc(body.date)
            )
            self.metrics.ingest(result)
            return result

        @r.get("/search", response_model=SearchResponse, summary="Hybrid search over the user's memory")
        async def search(
            scope: ScopeDep,
            q: Annotated[str, Query(min_length=1, max_length=10_000, description="the query text")],
            k: Annotated[int, Query(ge=1, le=100)] = 10,
            question_date: QuestionDate = None,
        ) -> SearchResponse:
            hits = await self.call(m.search, scope, q, k, question_date=_utc(question_date))
            return SearchResponse(query=q, hits=hits)

        @r.get("/context", response_model=Context, summary="Evidence for a prompt, inside a token budget")
        async def context(
            scope: ScopeDep,
            q: Annotated[str, Query(min_length=1, max_length=10_000)],
            token_budget: Annotated[int, Query(ge=1, le=200_000)] = 2000,
            k: Annotated[int, Query(ge=1, le=200)] = 30,
            question_date: QuestionDate = None,
        ) -> Context:
            return await self.call(m.context, scope, q, token_budget, k=k, question_date=_utc(question_date))

        @r.post("/answer", responses={**_PASS_THROUGH, **_NOT_IMPLEMENTED}, summary="Answer from memory")
        async def answer(scope: ScopeDep, body: AnswerRequest) -> Response:
            fn = _required(m, "answer", "answering (the Reader)")
            result = await self.call(
                fn, scope, body.question, question_date=_utc(body.question_date), mode=body.mode
            )
            return _json(result)

        @r.get("/facts", response_model=FactsResponse, responses=_NOT_IMPLEMENTED, summary="Extracted facts")
        async def facts(
            scope: ScopeDep,
            as_of: Annotated[datetime | None, Query(description="facts valid at this time")] = None,
            include_superseded: bool = False,
            limit: Annotated[int, Query(ge=1, le=1000)] = 100,
            offset: Annotated[int, Query(ge=0)] = 0,
        ) -> FactsResponse:
            fn = _required(m, "facts", "fact listing")
            found = await self.call(
                fn,
                scope,
                as_of=_utc(as_of),
                include_superseded=include_superseded,
                limit=limit,
                offset=offset,
            )
            return FactsResponse(facts=found)

        @r.get(
            "/facts/{fact_id}/history",
            response_model=FactHistoryResponse,
            responses=_NOT_IMPLEMENTED,
            summary="Every version of a fact, oldest first",
        )
        async def history(scope: ScopeDep, fact_id: FactId) -> FactHistoryResponse:
            fn = _required(m, "history", "fact history")
            _check_id(fact_id, "fact_id")
            versions = await self.call(fn, scope, fact_id)
            return FactHistoryResponse(fact_id=fact_id, versions=versions)

        @r.post(
            "/facts/{fact_id}/supersede",
            response_model=Fact,
            responses=_NOT_IMPLEMENTED,
            summary="Mark a fact as replaced by another; returns the updated old fact",
        )
        async def supersede(scope: ScopeDep, fact_id: FactId, body: SupersedeRequest) -> Fact:
            fn = _required(m, "supersede", "fact superseding")
            _check_id(fact_id, "fact_id")
            return await self.call(fn, scope, fact_id, body.new_id)

        @r.get("/sessions", response_model=SessionsResponse, summary="List sessions (without messages)")
        async def sessions(
            scope: ScopeDep,
            limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
            offset: Annotated[int, Query(ge=0)] = 0,
        ) -> SessionsResponse:
            found = await self.call(m.sessions, scope, limit=limit, offset=offset)
            return SessionsResponse(sessions=found)

        @r.get("/sessions/{session_id}", response_model=Session, summary="One session with its messages")
        async def get_session(scope: ScopeDep, session_id: SessionId) -> Session:
            _check_id(session_id, "session_id")
            return await self.call(m.get_session, scope, session_id)

        @r.get("/stats", response_model=ScopeStats, summary="Counts and size of the user's memory")
        async def stats(scope: ScopeDep) -> ScopeStats:
            return await self.call(m.stats, scope)

        @r.get("/export", response_model=ExportDocument, summary="Every session with its messages")
        async def export(scope: ScopeDep) -> ExportDocument:
            found = await self.call(m.export_sessions, scope)
            return ExportDocument(org_id=scope.org_id, user_id=scope.user_id, sessions=found)

        @r.post("/import", response_model=IngestResult, summary="Add sessions in the export format")
        async def import_(scope: ScopeDep, body: ExportDocument) -> IngestResult:
            items = [
                SessionInput(session_id=s.id, date=s.started_at, messages=list(s.messages))
                for s in body.sessions
            ]
            result = await self.call(m.add_sessions, scope, items)
            self.metrics.ingest(result)
            return result

        @r.delete("", response_model=ForgetResponse, summary="Erase the user's memory (GDPR erasure)")
        async def forget(scope: ScopeDep) -> ForgetResponse:
            return ForgetResponse(erased=await self.call(m.forget, scope))

        return r


def _check_id(value: str, name: str) -> None:
    try:
        validate_identifier(value, name)
    except ValueError as e:
        raise ApiError(422, "invalid_input", str(e), name) from None


def create_app(
    memory: Memory,
    *,
    auth: ApiKeyAuth | None,
    insecure_local: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """Build the app around an open ``Memory`` (the caller opens and closes it).

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
        ready["ok"] = True
        yield
        ready["ok"] = False

    app = FastAPI(title="graphrecall", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    errors.install(app)
    app.include_router(_Routes(memory, metrics).router())

    @app.get("/healthz", response_model=HealthResponse, tags=["operations"], summary="The process is alive")
    async def healthz() -> HealthResponse:
        return HealthResponse(status="ok")

    @app.get(
        "/readyz",
        response_model=HealthResponse,
        tags=["operations"],
        summary="Ready to serve: the store root is writable and the server is not shutting down",
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
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
        dependencies=[Depends(HTTPBearer(auto_error=False))],
    )
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    # Added innermost first: the access log sees every request, auth runs before the body is read.
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    app.add_middleware(AuthMiddleware, auth=auth, metrics=metrics)
    app.add_middleware(AccessLogMiddleware, metrics=metrics)
    app.state.metrics = metrics
    return app
