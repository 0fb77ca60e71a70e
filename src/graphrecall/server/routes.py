"""The HTTP routes of ``graphrecall.operations``: one route per operation that declares ``http``, built from its row.

Each route's path parameters are the fields named in its path; the other fields are the query (GET) or the JSON
body (POST), with the parameter model's names, types, defaults, bounds and descriptions, so the OpenAPI document
says exactly what ``Memory`` accepts. The handler runs the ``Memory`` method in a worker thread (Kuzu and the
embedder block; users proceed in parallel, one user's writes queue on its database lock) and answers with the
operation's wire model. What the row declares it may raise becomes the route's documented error responses.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel, BeforeValidator, ConfigDict, create_model

from graphrecall.errors import NotAvailable, NotFound
from graphrecall.memory import Memory
from graphrecall.models import ID_SCHEMA, IngestResult, Scope, validate_identifier
from graphrecall.operations import Operation, exposed, missing_scope
from graphrecall.params import Params, is_shared, plain_type, validate
from graphrecall.server.auth import shared_write_refused
from graphrecall.server.errors import ApiError
from graphrecall.server.metrics import Metrics
from graphrecall.server.middleware import principal_of
from graphrecall.server.schemas import ErrorResponse

T = TypeVar("T")
PREFIX = "/v1/scopes/{org}/{user}"
ORG_PREFIX = "/v1/scopes/{org}"

COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": desc}
    for status, desc in {
        400: "the body is not valid JSON, or Content-Length is not a number (invalid_input)",
        401: "missing or invalid API key (unauthorized)",
        403: "the key may not access this org (forbidden)",
        413: "request body over the limit (payload_too_large)",
        422: "invalid input; `field` names it (invalid_input)",
        503: "the user's store is busy, or a write could not be stored right now; retry (store_busy, write_log)",
        500: "a fault of the server (internal), or a store written with another embedding model than the "
        "server's (embedder_mismatch; the message names the command that fixes it)",
        507: "the server is out of storage space; nothing of the request was stored (storage_full)",
    }.items()
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {
        "model": ErrorResponse,
        "description": "the user holds no memory (the message names the organisation's closest users), or the "
        "item does not exist (not_found)",
    }
}
NEEDS_LLM: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorResponse, "description": "the request is valid but this server has no LLM configured "
          "(not_available): nothing was done; the same request works on a server with GRAPHRECALL_LLM set"}
}  # fmt: skip
"""409, not 501: a server without an LLM works as configured; the request conflicts with how it is set up. A 5xx
would page whoever watches the server's error rate and make clients retry a request that cannot succeed."""


def _query_int(value: Any) -> Any:
    """An integer in a URL query is digits (with a sign): ``5.0``, `` 5`` or ``1e3`` are not integers."""
    if isinstance(value, str) and not re.fullmatch(r"[+-]?[0-9]+", value):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _query_bool(value: Any) -> Any:
    """A boolean in a URL query is ``true`` or ``false`` (how OpenAPI writes one), not ``1``, ``yes`` or ``on``."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


class QueryParams(Params):
    """A GET operation's parameters as they arrive in the URL: text, read into the parameter model's types by
    ``_query_int``/``_query_bool``/the date rule, then checked strictly by the operation's own model."""

    model_config = ConfigDict(extra="forbid", strict=False)


def _query(model: type[Params], names: list[str]) -> type[BaseModel]:
    """The query form of ``model``'s fields ``names``: same names, bounds and descriptions, read from text."""
    fields: dict[str, Any] = {}
    for n in names:
        field = model.model_fields[n]
        annotation: Any = field.annotation
        kind = plain_type(annotation)
        if kind is bool:
            annotation = Annotated[annotation, BeforeValidator(_query_bool)]
        elif kind is int:
            annotation = Annotated[annotation, BeforeValidator(_query_int)]
        fields[n] = (annotation, field)
    made: type[BaseModel] = create_model(  # type: ignore[call-overload]
        model.__name__.removesuffix("Params") + "Query", __base__=QueryParams, __doc__=model.__doc__, **fields
    )
    return made


def user_scope(request: Request, org: Annotated[str, Path(description="tenant (organisation) id",
               json_schema_extra=ID_SCHEMA)], user: Annotated[str, Path(description="end-user id within the org",
               json_schema_extra=ID_SCHEMA)]) -> Scope:  # fmt: skip
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


def org_scope(request: Request, org: Annotated[str, Path(min_length=1, max_length=128,
              description="tenant (organisation) id")]) -> str:  # fmt: skip
    """The organisation of an organisation-level route, validated and re-checked against the key's grants."""
    try:
        validate_identifier(org, "org")
    except ValueError as e:
        raise ApiError(422, "invalid_input", str(e), "org") from None
    principal = principal_of(request.scope)
    if principal is None or not principal.allows(org):
        raise ApiError(403, "forbidden", f"not allowed to access org {org!r}")
    return org


