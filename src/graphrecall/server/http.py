"""The FastAPI application: one ``Memory`` behind versioned JSON routes, one scope (org, user) per URL.

``Memory`` is synchronous and does blocking work (Kuzu, embedding), so every call runs in a worker thread: requests
for different users proceed in parallel, and writes to one user queue on that database's write lock instead of
failing. The parameters of search, context, answer, facts, profile and add_fact are the models of ``graphrecall.params`` (shared with
the MCP tools and the CLI). What needs an LLM (``extract=true``, ``/answer``) answers 501 ``not_available`` when the
server has none configured. Each route has a short, stable ``operation_id`` (``search``, ``add_session``...): the
method names of clients generated from docs/openapi.json.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request, Response
from fastapi.security import HTTPBearer

from graphrecall import __version__
from graphrecall.memory import Memory
from graphrecall.models import (
    AddedFact,
    Consolidation,
    Context,
    Erasure,
    Fact,
    IngestResult,
    Profile,
    Scope,
    ScopeStats,
    Session,
    SessionInput,
    ensure_utc,
    validate_identifier,
)
from graphrecall.params import ContextParams, FactsParams, ProfileParams, SearchParams
from graphrecall.read.models import Answer
from graphrecall.server import errors
from graphrecall.server.auth import ApiKeyAuth, ServerConfigError
from graphrecall.server.errors import ApiError
from graphrecall.server.limits import DEFAULT_MAX_BODY_BYTES
from graphrecall.server.metrics import Metrics, batching_lines
from graphrecall.server.middleware import (
    AccessLogMiddleware,
    AuthMiddleware,
    BodyLimitMiddleware,
    RouteTemplates,
    principal_of,
)
from graphrecall.server.schemas import (
    AddFactRequest,
    AddMessagesRequest,
    AddSessionRequest,
    AnswerRequest,
    ConsolidateRequest,
    EraseRequest,
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
from graphrecall.server.warmup import warm_up

T = TypeVar("T")

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
        503: "the user's store is busy, or a write could not be stored right now; retry (store_busy, write_log)",
        507: "the server is out of storage space; nothing of the request was stored (storage_full)",
    }.items()
}
_NEEDS_LLM: dict[int | str, dict[str, Any]] = {
    501: {
        "model": ErrorResponse,
        "description": "no LLM is configured on the server (not_available); set GRAPHRECALL_LLM there",
    }
}

OrgId = Annotated[str, Path(min_length=1, max_length=128, description="tenant (organisation) id")]
UserId = Annotated[str, Path(min_length=1, max_length=128, description="end-user id within the org")]
FactId = Annotated[str, Path(min_length=1, max_length=128)]
SessionId = Annotated[str, Path(min_length=1, max_length=128)]


def user_scope(request: Request, org: OrgId, user: UserId) -> Scope:
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


ScopeDep = Annotated[Scope, Depends(user_scope)]


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else ensure_utc(value)


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
            dependencies=[Depends(HTTPBearer(auto_error=False))],
            responses=_ERRORS,
        )
        m = self.memory

        @r.post(
            "/sessions",
            response_model=IngestResult,
            responses={
                **_NEEDS_LLM,
                202: {
                    "model": IngestResult,
                    "description": "Stored; its extraction is queued (extraction_job)",
                },
            },
            summary="Add a session",
            operation_id="add_session",
            tags=["sessions"],
        )
        async def add_session(scope: ScopeDep, body: AddSessionRequest, response: Response) -> IngestResult:
            result = await self.call(
                m.add_session,
                scope,
                body.messages,
                session_id=body.session_id,
                date=_utc(body.date),
                extract=body.extract,
            )
            self.metrics.ingest(result)
            if result.extraction_job is not None:
                response.status_code = 202  # stored; the extraction is queued (result.extraction_job)
            return result

        @r.post(
            "/messages",
            response_model=IngestResult,
            summary="Append messages to a session",
            operation_id="add_messages",
            tags=["sessions"],
        )
        async def add_messages(scope: ScopeDep, body: AddMessagesRequest) -> IngestResult:
            result = await self.call(
                m.add_messages, scope, body.messages, session_id=body.session_id, date=_utc(body.date)
            )
            self.metrics.ingest(result)
            return result

        @r.get(
            "/search",
            response_model=SearchResponse,
            summary="Hybrid search over the user's memory",
            operation_id="search",
            tags=["recall"],
        )
        async def search(scope: ScopeDep, p: Annotated[SearchParams, Query()]) -> SearchResponse:
            hits = await self.call(m.search, scope, p.query, p.k, question_date=p.question_date)
            return SearchResponse(query=p.query, hits=hits)

        @r.get(
            "/context",
            response_model=Context,
            summary="Evidence for a prompt, inside a token budget",
            operation_id="context",
            tags=["recall"],
        )
        async def context(scope: ScopeDep, p: Annotated[ContextParams, Query()]) -> Context:
            return await self.call(
                m.context,
                scope,
                p.query,
                p.token_budget,
                k=p.k,
                question_date=p.question_date,
                include_profile=p.include_profile,
            )

        @r.get(
            "/profile",
            response_model=Profile,
            summary="The user's current facts by kind, dated, for a system prompt (text and structure)",
            operation_id="profile",
            tags=["facts"],
        )
        async def profile(scope: ScopeDep, p: Annotated[ProfileParams, Query()]) -> Profile:
            return await self.call(m.profile, scope, p.as_of, p.token_budget)

        @r.post(
            "/answer",
            response_model=Answer,
            responses=_NEEDS_LLM,
            summary="Answer a question from memory (the Reader; needs an LLM on the server)",
            operation_id="answer",
            tags=["recall"],
        )
        async def answer(scope: ScopeDep, body: AnswerRequest) -> Answer:
            return await self.call(
                m.answer,
                scope,
                body.question,
                body.question_date,
                body.mode,
                max_tool_steps=body.max_tool_steps,
                tools=body.tools,
                token_budget=body.token_budget,
            )

        @r.get(
            "/facts",
            response_model=FactsResponse,
            summary="Extracted facts: the current ones, or those true at as_of",
            operation_id="facts",
            tags=["facts"],
        )
        async def facts(scope: ScopeDep, p: Annotated[FactsParams, Query()]) -> FactsResponse:
            found = await self.call(
                m.facts,
                scope,
                as_of=p.as_of,
                include_superseded=p.include_superseded,
                limit=p.limit,
                offset=p.offset,
            )
            return FactsResponse(facts=found)

        @r.post(
            "/facts",
            response_model=AddedFact,
            summary="Add a fact the application already knows; versioned like extracted facts",
            operation_id="add_fact",
            tags=["facts"],
        )
        async def add_fact(scope: ScopeDep, body: AddFactRequest) -> AddedFact:
            return await self.call(
                m.add_fact,
                scope,
                body.text,
                kind=body.kind,
                entities=body.entities or [],
                valid_from=body.valid_from,
                source=body.source,
            )

        @r.get(
            "/facts/{fact_id}/history",
            response_model=FactHistoryResponse,
            summary="Every version of a fact, oldest first",
            operation_id="fact_history",
            tags=["facts"],
        )
        async def history(scope: ScopeDep, fact_id: FactId) -> FactHistoryResponse:
            _check_id(fact_id, "fact_id")
            versions = await self.call(m.history, scope, fact_id)
            return FactHistoryResponse(fact_id=fact_id, versions=versions)

        @r.post(
            "/facts/{fact_id}/supersede",
            response_model=Fact,
            summary="Mark a fact as replaced by another; returns the updated old fact",
            operation_id="supersede_fact",
            tags=["facts"],
        )
        async def supersede(scope: ScopeDep, fact_id: FactId, body: SupersedeRequest) -> Fact:
            _check_id(fact_id, "fact_id")
            return await self.call(m.supersede, scope, fact_id, body.new_id)

        @r.get(
            "/sessions",
            response_model=SessionsResponse,
            summary="List sessions (without messages)",
            operation_id="list_sessions",
            tags=["sessions"],
        )
        async def sessions(
            scope: ScopeDep,
            limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
            offset: Annotated[int, Query(ge=0)] = 0,
        ) -> SessionsResponse:
            found = await self.call(m.sessions, scope, limit=limit, offset=offset)
            return SessionsResponse(sessions=found)

        @r.get(
            "/sessions/{session_id}",
            response_model=Session,
            summary="One session with its messages",
            operation_id="get_session",
            tags=["sessions"],
        )
        async def get_session(scope: ScopeDep, session_id: SessionId) -> Session:
            _check_id(session_id, "session_id")
            return await self.call(m.get_session, scope, session_id)

        @r.post(
            "/erase",
            response_model=Erasure,
            summary="Forget sessions, facts, everything before a date or matching some words (dry_run lists it)",
            operation_id="erase",
            tags=["scope"],
        )
        async def erase(scope: ScopeDep, body: EraseRequest) -> Erasure:
            return await self.call(m.erase, scope, **body.erase_kwargs())

        @r.post(
            "/consolidate",
            response_model=Consolidation,
            summary="Merge duplicate facts, link events to entities, summarize old periods (dry_run plans only)",
            operation_id="consolidate",
            tags=["facts"],
        )
        async def consolidate(scope: ScopeDep, body: ConsolidateRequest) -> Consolidation:
            return await self.call(m.consolidate, scope, dry_run=body.dry_run, summaries=body.summaries)

        @r.get(
            "/stats",
            response_model=ScopeStats,
            summary="Counts and size of the user's memory",
            operation_id="stats",
            tags=["scope"],
        )
        async def stats(scope: ScopeDep) -> ScopeStats:
            return await self.call(m.stats, scope)

        @r.get(
            "/export",
            response_model=ExportDocument,
            summary="Every session with its messages",
            operation_id="export_sessions",
            tags=["scope"],
        )
        async def export(scope: ScopeDep) -> ExportDocument:
            found = await self.call(m.export_sessions, scope)
            return ExportDocument(org_id=scope.org_id, user_id=scope.user_id, sessions=found)

        @r.post(
            "/import",
            response_model=IngestResult,
            summary="Add sessions in the export format",
            operation_id="import_sessions",
            tags=["scope"],
        )
        async def import_(scope: ScopeDep, body: ExportDocument) -> IngestResult:
            items = [
                SessionInput(session_id=s.id, date=s.started_at, messages=list(s.messages))
                for s in body.sessions
            ]
            result = await self.call(m.add_sessions, scope, items)
            self.metrics.ingest(result)
            return result

        @r.delete(
            "",
            response_model=ForgetResponse,
            summary="Erase the user's memory (GDPR erasure)",
            operation_id="forget",
            tags=["scope"],
        )
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
    warm: bool = True,
) -> FastAPI:
    """Build the app around an open ``Memory`` (the caller opens and closes it). ``warm``: at start-up, load the
    embedding model and freeze the start-up heap out of garbage collection (``server.warmup``).

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
        yield
        ready["ok"] = False

    app = FastAPI(title="graphrecall", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    errors.install(app)
    app.include_router(_Routes(memory, metrics).router())

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
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
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
    app.state.metrics = metrics
    return app
