"""The one error shape of the HTTP API, ``{"error": {"code", "message", "field"}}``, and the status for each code.

Clients branch on ``code`` (stable) rather than on messages (for humans) or statuses (several codes share one).
Library exceptions carry their own ``code``; this module only decides the HTTP status and the field name.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from graphrecall.errors import (
    EmbedderMismatch,
    EmbeddingFailed,
    GraphRecallError,
    InvalidInput,
    NotAvailable,
    NotFound,
    RerankFailed,
    StorageFull,
    StoreBusy,
    Unreachable,
)
from graphrecall.params import first_problem
from graphrecall.store.wal import FlushFailed, WriteLogCorrupt, WriteLogError

log = logging.getLogger("graphrecall.server")

STATUS_CODES = {
    400: "invalid_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "invalid_input",
    501: "not_implemented",
    503: "store_busy",
    507: "storage_full",
}
# What a client is told when the server's disk is full. The details (which file system, which file) name server
# paths, so they go to the server log only.
STORAGE_FULL_MESSAGE = (
    "the server is out of storage space: nothing of this request was stored, and what was stored before is safe; "
    "retry once space is freed"
)


class ApiError(Exception):
    """Raised by route code for an error response with a chosen status and code."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "field": field}}, status_code=status, headers=headers
    )


_PARTS = {"body", "query", "path", "header"}  # where in the request a field was: not part of its name


def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        return error_response(400, "invalid_input", f"request body is not valid JSON: {first['msg']}", "body")
    loc = list(first.get("loc", ()))
    problem = first_problem([{**first, "loc": loc[1:] if loc and loc[0] in _PARTS else loc}])
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    where = problem.where or None
    message = str(problem).removeprefix(f"{problem.where}: ")
    return error_response(422, "invalid_input", f"{where or 'request'}: {message}{more}", where)


class AllowedMethods:
    """The methods the API documents for each path, to answer a 405 with all of them: Starlette's 405 names only
    the first route whose path matched (``/facts`` said ``Allow: GET`` though ``POST /facts`` exists), and RFC 9110
    wants every method the resource supports. Built from the app's OpenAPI paths, so ``Allow`` and the document
    agree by construction."""

    def __init__(self, paths: dict[str, dict[str, Any]]) -> None:
        self._paths = [
            (compile_path(path)[0], ", ".join(m.upper() for m in item)) for path, item in paths.items()
        ]

    def at(self, path: str) -> str | None:
        return next((methods for regex, methods in self._paths if regex.match(path)), None)


def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = STATUS_CODES.get(exc.status_code, "error")
    detail = exc.detail if isinstance(exc.detail, str) else "request failed"
    headers = dict(exc.headers or {})
    allowed = getattr(request.app.state, "allowed_methods", None)
    if exc.status_code == 405 and isinstance(allowed, AllowedMethods):
        headers["Allow"] = allowed.at(request.url.path) or headers.get("Allow", "")
    return error_response(exc.status_code, code, detail, headers=headers)


def _api(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.field)


def _library(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, GraphRecallError)
    if isinstance(exc, InvalidInput):
        return error_response(422, exc.code, str(exc), exc.where or None)
    if isinstance(exc, NotFound):
        return error_response(404, exc.code, str(exc))
    if isinstance(exc, StoreBusy):
        # The database is held by another process: retrying later is the right move for the client.
        return error_response(
            503, exc.code, "the user's store is busy; retry shortly", headers={"Retry-After": "1"}
        )
    if isinstance(exc, StorageFull) or isinstance(exc.__cause__, StorageFull):
        # A full disk is not a bug: say so (507) instead of a 500, and that acknowledged writes are safe.
        log.error("out of storage space: %s", exc)
        return error_response(507, StorageFull.code, STORAGE_FULL_MESSAGE)
    if isinstance(exc, WriteLogError | FlushFailed) and not isinstance(exc, WriteLogCorrupt):
        # The write log could not take the write (an I/O error, shutting down) or the store could not take the
        # log's writes yet: nothing of this request was stored, and trying again later is the right move.
        log.error("write failed: %s", exc)
        return error_response(
            503,
            exc.code,
            "the server's store could not be written just now; nothing of this request was stored; retry",
            headers={"Retry-After": "5"},
        )
    if isinstance(exc, EmbeddingFailed | RerankFailed | Unreachable):
        # The embeddings (or LLM) server this one relies on failed: nothing of the request was stored; retry later.
        log.error("a server this one relies on failed: %s", exc)
        return error_response(
            503,
            exc.code,
            "a service this server relies on (its embedding or rerank model server) failed; nothing of this request was "
            "stored; retry",
            headers={"Retry-After": "5"},
        )
    if isinstance(exc, NotAvailable):
        # A setting of this server, not a fault: 409 (see routes.NEEDS_LLM), so nothing pages and nothing retries.
        return error_response(409, exc.code, str(exc))
    if isinstance(exc, EmbedderMismatch):
        # The scope was written with another model than the server's: the operator's to fix, with the command the
        # message names (without the server's paths, which go to the log).
        log.error("embedder mismatch: %s", exc)
        return error_response(500, exc.code, exc.public)
    log.error("server-side store error: %s", exc)
    return error_response(500, exc.code, "the server's store is misconfigured; see the server log")


def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal", "internal server error; see the server log")


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(ApiError, _api)
    app.add_exception_handler(GraphRecallError, _library)
    app.add_exception_handler(Exception, _unexpected)
