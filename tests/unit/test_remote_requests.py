"""``remote.requests``: every operation served over HTTP becomes a request for its own route, built from its row
(path fields in the path, the rest in the query or the body), and ``Operation.unwire`` reads its result back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from graphrecall import operations as ops
from graphrecall import params as P
from graphrecall.models import Hit, Scope
from graphrecall.remote.requests import request_of

OPENAPI = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
SCOPE = Scope(org_id="acme", user_id="ann b")

EXAMPLES: dict[str, dict[str, Any]] = {
    "add_session": {"session_id": "s1", "messages": [{"role": "user", "content": "hi"}]},
    "add_messages": {"messages": [{"role": "user", "content": "hi"}]},
    "import_sessions": {"sessions": []},
    "add_document": {"document": "# Tea\n\nGreen, no sugar.", "source": "tea.md"},
    "search": {"query": "tea", "kinds": ["round", "fact"], "question_date": "2024-05-01"},
    "context": {"query": "tea", "include_profile": True},
    "answer": {"question": "tea?"},
    "get_session": {"session_id": "s 1"},
    "history": {"fact_id": "f1"},
    "supersede": {"old_id": "f1", "new_id": "f2"},
    "add_fact": {"text": "The user likes tea."},
    "feedback": {"item_id": "f1", "useful": False},
    "erase": {"session_ids": ["s1"], "dry_run": True},
}


def _template(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(path)) + "$")


@pytest.mark.parametrize("op", [op for op in ops.exposed("http") if op.scoped], ids=lambda op: op.name)
def test_each_http_operation_becomes_a_request_for_its_documented_route(op: ops.Operation[Any]) -> None:
    p = P.validate(op.params, EXAMPLES.get(op.name, {}))
    req = request_of(op, SCOPE, p)
    routes = [path for path, methods in OPENAPI["paths"].items() if req.method.lower() in methods]
    assert any(_template(path).match(req.path) for path in routes), (req.method, req.path)
    assert req.path.startswith("/v1/scopes/acme/ann%20b")
    if req.method == "GET":
        assert req.body is None
    else:
        assert not req.query


def test_fields_go_where_the_route_reads_them() -> None:
    search = request_of(ops.SEARCH, SCOPE, P.validate(P.SearchParams, EXAMPLES["search"]))
    assert ("kinds", "round") in search.query and ("kinds", "fact") in search.query  # a list repeats its name
    assert dict(search.query)["question_date"].startswith("2024-05-01T00:00:00")
    assert "as_of" not in dict(search.query)  # None is not sent: the route's default is the same
    context = request_of(ops.CONTEXT, SCOPE, P.validate(P.ContextParams, EXAMPLES["context"]))
    assert ("include_profile", "true") in context.query
    got = request_of(ops.GET_SESSION, SCOPE, P.validate(P.GetSessionParams, {"session_id": "s-1"}))
    assert got.path.endswith("/sessions/s-1")
    supersede = request_of(ops.SUPERSEDE, SCOPE, P.validate(P.SupersedeParams, EXAMPLES["supersede"]))
    assert supersede.path.endswith("/facts/f1/supersede") and supersede.body == {
        "new_id": "f2",
        "reason": "manual",
    }


def test_unwire_gives_back_the_python_result_inside_the_envelope() -> None:
    hit = Hit(id="s1@0", text="tea", score=1.0, session_id="s1")
    p = P.validate(P.SearchParams, {"query": "tea"})
    wire = ops.SEARCH.wire(SCOPE, p, [hit])
    assert ops.SEARCH.unwire(wire) == [hit]
    assert ops.FORGET.unwire(ops.FORGET.wire(SCOPE, P.NoParams(), True)) is True


def test_an_operation_without_a_route_is_refused() -> None:
    with pytest.raises(ValueError, match="not served over HTTP"):
        request_of(ops.EXTRACT, SCOPE, P.ExtractParams())
