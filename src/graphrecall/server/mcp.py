"""MCP server: a ``Memory`` as Model Context Protocol tools, over stdio (desktop clients) or streamable HTTP.

The tools are thin: each validates its arguments (pydantic, through the SDK's signature-derived schemas), decides
*whose* memory the call may touch, runs the blocking ``Memory`` call in a worker thread, and returns the library's
own pydantic models as structured JSON. Authorisation lives here, not in the model's goodwill:

* a server started with ``--org/--user`` is bound to that scope; tool arguments may repeat it but never change it;
* without one, every call names ``org_id`` and ``user_id``, checked against ``allowed_orgs`` and, over HTTP,
  against the orgs of the bearer API key that made the request (``graphrecall.server.auth``).

Run ``python -m graphrecall.server.mcp --help`` (or ``graphrecall mcp``); docs/mcp.md has client snippets.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from graphrecall import __version__
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import GraphRecallError
from graphrecall.memory import Memory
from graphrecall.models import (
    AddedFact,
    Consolidation,
    Erasure,
    Fact,
    Hit,
    IngestResult,
    Profile,
    Role,
    Scope,
    validate_identifier,
)
from graphrecall.models import Context as MemoryContext
from graphrecall.params import (
    AddFactParams,
    AnswerParams,
    ConsolidateParams,
    ContextParams,
    EraseParams,
    FactsParams,
    ProfileParams,
    SearchParams,
)
from graphrecall.read.models import Answer
from graphrecall.server.auth import ApiKeyAuth, Principal, ServerConfigError, check_startup

log = logging.getLogger(__name__)

SERVER_NAME = "graphrecall"
HTTP_PATH = "/mcp"
API_KEYS_ENV = "GRAPHRECALL_API_KEYS_FILE"
T = TypeVar("T")
P = TypeVar("P", bound=BaseModel)


# -- tool input/output shapes ----------------------------------------------------------------------------------
class TurnInput(BaseModel):
    """One chat turn as an MCP client sends it to ``memory_add`` (not an LLM prompt message: that is
    ``graphrecall.llm.ChatMessage``). Deeper checks (blank content, id syntax, dates) are Memory's."""

    role: Role = Field(description="user, assistant, system or tool")
    content: str = Field(description="what was said")
    id: str | None = Field(
        default=None, description="stable message id; derived from session and position if omitted"
    )
    at: str | None = Field(
        default=None, description="ISO-8601 time of this turn; defaults to the session date"
    )


class SearchResult(BaseModel):
    """Ranked evidence for a query, best first."""

    query: str
    hits: list[Hit]


class FactsResult(BaseModel):
    """Extracted facts, oldest first."""

    facts: list[Fact]


OrgArg = Annotated[str | None, Field(description="org id; required unless the server is bound to a scope")]
UserArg = Annotated[str | None, Field(description="user id; required unless the server is bound to a scope")]


# -- scope policy ----------------------------------------------------------------------------------------------
def bearer_token(header: str | None) -> str | None:
    """The secret from an ``Authorization: Bearer <secret>`` header, or None when absent or another scheme."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def check_bearer(header: str | None, auth: ApiKeyAuth) -> Principal | None:
    """The principal whose key the ``Authorization`` header presents, or None (missing, malformed, unknown)."""
    token = bearer_token(header)
    return None if token is None else auth.verify(token)


class ScopePolicy:
    """Decides which scope a tool call may touch, from server configuration, tool arguments and the caller's key.

    Kept apart from the tools so the rules can be read (and tested) in one place.
    """

    def __init__(
        self,
        default_scope: Scope | None = None,
        allowed_orgs: Iterable[str] | None = None,
        auth: ApiKeyAuth | None = None,
    ) -> None:
        self.default_scope = default_scope
        self.allowed_orgs = None if allowed_orgs is None else frozenset(allowed_orgs)
        self.auth = auth
        if (
            default_scope is not None
            and self.allowed_orgs is not None
            and default_scope.org_id not in self.allowed_orgs
        ):
            raise ServerConfigError(
                f"default scope {default_scope} is outside the allowed orgs {sorted(self.allowed_orgs)}"
            )

    def describe(self) -> str:
        """One sentence for tool descriptions, so the model knows whether to pass org_id/user_id."""
        if self.default_scope is not None:
            return f"This server is bound to scope {self.default_scope}; omit org_id and user_id."
        return "Pass org_id and user_id to say whose memory to use."

    def resolve(self, org_id: str | None, user_id: str | None, headers: Mapping[str, str] | None) -> Scope:
        """The scope for one call, or a ``ToolError`` naming the offending field."""
        org = self._pick("org_id", org_id, None if self.default_scope is None else self.default_scope.org_id)
        user = self._pick(
            "user_id", user_id, None if self.default_scope is None else self.default_scope.user_id
        )
        if self.allowed_orgs is not None and org not in self.allowed_orgs:
            raise ToolError(
                f"forbidden: org_id {org!r} is not served here (allowed: {sorted(self.allowed_orgs)})"
            )
        if self.auth is not None:
            principal = None if headers is None else check_bearer(headers.get("authorization"), self.auth)
            if principal is None:
                raise ToolError(
                    "unauthorized: this server needs a valid 'Authorization: Bearer <key>' header"
                )
            if not principal.allows(org):
                raise ToolError(f"forbidden: API key {principal.name!r} may not use org_id {org!r}")
        return Scope(org_id=org, user_id=user)

    @staticmethod
    def _pick(field: str, given: str | None, default: str | None) -> str:
        if given is not None:
            try:
                validate_identifier(given, field)
            except ValueError as e:
                raise ToolError(f"invalid_input: {e}") from None
            if default is not None and given != default:
                raise ToolError(
                    f"forbidden: {field} {given!r} differs from this server's configured {field} {default!r}"
                )
            return given
        if default is None:
            raise ToolError(f"invalid_input: {field} is required (this server is not bound to a scope)")
        return default


# -- tools -----------------------------------------------------------------------------------------------------
async def _blocking(fn: Callable[[], T]) -> T:
    """Run a Memory call on a worker thread (Kuzu and the embedder block); library errors become tool errors."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except GraphRecallError as e:
        raise ToolError(f"{e.code}: {e}") from e