def _part(model: type[Params], names: list[str], suffix: str) -> type[BaseModel]:
    """The parameter model restricted to ``names`` (a POST body beside path parameters), same fields and rules."""
    fields: dict[str, Any] = {n: (model.model_fields[n].annotation, model.model_fields[n]) for n in names}
    made: type[BaseModel] = create_model(  # type: ignore[call-overload]
        model.__name__.removesuffix("Params") + suffix, __base__=Params, __doc__=model.__doc__, **fields
    )
    return made


class OperationRoutes:
    """The routes of every HTTP operation over one ``Memory``, counted in one ``Metrics``."""

    def __init__(self, memory: Memory, metrics: Metrics) -> None:
        self.memory = memory
        self.metrics = metrics

    async def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run blocking library code in a worker thread so the event loop keeps serving other users."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    def router(self) -> APIRouter:
        def made(prefix: str) -> APIRouter:
            return APIRouter(
                prefix=prefix, dependencies=[Depends(HTTPBearer(auto_error=False))], responses=COMMON_ERRORS
            )

        users, orgs = made(PREFIX), made(ORG_PREFIX)
        for op in exposed("http"):
            assert op.http is not None
            self._add(orgs if op.http.level == "org" else users, op)
        both = APIRouter()
        both.include_router(users)
        both.include_router(orgs)
        return both

    def _stored(self, op: Operation[Any], scope: Scope) -> None:
        """404 for a scope that holds nothing, when the operation says a missing user is a mistake."""
        if op.unknown_scope == "not_found" and not self.memory.stored(scope):
            raise missing_scope(scope, self.memory.scopes(), where="", org_only=True)

    def _invoke(self, op: Operation[Any], scope: Scope | str, p: Params) -> Any:
        if isinstance(scope, Scope):
            self._stored(op, scope)
        return op.invoke(self.memory, scope, p)  # type: ignore[arg-type]

    def _add(self, r: APIRouter, op: Operation[Any]) -> None:
        http = op.http
        assert http is not None
        in_path = re.findall(r"{(\w+)}", http.path)
        org_level = http.level == "org"  # the path's org is the model's org_id
        rest = [n for n in op.params.model_fields if n not in in_path and not (org_level and n == "org_id")]
        keyword = inspect.Parameter.KEYWORD_ONLY
        who = Annotated[str, Depends(org_scope)] if org_level else Annotated[Scope, Depends(user_scope)]
        signature = [
            inspect.Parameter("scope", keyword, annotation=who),
            inspect.Parameter("response", keyword, annotation=Response),
            inspect.Parameter("request", keyword, annotation=Request),
        ]
        for name in in_path:
            field = op.params.model_fields[name]
            signature.append(
                inspect.Parameter(
                    name,
                    keyword,
                    annotation=Annotated[
                        str, Path(description=field.description, json_schema_extra=ID_SCHEMA)
                    ],
                )
            )
        if rest and http.method == "GET":
            query = _query(op.params, rest)
            signature.append(inspect.Parameter("query", keyword, annotation=Annotated[query, Query()]))
        elif rest:
            body = op.params if not in_path else _part(op.params, rest, "Request")
            signature.append(inspect.Parameter("body", keyword, annotation=Annotated[body, Body()]))

        async def endpoint(scope: Scope | str, response: Response, request: Request, **given: Any) -> Any:
            values: dict[str, Any] = {n: given[n] for n in in_path} | ({"org_id": scope} if org_level else {})
            for part in ("query", "body"):
                if part in given:
                    values |= {n: getattr(given[part], n) for n in rest}
            p = validate(op.params, values)  # path parameters are checked here; 422 naming them
            if op.writes and isinstance(scope, Scope) and is_shared(scope):
                principal = principal_of(request.scope)
                if principal is not None and not principal.shared_write:
                    raise ApiError(403, "forbidden", shared_write_refused(principal.name, scope))
            result = await self.call(self._invoke, op, scope, p)  # one thread hop: under load each hop queues
            if isinstance(result, IngestResult):
                self.metrics.ingest(result)
            if http.accepted and getattr(result, "extraction_job", None) is not None:
                response.status_code = 202  # stored; the extraction is queued (result.extraction_job)
            return op.wire(scope, p, result)  # type: ignore[arg-type]

        endpoint.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
        endpoint.__name__ = op.name
        model = op.response_model()
        responses: dict[int | str, dict[str, Any]] = {}
        if NotFound in op.errors or op.unknown_scope == "not_found":
            responses |= NOT_FOUND
        if NotAvailable in op.errors:
            responses |= NEEDS_LLM
        if http.accepted:
            responses[202] = {
                "model": model,
                "description": "Stored; its extraction is queued (extraction_job)",
            }
        r.add_api_route(
            http.path,
            endpoint,
            methods=[http.method],
            response_model=model,
            responses=responses,
            summary=http.summary,
            description=op.params.__doc__ or "",
            operation_id=http.operation_id or op.name,
            tags=[http.tag],
        )
