"""ASGI middleware that runs before any routing or body parsing: access log + metrics, auth, body size limit.

Naming: ``asgi`` is the ASGI connection scope (a dict of the raw request); a *user* scope (org, user) is
``graphrecall.models.Scope`` and never appears here except as the org segment of a path.

Pure ASGI (not ``BaseHTTPMiddleware``) so that a rejected request costs nothing: an unauthenticated caller or an
oversized body is answered before a byte of the body is parsed, and auth is decided on the same decoded path the
router matches, so the org that is checked is the org that is served.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from starlette.datastructures import Headers
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from graphrecall import telemetry
from graphrecall.models import Scope
from graphrecall.server.auth import ApiKeyAuth, Principal
from graphrecall.server.errors import error_response
from graphrecall.server.metrics import Metrics

access_log = logging.getLogger("graphrecall.server.access")

PRINCIPAL_KEY = "graphrecall.principal"
LOCAL_PRINCIPAL = Principal("insecure-local", frozenset({"*"}))
OPEN_PATHS = frozenset(
    {"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/ui", "/ui/"}
)
DOCS_ASSETS = "/docs-assets"
"""Where the API docs pages' scripts and styles are served from (shipped in the ``fastapi-offline`` wheel, so the
docs work on a machine without internet); public like the pages themselves."""
CONSOLE = "/ui"
CONSOLE_ASSETS = "/ui/assets"
"""The web console (``server.console``): its page and scripts are public like the docs pages; every call they make
to the API carries the key the person entered, checked here like any other."""
_OPEN_PREFIXES = (DOCS_ASSETS + "/", CONSOLE_ASSETS + "/")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def org_of_path(path: str) -> str | None:
    """The org segment of ``/v1/scopes/{org}/...`` (already percent-decoded, as the router sees it)."""
    parts = path.split("/")
    if len(parts) > 3 and parts[1] == "v1" and parts[2] == "scopes":
        return parts[3]
    return None


UNMATCHED = "<unmatched>"


class RouteTemplates:
    """Finds the route template of a request that was answered before routing (401/403 by auth, 413 by the body
    limit), so its metrics land beside the route's other statuses instead of under ``<unmatched>``. Built from the
    app's documented paths (``/v1/scopes/{org}/{user}/search``), matched with Starlette's own path compiler."""

    def __init__(self, templates: Iterable[str]) -> None:
        self._compiled = [(compile_path(t)[0], t) for t in templates]

    def of(self, asgi: AsgiScope) -> str:
        route = asgi.get("route")
        template = getattr(route, "path", None)
        if isinstance(template, str) and template:
            return template
        path = asgi.get("path", "")
        for regex, candidate in self._compiled:
            if regex.match(path):
                return candidate
        return UNMATCHED


class AccessLogMiddleware:
    """One log line and one metrics observation per request. Logs the path but never headers or the query
    string: headers carry the API key and the query carries users' search text."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: RouteTemplates) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, asgi: AsgiScope, receive: Receive, send: Send) -> None:
        if asgi["type"] != "http":
            await self.app(asgi, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        self.metrics.request_started()
        try:
            if telemetry.enabled():
                await self._traced(asgi, receive, send_wrapper, lambda: status)
            else:
                await self.app(asgi, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.observe(asgi["method"], self.routes.of(asgi), status, elapsed)
            principal = asgi.get(PRINCIPAL_KEY)
            client = asgi.get("client") or ("-", 0)
            access_log.info(
                '%s "%s %s" %d %.1fms key=%s',
                client[0],
                asgi["method"],
                asgi["path"],
                status,
                elapsed * 1000,
                principal.name if isinstance(principal, Principal) else "-",
            )

    async def _traced(self, asgi: AsgiScope, receive: Receive, send: Send, status: Callable[[], int]) -> None:
        """The request as a server span (``graphrecall.telemetry``), the child of the caller's when its
        ``traceparent`` header names one. Named by the route template; the path itself is not recorded (it holds
        the user id): the scope appears as its organisation and a hash."""
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in asgi.get("headers", [])}
        method = asgi["method"]
        with (
            telemetry.attached(telemetry.extract_context(headers)),
            telemetry.span(f"{method}", {"http.request.method": method}, kind="server") as span,
        ):
            try:
                await self.app(asgi, receive, send)
            finally:
                route = self.routes.of(asgi)
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status())
                scope = scope_of_path(asgi["path"])
                if scope is not None:
                    span.set_attributes(telemetry.scope_attributes(scope))


def scope_of_path(path: str) -> Scope | None:
    """The user scope of ``/v1/scopes/{org}/{user}/...``, when the path names a valid one."""
    parts = path.split("/")
    if len(parts) > 4 and parts[1] == "v1" and parts[2] == "scopes":
        try:
            return Scope(org_id=parts[3], user_id=parts[4])
        except ValueError:
            return None
    return None


class AuthMiddleware:
    """Bearer-key auth for everything but health checks and the API description; org grants for ``/v1/scopes``."""

    def __init__(self, app: ASGIApp, auth: ApiKeyAuth | None, metrics: Metrics) -> None:
        self.app = app
        self.auth = auth
        self.metrics = metrics

    async def __call__(self, asgi: AsgiScope, receive: Receive, send: Send) -> None:
        if asgi["type"] != "http" or asgi["path"] in OPEN_PATHS or asgi["path"].startswith(_OPEN_PREFIXES):
            await self.app(asgi, receive, send)
            return
        if self.auth is None:
            asgi[PRINCIPAL_KEY] = LOCAL_PRINCIPAL
            await self.app(asgi, receive, send)
            return
        header = Headers(scope=asgi).get("authorization", "")
        scheme, _, token = header.partition(" ")
        principal = self.auth.verify(token.strip()) if scheme.lower() == "bearer" and token.strip() else None
        if principal is None:
            self.metrics.auth_failure("unauthorized")
            why = "invalid API key" if header else "missing API key"
            response = error_response(
                401,
                "unauthorized",
                f"{why}: send 'Authorization: Bearer <key>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(asgi, receive, send)
            return
        asgi[PRINCIPAL_KEY] = principal
        org = org_of_path(asgi["path"])
        if org is not None and not principal.allows(org):
            self.metrics.auth_failure("forbidden")
            response = error_response(
                403, "forbidden", f"API key {principal.name!r} may not access org {org!r}"
            )
            await response(asgi, receive, send)
            return
        await self.app(asgi, receive, send)


class BodyLimitMiddleware:
    """Reject bodies over ``max_bytes`` with 413 before parsing: by ``Content-Length`` without reading, or while
    reading a chunked body, never buffering more than the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, asgi: AsgiScope, receive: Receive, send: Send) -> None:
        if asgi["type"] != "http":
            await self.app(asgi, receive, send)
            return
        headers = Headers(scope=asgi)
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await error_response(
                    400, "invalid_input", "Content-Length is not a number", "Content-Length"
                )(asgi, receive, send)
                return
            if int(declared) > self.max_bytes:
                await self._too_large(asgi, receive, send)
                return
        if asgi["method"] not in _BODY_METHODS and declared is None and "transfer-encoding" not in headers:
            await self.app(asgi, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._too_large(asgi, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(asgi, replay, send)

    async def _too_large(self, asgi: AsgiScope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, "payload_too_large", f"request body exceeds the limit of {self.max_bytes} bytes", "body"
        )
        await response(asgi, receive, send)


def principal_of(asgi: MutableMapping[str, Any]) -> Principal | None:
    """The API key holder the auth middleware attached to this request's ASGI scope, if any."""
    value = asgi.get(PRINCIPAL_KEY)
    return value if isinstance(value, Principal) else None