def _headers(ctx: Context[Any, Any]) -> Mapping[str, str] | None:
    try:
        return ctx.headers
    except ValueError:  # no request context (a direct call outside a session)
        return None


def spec_tool(
    body: Callable[[Scope, P], Awaitable[Any]], spec: type[P], returns: type[BaseModel], policy: ScopePolicy
) -> Callable[..., Awaitable[Any]]:
    """An MCP tool whose arguments are the fields of ``spec`` (``graphrecall.params``: the same names, types,
    defaults, bounds and descriptions as the HTTP API and the CLI) plus ``org_id``/``user_id``.

    The SDK derives a tool's input schema from its signature, so the signature is built from the spec's fields
    instead of being written out by hand a second time."""

    async def tool(
        ctx: Context[Any, Any], org_id: str | None = None, user_id: str | None = None, **values: Any
    ) -> Any:
        scope = policy.resolve(org_id, user_id, _headers(ctx))
        return await body(scope, spec.model_validate(values))

    keyword = inspect.Parameter.KEYWORD_ONLY
    fields = [
        inspect.Parameter(
            name,
            keyword,
            default=inspect.Parameter.empty if field.is_required() else field.default,
            annotation=Annotated[(field.annotation, *field.metadata, Field(description=field.description))],
        )
        for name, field in spec.model_fields.items()
    ]
    parameters = [
        inspect.Parameter("ctx", keyword, annotation=Context[Any, Any]),
        *fields,
        inspect.Parameter("org_id", keyword, default=None, annotation=OrgArg),
        inspect.Parameter("user_id", keyword, default=None, annotation=UserArg),
    ]
    tool.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    tool.__name__ = tool.__qualname__ = body.__name__
    tool.__doc__ = body.__doc__
    return tool


