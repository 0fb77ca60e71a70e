"""The HTTP API over real loopback HTTP and a real Kuzu store: what each endpoint does and how it fails.

Each test states one behaviour a client (a Spring service, the Java example, curl) relies on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from graphrecall import Answer, Memory
from graphrecall.embed import HashingEmbedder
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

    r = client.get(f"{BASE}/search", params={"query": "grey cat Miso", "k": 1})
    assert r.status_code == 200
    hits = r.json()["hits"]
    assert len(hits) == 1
    assert hits[0]["session_id"] == "pets"
    assert "Miso" in hits[0]["text"]

    before = client.get(
        f"{BASE}/search", params={"query": "grey cat Miso", "question_date": "2024-05-15T00:00:00"}
    )
    assert "pets" not in {h["session_id"] for h in before.json()["hits"]}


def test_context_renders_evidence_inside_the_token_budget(client: httpx.Client) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    r = client.get(f"{BASE}/context", params={"query": "Lisbon trip", "token_budget": 300})
    assert r.status_code == 200
    body = r.json()
    assert "Lisbon" in body["text"]
    assert body["token_budget"] == 300
    assert body["token_count"] <= 300


def test_unknown_user_searches_empty_and_reads_not_found(client: httpx.Client, mem: Memory) -> None:
    assert client.get("/v1/scopes/acme/nobody/search", params={"query": "x"}).json()["hits"] == []
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
    gone = client.get(f"{BASE}/stats")  # a user who holds nothing: not found, not a page of zeros
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
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
        (client.get(f"{BASE}/search", params={"query": "x", "k": 0}), "k"),
        (client.get(f"{BASE}/search"), "query"),
        (client.get(f"{BASE}/search", params={"query": "x", "question_date": "yesterday"}), "question_date"),
        (client.get(f"{BASE}/context", params={"query": "x", "token_budget": -5}), "token_budget"),
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
    assert r.status_code == 409
    assert error_of(r)["code"] == "not_available"
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


class RecordingReader(Memory):
    """A Memory whose ``answer`` records what the route passed and returns a real ``Answer`` built from a search
    (the real reader over HTTP is tested below with a scripted LLM)."""

    calls: list[dict[str, Any]]

    def answer(  # type: ignore[override]
        self,
        scope: Any,
        question: str,
        question_date: Any = None,
        mode: Any = "auto",
        llm: Any = None,
        *,
        max_tool_steps: int = 4,
        tools: Any = "auto",
        token_budget: int | None = None,
        also: Any = (),
    ) -> Answer:
        assert list(also) == [], also  # shared scopes: tests/integration/test_shared_scopes.py
        self.calls.append(
            {
                "question_date": question_date,
                "mode": mode,
                "tools": tools,
                "token_budget": token_budget,
                "max_tool_steps": max_tool_steps,
            }
        )
        best = self.search(scope, question, 1)
        return Answer(question=question, text=best[0].text, mode="recall", question_date=question_date)


def test_answer_takes_every_reader_parameter_and_returns_a_typed_answer(tmp_path: Path) -> None:
    with RecordingReader.open(tmp_path / "r", embedder=HashingEmbedder(64)) as mem:
        mem.calls = []
        with (
            serve_in_thread(create_app(mem, auth=None, insecure_local=True)) as url,
            httpx.Client(base_url=url, timeout=60) as c,
        ):
            add(c, "pets", PETS, "2024-05-01T10:00:00")
            r = c.post(
                f"{BASE}/answer",
                json={
                    "question": "what is my cat called?",
                    "question_date": "2024-06-01T12:00:00+02:00",
                    "mode": "synthesis",
                    "tools": "text",
                    "token_budget": 900,
                    "max_tool_steps": 2,
                },
            )
            bad_mode = c.post(f"{BASE}/answer", json={"question": "q?", "mode": "fast"})
            bad_budget = c.post(f"{BASE}/answer", json={"question": "q?", "token_budget": 10})
            unknown = c.post(f"{BASE}/answer", json={"question": "q?", "temperature": 0})
            omitted = c.post(f"{BASE}/answer", json={"question": "what is my cat called?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert "Miso" in body["text"] and body["question_date"] == "2024-06-01T10:00:00Z"
    assert set(body) >= {"question", "text", "mode", "abstained", "citations", "tool_trace", "stages"}
    assert mem.calls[0] == {
        "question_date": datetime(2024, 6, 1, 10),  # UTC, naive like every stored date
        "mode": "synthesis",
        "tools": "text",
        "token_budget": 900,
        "max_tool_steps": 2,
    }
    # Omitted parameters reach Memory as its own defaults; question_date as None (Memory decides "now").
    assert omitted.status_code == 200, omitted.text
    assert mem.calls[1] == {
        "question_date": None,
        "mode": "auto",
        "tools": "auto",
        "token_budget": None,
        "max_tool_steps": 4,
    }
    for response, field in ((bad_mode, "mode"), (bad_budget, "token_budget"), (unknown, "temperature")):
        assert response.status_code == 422, response.text
        assert error_of(response)["field"] == field
    assert len(mem.calls) == 2  # rejected requests never reached the reader


def test_answer_is_documented_with_its_response_model() -> None:
    schema = openapi_schema()
    ok = schema["paths"]["/v1/scopes/{org}/{user}/answer"]["post"]["responses"]["200"]
    assert ok["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Answer"}
    assert schema["components"]["schemas"]["AnswerParams"]["properties"]["mode"]["enum"] == [
        "auto",
        "recall",
        "synthesis",
    ]


def test_health_and_readiness_need_no_key(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_metrics_count_requests_by_route_template_and_ingested_messages(client: httpx.Client) -> None:
    add(client, "trip", TRIP, "2024-05-01T10:00:00")
    client.get(f"{BASE}/search", params={"query": "Lisbon"})
    client.get(f"{BASE}/search", params={"query": "x", "k": 0})
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


def test_metrics_label_requests_refused_before_routing_with_their_route(mem: Memory) -> None:
    app = create_app(mem, auth=None, insecure_local=True, max_body_bytes=200)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        too_big = c.post(f"{BASE}/sessions", json={"session_id": "s", "messages": TRIP * 5})
        lost = c.get("/v1/nothing/here")
        wrong_method = c.put(f"{BASE}/search")
        text = c.get("/metrics").text
    assert (too_big.status_code, lost.status_code, wrong_method.status_code) == (413, 404, 405)
    for line in (
        'method="POST",route="/v1/scopes/{org}/{user}/sessions",status="413"',
        'method="GET",route="<unmatched>",status="404"',
        'method="PUT",route="/v1/scopes/{org}/{user}/search",status="405"',
    ):
        assert f"graphrecall_http_requests_total{{{line}}} 1" in text, text


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


def test_answer_without_any_llm_is_409_not_a_fake_answer(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    mem.llm = None
    app = create_app(mem, auth=None, insecure_local=True)
    with serve_in_thread(app) as url:
        r = httpx.post(f"{url}{BASE}/answer", json={"question": "Where does my sister live?"}, timeout=60)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["code"] == "not_available"


def test_extract_true_answers_202_with_the_queued_job_and_the_session_shows_its_status(
    tmp_path: Path,
) -> None:
    from graphrecall.llm import ScriptedLLM

    llm = ScriptedLLM(ordered=False).add(
        "Session id: s\n",
        {"facts": [{"text": "The user flies to Lisbon", "kind": "plan", "message_ids": ["m1"]}]},
    )
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), llm=llm) as memory:
        app = create_app(memory, auth=None, insecure_local=True)
        with serve_in_thread(app) as url, httpx.Client(base_url=url) as http:
            r = http.post(f"{BASE}/sessions", json={"session_id": "s", "messages": TRIP, "extract": True})
            assert r.status_code == 202, r.text
            job = r.json()["extraction_job"]
            assert (job["session_id"], job["status"]) == ("s", "pending")
            assert memory.wait_for_extraction(timeout=60)
            sessions = http.get(f"{BASE}/sessions").json()
            assert [(s["id"], s["extract_status"]) for s in sessions["sessions"]] == [("s", "done")]
            assert [f["text"] for f in http.get(f"{BASE}/facts").json()["facts"]] == [
                "The user flies to Lisbon"
            ]


def test_a_misspelled_user_is_not_found_naming_the_closest_users_of_that_org_only(
    client: httpx.Client, mem: Memory
) -> None:
    """Inspection routes answer a user who holds nothing with 404 and the organisation's closest users (a typo is
    the usual cause), never with a page of zeros; recall routes answer empty (a new user's first turn reads first)."""
    say = [{"role": "user", "content": "hello"}]
    mem.add_session(("acme", "alexandra"), say, session_id="s1")
    mem.add_session(("globex", "alexandre"), say, session_id="s1")
    for path in ("stats", "sessions", "facts", "entities", "events", "export"):
        r = client.get(f"/v1/scopes/acme/alexandrq/{path}")
        assert r.status_code == 404, (path, r.text)
        message = r.json()["error"]["message"]
        assert "acme/alexandra" in message and "globex" not in message, message
    assert client.get("/v1/scopes/acme/alexandrq/search", params={"query": "hello"}).json()["hits"] == []
    assert client.get("/v1/scopes/acme/alexandrq/profile").status_code == 200
