"""An operation of the table as an HTTP request, built from its row (``Operation.http``) the way ``server.routes``
builds the route: path fields go into the path, the other fields into the query (GET) or the JSON body.

Why from the row: the routes are generated from the same table, so a client that is also generated from it stays
in step with the server without a line written per operation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from graphrecall.models import Scope
from graphrecall.operations import Operation
from graphrecall.params import Params

PREFIX = "/v1/scopes/{org}/{user}"  # server.routes.PREFIX (not imported: that module brings FastAPI)


QueryValue = str | int | float | bool | None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: list[tuple[str, QueryValue]]
    body: dict[str, Any] | None


def request_of(op: Operation[Any], scope: Scope, p: Params) -> Request:
    """The HTTP request that runs ``op`` on ``scope`` with the validated parameters ``p``. Fields left at ``None``
    are not sent (the route's default is the same ``None``)."""
    http = op.http
    if http is None:
        raise ValueError(f"{op.name} is not served over HTTP")
    in_path = re.findall(r"{(\w+)}", http.path)
    values = p.model_dump(mode="json", exclude_none=True)
    path = PREFIX.format(org=_segment(scope.org_id), user=_segment(scope.user_id)) + re.sub(
        r"{(\w+)}", lambda m: _segment(str(values[m.group(1)])), http.path
    )
    rest = {k: v for k, v in values.items() if k not in in_path}
    if http.method == "GET":
        return Request(http.method, path, _query(rest), None)
    return Request(http.method, path, [], rest if rest or http.method == "POST" else None)


def _segment(value: str) -> str:
    return quote(value, safe="")


def _query(values: dict[str, Any]) -> list[tuple[str, QueryValue]]:
    """Query parameters as FastAPI reads them: a list repeats its name, a boolean is ``true``/``false``."""
    out: list[tuple[str, QueryValue]] = []
    for name, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            out.append((name, "true" if item is True else "false" if item is False else str(item)))
    return out