def create_mcp_server(
    memory: Memory,
    *,
    default_scope: Scope | None = None,
    allowed_orgs: set[str] | None = None,
    auth: ApiKeyAuth | None = None,
) -> MCPServer[Any]:
    """An MCP server exposing ``memory``. ``auth`` makes every call present a bearer key (HTTP transport) whose
    orgs further restrict ``allowed_orgs``; ``default_scope`` binds every call to one scope."""
    policy = ScopePolicy(default_scope, allowed_orgs, auth)
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        version=__version__,
        log_level="WARNING",
        instructions=(
            "Long-term memory of past conversations. Store finished conversations with memory_add; before "
            "answering a question that may depend on the past, call memory_context (or memory_search) with the "
            f"question and its date. {policy.describe()}"
        ),
    )

    async def memory_add(
        messages: Annotated[
            list[TurnInput], Field(min_length=1, description="the session's turns, in order")
        ],
        session_id: Annotated[
            str, Field(description="stable id of the conversation; re-adding it is idempotent")
        ],
        ctx: Context[Any, Any],
        date: Annotated[
            str | None, Field(description="ISO-8601 start of the session; defaults to now")
        ] = None,
        org_id: OrgArg = None,
        user_id: UserArg = None,
    ) -> IngestResult:
        scope = policy.resolve(org_id, user_id, _headers(ctx))
        raw = [m.model_dump(exclude_none=True) for m in messages]
        return await _blocking(
            functools.partial(memory.add_session, scope, raw, session_id=session_id, date=date)
        )

    async def memory_search(scope: Scope, p: SearchParams) -> SearchResult:
        hits = await _blocking(
            functools.partial(memory.search, scope, p.query, p.k, question_date=p.question_date)
        )
        return SearchResult(query=p.query, hits=hits)

    async def memory_context(scope: Scope, p: ContextParams) -> MemoryContext:
        call = functools.partial(
            memory.context,
            scope,
            p.query,
            p.token_budget,
            k=p.k,
            question_date=p.question_date,
            include_profile=p.include_profile,
        )
        return await _blocking(call)

    async def memory_profile(scope: Scope, p: ProfileParams) -> Profile:
        return await _blocking(functools.partial(memory.profile, scope, p.as_of, p.token_budget))

    async def memory_erase(scope: Scope, p: EraseParams) -> Erasure:
        return await _blocking(functools.partial(memory.erase, scope, **p.erase_kwargs()))

    async def memory_consolidate(scope: Scope, p: ConsolidateParams) -> Consolidation:
        call = functools.partial(memory.consolidate, scope, dry_run=p.dry_run, summaries=p.summaries)
        return await _blocking(call)

    async def memory_add_fact(scope: Scope, p: AddFactParams) -> AddedFact:
        call = functools.partial(
            memory.add_fact,
            scope,
            p.text,
            kind=p.kind,
            entities=p.entities or [],
            valid_from=p.valid_from,
            source=p.source,
        )
        return await _blocking(call)

    async def memory_answer(scope: Scope, p: AnswerParams) -> Answer:
        call = functools.partial(
            memory.answer,
            scope,
            p.question,
            p.question_date,
            p.mode,
            max_tool_steps=p.max_tool_steps,
            tools=p.tools,
            token_budget=p.token_budget,
        )
        return await _blocking(call)

    async def memory_facts(scope: Scope, p: FactsParams) -> FactsResult:
        call = functools.partial(
            memory.facts,
            scope,
            as_of=p.as_of,
            include_superseded=p.include_superseded,
            limit=p.limit,
            offset=p.offset,
        )
        return FactsResult(facts=await _blocking(call))

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    tools: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
        (
            memory_add,
            "Store one conversation session (its turns, in order) in long-term memory. Idempotent per "
            "session_id and message position.",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        ),
        (
            spec_tool(memory_search, SearchParams, SearchResult, policy),
            "Ranked past conversation snippets relevant to a query, with scores and dates.",
            read_only,
        ),
        (
            spec_tool(memory_context, ContextParams, MemoryContext, policy),
            "Evidence for answering a question: the most relevant past snippets, dated and grouped by session, "
            "within a token budget. Read its 'text' before answering.",
            read_only,
        ),
        (
            spec_tool(memory_answer, AnswerParams, Answer, policy),
            "Answer a question from long-term memory with the server's reader (fails with not_available when "
            "the server has no LLM; then use memory_context and answer from the evidence).",
            read_only,
        ),
        (
            spec_tool(memory_facts, FactsParams, FactsResult, policy),
            "Facts extracted from past conversations: the current ones, or those true at as_of "
            "(empty until extraction has run).",
            read_only,
        ),
        (
            spec_tool(memory_profile, ProfileParams, Profile, policy),
            "What memory holds about the user now (or as_of): current facts grouped as identity and "
            "attributes, preferences, relationships, plans and goals, recent events, each with its session and "
            "date. Put its 'text' in the system prompt at the start of a conversation.",
            read_only,
        ),
        (
            spec_tool(memory_add_fact, AddFactParams, AddedFact, policy),
            "Remember a fact about the user that the application knows for sure (not something to infer from "
            "chat: memory_add does that). A restatement reinforces the stored fact; a changed fact replaces it "
            "(the old one is kept as history).",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
            ),
        ),
        (
            spec_tool(memory_consolidate, ConsolidateParams, Consolidation, policy),
            "Tidy what memory holds about the user: merge facts stored several times in other words (the merged "
            "ones are kept as history), link events to the people and places they name, and with summaries=true "
            "write a short summary of each old week. Call with dry_run=true to see the plan first.",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
            ),
        ),
        (
            spec_tool(memory_erase, EraseParams, Erasure, policy),
            "Forget part of what memory holds about the user, when the user asks: sessions, facts, everything "
            "before a date, or everything whose text holds given words, with what was derived from it. Call it "
            "with dry_run=true first and confirm the list with the user.",
            ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        ),
    ]
    for fn, description, hints in tools:
        server.add_tool(fn, description=f"{description} {policy.describe()}", annotations=hints)
    return server


