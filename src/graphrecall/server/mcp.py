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
from pydantic import Field, WithJsonSchema
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from graphrecall import __version__
from graphrecall.config import RERANKER_HELP
from graphrecall.errors import GraphRecallError
from graphrecall.memory import Memory
from graphrecall.models import Scope, validate_identifier
from graphrecall.operations import Operation, exposed, missing_scope
from graphrecall.params import is_shared, validate
from graphrecall.server.auth import (
    ApiKeyAuth,
    Principal,
    ServerConfigError,
    check_startup,
    shared_write_refused,
)

log = logging.getLogger(__name__)

SERVER_NAME = "graphrecall"
HTTP_PATH = "/mcp"
API_KEYS_ENV = "GRAPHRECALL_API_KEYS_FILE"
T = TypeVar("T")


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

    def resolve(
        self,
        org_id: str | None,
        user_id: str | None,
        headers: Mapping[str, str] | None,
        *,
        writes: bool = False,
    ) -> Scope:
        """The scope for one call, or a ``ToolError`` naming the offending field. ``writes``: the call changes
        memory, which a shared scope allows only to a key with ``shared_write``."""
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
            scope = Scope(org_id=org, user_id=user)
            if writes and is_shared(scope) and not principal.shared_write:
                raise ToolError(f"forbidden: {shared_write_refused(principal.name, scope)}")
            return scope
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


def inline(schema: Any, defs: Mapping[str, Any]) -> Any:
    """``schema`` with every ``$ref`` into ``defs`` replaced by what it names: a tool argument's schema stands alone
    in the tool's input schema, where the model's ``$defs`` are not."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return inline(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: inline(v, defs) for k, v in schema.items()}
    if isinstance(schema, list):
        return [inline(v, defs) for v in schema]
    return schema


def spec_tool(op: Operation[Any], memory: Memory, policy: ScopePolicy) -> Callable[..., Awaitable[Any]]:
    """An MCP tool for one operation of ``graphrecall.operations``: its arguments are the fields of the
    operation's parameter model (the same names, types, defaults, bounds and descriptions as the HTTP API and the
    CLI) plus ``org_id``/``user_id``; it answers with the operation's wire model.

    The SDK derives a tool's input schema from its signature, so the signature is built from the model's fields
    instead of being written out by hand a second time."""
    returns = op.response_model()

    def run(scope: Scope, values: dict[str, Any]) -> Any:
        p = validate(op.params, values)
        if op.unknown_scope == "not_found" and not memory.stored(scope):
            raise missing_scope(scope, memory.scopes(), where="", org_only=True)
        return op.wire(scope, p, op.invoke(memory, scope, p))

    async def tool(
        ctx: Context[Any, Any], org_id: str | None = None, user_id: str | None = None, **values: Any
    ) -> Any:
        scope = policy.resolve(org_id, user_id, _headers(ctx), writes=op.writes)
        return await _blocking(functools.partial(run, scope, values))

    keyword = inspect.Parameter.KEYWORD_ONLY
    schema = op.params.model_json_schema()
    fields = [
        inspect.Parameter(
            name,
            keyword,
            default=inspect.Parameter.empty if field.is_required() else field.default,
            # The model's own JSON schema for the argument, so a client sees every type and bound; the checking is
            # ``run``'s (the operation's model, as on every surface), so a mistake is named the same way there.
            annotation=Annotated[
                Any, WithJsonSchema(inline(schema["properties"][name], schema.get("$defs", {})))
            ],
        )
        for name, field in op.params.model_fields.items()
    ]
    parameters = [
        inspect.Parameter("ctx", keyword, annotation=Context[Any, Any]),
        *fields,
        inspect.Parameter("org_id", keyword, default=None, annotation=OrgArg),
        inspect.Parameter("user_id", keyword, default=None, annotation=UserArg),
    ]
    tool.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    assert op.mcp is not None
    tool.__name__ = tool.__qualname__ = op.mcp.tool
    tool.__doc__ = op.params.__doc__
    return tool


def create_mcp_server(
    memory: Memory,
    *,
    default_scope: Scope | None = None,
    allowed_orgs: set[str] | None = None,
    auth: ApiKeyAuth | None = None,
) -> MCPServer[Any]:
    """An MCP server exposing the MCP operations of ``graphrecall.operations`` over ``memory``. ``auth`` makes every
    call present a bearer key (HTTP transport) whose orgs further restrict ``allowed_orgs``; ``default_scope``
    binds every call to one scope."""
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
    for op in exposed("mcp"):
        mcp = op.mcp
        assert mcp is not None
        hints = ToolAnnotations(
            read_only_hint=mcp.read_only,
            destructive_hint=None if mcp.read_only else mcp.destructive,
            idempotent_hint=mcp.idempotent,
            open_world_hint=False,
        )
        server.add_tool(
            spec_tool(op, memory, policy),
            description=f"{mcp.description} {policy.describe()}",
            annotations=hints,
        )
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
        "--embedder",
        default=None,
        metavar="SPEC",
        help="the embedding model (graphrecall.embed.spec; default: $GRAPHRECALL_EMBEDDER, else minilm)",
    )
    parser.add_argument("--reranker", default=None, metavar="SPEC", help=RERANKER_HELP)


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
    ``insecure_local``, ``embedder`` and ``reranker`` (specs) from ``args``. Raises ``ServerConfigError`` when it cannot start safely."""
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
    reranker = (getattr(args, "reranker", None) or "").strip() or None  # None: $GRAPHRECALL_RERANKER
    with Memory.open(args.root, embedder=getattr(args, "embedder", None), reranker=reranker) as memory:
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
