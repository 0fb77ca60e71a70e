"""The HTTP API over real loopback HTTP and a real Kuzu store: what each endpoint does and how it fails.

Each test states one behaviour a client (a Spring service, the Java example, curl) relies on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from graphrecall import Memory
from graphrecall.server import create_app
from graphrecall.server.openapi import openapi_schema
from graphrecall.server.testing import serve_in_thread

REPO = Path(__file__).resolve().parents[2]
BASE = "/v1/scopes/acme/alice"

TRIP = [
    {"role": "user", "content": "I am planning a trip to Lisbon in June with my sister Ana."},
    {"role": "assistant", "content": "Lisbon in June is lovely; book the tram tour early."},
]
PETS = [
    {"role": "user", "content": "We adopted a grey cat called Miso last weekend."},
    {"role": "assistant", "content": "Congratulations on adopting Miso!"},
]


@pytest.fixture
def client(mem: Memory) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(create_app(mem, auth=None, insecure_local=True)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        yield c


def add(client: httpx.Client, session_id: str, messages: list[dict[str, Any]], date: str) -> httpx.Response:
    return client.post(
        f"{BASE}/sessions", json={"session_id": session_id, "date": date, "messages": messages}
    )


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    assert set(err) == {"code", "message", "field"}
    return err


def test_adding_a_session_stores_it_and_resending_it_changes_nothing(
    client: httpx.Client, mem: Memory
) -> None:
    first = add(client, "trip", TRIP, "2024-05-01T10:00:00Z")
    assert first.status_code == 200
    assert first.json()["sessions_added"] == 1
    assert first.json()["messages_added"] == 2

    again = add(client, "trip", TRIP, "2024-05-01T10:00:00Z")
    assert again.status_code == 200
    assert again.json()["messages_added"] == 0
    assert again.json()["messages_skipped"] == 2
    assert mem.stats(("acme", "alice")).messages == 2


def test_appended_messages_join_the_session_in_order(client: httpx.Client) -> None:
    assert add(client, "chat", TRIP, "2024-05-01T10:00:00").status_code == 200
    more = [
        {"role": "user", "content": "Also, which museum?"},
        {"role": "assistant", "content": "Try Gulbenkian."},
    ]
    r = client.post(f"{BASE}/messages", json={"session_id": "chat", "messages": more})
    assert r.status_code == 200, r.text
    assert r.json()["messages_added"] == 2

    session = client.get(f"{BASE}/sessions/chat").json()
    assert [m["content"] for m in session["messages"]] == [m["content"] for m in TRIP + more]
    listed = client.get(f"{BASE}/sessions").json()["sessions"]
    assert [s["id"] for s in listed] == ["chat"]


def test_search_finds_the_matching_session_and_hides_what_was_said_after_the_question_date(
    client: httpx.Client,
) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    add(client, "pets", PETS, "2024-06-10T09:00:00")

    r = client.get(f"{BASE}/search", params={"q": "grey cat Miso", "k": 1})
    assert r.status_code == 200
    hits = r.json()["hits"]
    assert len(hits) == 1
    assert hits[0]["session_id"] == "pets"
    assert "Miso" in hits[0]["text"]

    before = client.get(
        f"{BASE}/search", params={"q": "grey cat Miso", "question_date": "2024-05-15T00:00:00"}
    )
    assert "pets" not in {h["session_id"] for h in before.json()["hits"]}


def test_context_renders_evidence_inside_the_token_budget(client: httpx.Client) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    r = client.get(f"{BASE}/context", params={"q": "Lisbon trip", "token_budget": 300})
    assert r.status_code == 200
    body = r.json()
    assert "Lisbon" in body["text"]
    assert body["token_budget"] == 300
    assert body["token_count"] <= 300


def test_unknown_user_searches_empty_and_reads_not_found(client: httpx.Client, mem: Memory) -> None:
    assert client.get("/v1/scopes/acme/nobody/search", params={"q": "x"}).json()["hits"] == []
    r = client.get("/v1/scopes/acme/nobody/sessions/s1")
    assert r.status_code == 404
    assert error_of(r)["code"] == "not_found"
    assert mem.scopes() == []  # reading never creates a database


def test_export_then_import_reproduces_the_history_in_another_user(client: httpx.Client) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    add(client, "pets", PETS, "2024-06-10T09:00:00")
    exported = client.get(f"{BASE}/export").json()
    assert exported["format"] == "graphrecall.sessions/v1"

    r = client.post("/v1/scopes/acme/bob/import", json=exported)
    assert r.status_code == 200, r.text
    assert r.json()["messages_added"] == 4
    copy = client.get("/v1/scopes/acme/bob/export").json()
    assert copy["sessions"] == exported["sessions"]
    # importing the same document again is a no-op (message ids are kept)
    assert client.post("/v1/scopes/acme/bob/import", json=exported).json()["messages_added"] == 0


def test_delete_erases_the_user_and_only_that_user(client: httpx.Client, mem: Memory) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    client.post("/v1/scopes/acme/bob/sessions", json={"session_id": "x", "messages": PETS})

    r = client.delete(BASE)
    assert r.status_code == 200
    assert r.json() == {"erased": True}
    assert [str(s) for s in mem.scopes()] == ["acme/bob"]
    assert client.get(f"{BASE}/stats").json()["sessions"] == 0
    assert client.delete(BASE).json() == {"erased": False}


def test_validation_errors_name_the_offending_field(client: httpx.Client) -> None:
    cases: list[tuple[httpx.Response, str]] = [
        (
            client.post(
                f"{BASE}/sessions", json={"session_id": "s", "messages": [{"role": "bot", "content": "x"}]}
            ),
            "messages[0].role",
        ),
        (client.post(f"{BASE}/sessions", json={"session_id": "s", "messages": []}), "messages"),
        (client.post(f"{BASE}/sessions", json={"messages": TRIP}), "session_id"),
        (client.post(f"{BASE}/sessions", json={"session_id": "s", "messages": TRIP, "sesion": 1}), "sesion"),
        (client.post(f"{BASE}/sessions", json={"session_id": "a/b", "messages": TRIP}), "session_id"),
        (client.get(f"{BASE}/search", params={"q": "x", "k": 0}), "k"),
        (client.get(f"{BASE}/search"), "q"),
        (client.get(f"{BASE}/search", params={"q": "x", "question_date": "yesterday"}), "question_date"),
        (client.get(f"{BASE}/context", params={"q": "x", "token_budget": -5}), "token_budget"),
    ]
    for response, field in cases:
        assert response.status_code == 422, (field, response.text)
        err = error_of(response)
        assert err["code"] == "invalid_input"
        assert err["field"] == field, response.text


def test_malformed_json_is_a_400_that_says_so(client: httpx.Client) -> None:
    r = client.post(
        f"{BASE}/sessions", content=b'{"session_id": "s", ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert error_of(r)["code"] == "invalid_input"
    assert "JSON" in error_of(r)["message"]


def test_unknown_routes_and_methods_answer_in_the_error_format(client: httpx.Client) -> None:
    r = client.get("/v2/nothing")
    assert r.status_code == 404
    assert error_of(r)["code"] == "not_found"
    r = client.put(f"{BASE}/search")
    assert r.status_code == 405
    assert error_of(r)["code"] == "method_not_allowed"


def test_extraction_without_an_llm_is_refused_before_anything_is_written(
    client: httpx.Client, mem: Memory
) -> None:
    r = client.post(f"{BASE}/sessions", json={"session_id": "s", "messages": TRIP, "extract": True})
    assert r.status_code == 501
    assert error_of(r)["code"] in {"not_implemented", "not_available"}
    assert mem.stats(("acme", "alice")).messages == 0


def test_fact_routes_read_the_store(client: httpx.Client) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    r = client.get(f"{BASE}/facts", params={"limit": 5})
    assert r.status_code == 200
    assert r.json() == {"facts": []}  # nothing extracted: raw ingest only
    missing = client.get(f"{BASE}/facts/f-nope/history")
    assert missing.status_code == 404
    assert error_of(missing)["code"] == "not_found"
    r = client.post(f"{BASE}/facts/f-nope/supersede", json={"new_id": "f-other"})
    assert r.status_code == 404


class _Without:
    """A Memory as an older graphrecall would present it: some features missing."""

    def __init__(self, inner: Memory, *missing: str) -> None:
        self._inner = inner
        self._missing = set(missing)

    def __getattr__(self, name: str) -> Any:
        if name in self._missing:
            raise AttributeError(name)
        return getattr(self._inner, name)

    def add_session(self, scope: Any, messages: Any, *, session_id: str, date: Any = None) -> Any:
        return self._inner.add_session(scope, messages, session_id=session_id, date=date)


def test_features_the_library_lacks_answer_501_never_a_fake_result(mem: Memory) -> None:
    app = create_app(_Without(mem, "answer", "facts", "history", "supersede"), auth=None, insecure_local=True)  # type: ignore[arg-type]
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        responses = [
            c.post(f"{BASE}/answer", json={"question": "where am I going?"}),
            c.get(f"{BASE}/facts"),
            c.get(f"{BASE}/facts/f1/history"),
            c.post(f"{BASE}/facts/f1/supersede", json={"new_id": "f2"}),
            c.post(f"{BASE}/sessions", json={"session_id": "s", "messages": TRIP, "extract": True}),
        ]
        for r in responses:
            assert r.status_code == 501, r.text
            assert error_of(r)["code"] == "not_implemented"
        assert c.post(f"{BASE}/sessions", json={"session_id": "s", "messages": TRIP}).status_code == 200


class _Answer(BaseModel):
    answer: str
    question_date: str | None
    mode: str


def test_answer_passes_the_library_result_through(mem: Memory) -> None:
    seen: list[tuple[Any, ...]] = []

    class WithReader(_Without):
        def answer(self, scope: Any, question: str, question_date: Any = None, mode: str = "auto") -> _Answer:
            seen.append((str(scope), question, mode))
            return _Answer(answer=f"echo: {question}", question_date=str(question_date), mode=mode)

    app = create_app(WithReader(mem), auth=None, insecure_local=True)  # type: ignore[arg-type]
    with serve_in_thread(app) as url:
        r = httpx.post(
            f"{url}{BASE}/answer",
            json={"question": "where?", "question_date": "2024-06-01T12:00:00+02:00", "mode": "fast"},
        )
    assert r.status_code == 200, r.text
    assert r.json() == {"answer": "echo: where?", "question_date": "2024-06-01 10:00:00", "mode": "fast"}
    assert seen == [("acme/alice", "where?", "fast")]


def test_health_and_readiness_need_no_key(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_metrics_count_requests_by_route_template_and_ingested_messages(client: httpx.Client) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    client.get(f"{BASE}/search", params={"q": "Lisbon"})
    client.get(f"{BASE}/search", params={"q": "x", "k": 0})
    text = client.get("/metrics").text

    def value(line_start: str) -> float:
        found = [ln for ln in text.splitlines() if ln.startswith(line_start)]
        assert len(found) == 1, (line_start, text)
        return float(found[0].rsplit(" ", 1)[1])

    route = "/v1/scopes/{org}/{user}/search"
    assert value(f'graphrecall_http_requests_total{{method="GET",route="{route}",status="200"}}') == 1
    assert value(f'graphrecall_http_requests_total{{method="GET",route="{route}",status="422"}}') == 1
    assert value(f'graphrecall_http_request_duration_seconds_count{{method="GET",route="{route}"}}') == 2
    assert value("graphrecall_ingest_messages_added_total ") == 2
    assert "alice" not in text  # user ids never become label values


def test_committed_openapi_matches_the_app() -> None:
    committed = json.loads((REPO / "docs" / "openapi.json").read_text())
    assert openapi_schema() == committed, (
        "docs/openapi.json is stale: run .venv/bin/python -m graphrecall.server.openapi docs/openapi.json"
    )


def test_answer_runs_the_real_reader_over_http(mem: Memory) -> None:
    from graphrecall.llm import ScriptedLLM, Step

    mem.add_session(
        ("acme", "alice"),
        [
            {"role": "user", "content": "My sister Ana moved to Porto last month."},
            {"role": "assistant", "content": "Nice!"},
        ],
        session_id="s1",
        date="2024-03-01T10:00:00",
    )
    mem.llm = ScriptedLLM(
        [
            Step("Retrieved memory", {"verdict": "YES", "evidence_ids": ["s1@0"]}),
            Step("Memory excerpts", "NOTES:\n[s1@0] Ana moved to Porto\nANSWER: Porto.\nEVIDENCE: [s1@0]"),
        ]
    )
    app = create_app(mem, auth=None, insecure_local=True)
    with serve_in_thread(app) as url:
        r = httpx.post(
            f"{url}{BASE}/answer",
            json={"question": "Where does my sister live?", "question_date": "2024-04-01T00:00:00"},
            timeout=60,
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["text"], body["mode"], body["abstained"]) == ("Porto.", "recall", False)
    assert [c["hit_id"] for c in body["citations"]] == ["s1@0"]


def test_answer_without_any_llm_is_501_not_a_fake_answer(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    mem.llm = None
    app = create_app(mem, auth=None, insecure_local=True)
    with serve_in_thread(app) as url:
        r = httpx.post(f"{url}{BASE}/answer", json={"question": "Where does my sister live?"}, timeout=60)
    assert r.status_code == 501, r.text
    assert r.json()["error"]["code"] == "not_available"