# -- transports ------------------------------------------------------------------------------------------------
class RequireBearer:
    """ASGI middleware: 401 for any HTTP request without a valid API key, before the MCP layer sees it."""

    def __init__(self, app: ASGIApp, auth: ApiKeyAuth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, asgi: AsgiScope, receive: Receive, send: Send) -> None:
        if (
            asgi["type"] == "http"
            and check_bearer(Headers(scope=asgi).get("authorization"), self.auth) is None
        ):
            response = JSONResponse(
                {
                    "error": {
                        "code": "unauthorized",
                        "message": "missing or invalid 'Authorization: Bearer <key>'",
                    }
                },
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="graphrecall"'},
            )
            await response(asgi, receive, send)
            return
        await self.app(asgi, receive, send)


def http_app(server: MCPServer[Any], *, auth: ApiKeyAuth | None, host: str) -> ASGIApp:
    """The streamable-HTTP ASGI app (endpoint ``/mcp``), behind bearer-key checks when ``auth`` is given."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    return app if auth is None else RequireBearer(app, auth)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``run_server`` reads, for ``graphrecall mcp`` and ``python -m graphrecall.server.mcp``."""
    parser.add_argument(
        "--root", default=None, help="store root (default: $GRAPHRECALL_ROOT or ~/.graphrecall)"
    )
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=8766, help="HTTP port")
    parser.add_argument("--org", default=None, help="serve only this org (with --user: bind to one scope)")
    parser.add_argument("--user", default=None, help="bind every call to this user (needs --org)")
    parser.add_argument("--keys", default=None, help=f"API keys file for HTTP (or ${API_KEYS_ENV})")
    parser.add_argument(
        "--insecure-local", action="store_true", help="HTTP without keys; only allowed on a loopback address"
    )
    parser.add_argument(
        "--hashing-dim",
        type=int,
        default=None,
        help="use the model-free HashingEmbedder(N) instead of the bundled model (tests, smoke runs only)",
    )


def _configured_scope(org: str | None, user: str | None) -> tuple[Scope | None, set[str] | None]:
    if user is not None and org is None:
        raise ServerConfigError("--user needs --org: a user id only means something inside an org")
    try:
        for value, flag in ((org, "--org"), (user, "--user")):
            if value is not None:
                validate_identifier(value, flag)
    except ValueError as e:
        raise ServerConfigError(str(e)) from None
    if org is None:
        return None, None
    return (Scope(org_id=org, user_id=user) if user is not None else None), {org}


def run_server(args: argparse.Namespace) -> None:
    """Serve until interrupted. Reads ``root, transport, host, port, org, user, keys`` and optionally
    ``insecure_local`` and ``hashing_dim`` from ``args``. Raises ``ServerConfigError`` when it cannot start safely."""
    default_scope, allowed_orgs = _configured_scope(args.org, args.user)
    transport = args.transport
    auth: ApiKeyAuth | None = None
    if transport == "http":
        keys_path = args.keys or os.environ.get(API_KEYS_ENV) or None
        auth = ApiKeyAuth.from_file(keys_path) if keys_path else None
        check_startup(auth, host=args.host, insecure_local=bool(getattr(args, "insecure_local", False)))
    elif transport == "stdio":
        if args.keys:
            log.warning("--keys is ignored over stdio: the client that launched the server owns it")
    else:
        raise ServerConfigError(f"unknown transport {transport!r}; use stdio or http")
    dim = getattr(args, "hashing_dim", None)
    with Memory.open(args.root, embedder=HashingEmbedder(dim) if dim else None) as memory:
        server = create_mcp_server(memory, default_scope=default_scope, allowed_orgs=allowed_orgs, auth=auth)
        if transport == "stdio":
            anyio.run(server.run_stdio_async)
            return
        import uvicorn

        from graphrecall.server.serve import auth_mode

        print(
            f"graphrecall MCP server on http://{args.host}:{args.port}{HTTP_PATH}",
            file=sys.stderr,
            flush=True,
        )
        print(f"graphrecall: {auth_mode(auth)}", file=sys.stderr, flush=True)
        config = uvicorn.Config(
            http_app(server, auth=auth, host=args.host), host=args.host, port=args.port, log_level="warning"
        )
        uvicorn.Server(config).run()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m graphrecall.server.mcp", description="Serve graphrecall memory over MCP."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        run_server(args)
    except GraphRecallError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
