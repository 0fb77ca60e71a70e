"""OpenTelemetry traces (graphrecall.telemetry): one trace per request, with the search's stages, the embedding,
the flush, the extraction and its LLM calls under it; the scope hashed; nothing when not asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graphrecall import Memory, cli, telemetry
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.server import create_app
from graphrecall.server.testing import serve_in_thread

USER = "ann-private-user-id"
PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use(provider)
    try:
        yield exporter
    finally:
        telemetry.use(False)
        provider.shutdown()


def _named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def _no_user_id(spans: list[ReadableSpan]) -> None:
    for s in spans:
        assert USER not in s.name
        for value in (s.attributes or {}).values():
            assert USER not in str(value), (s.name, value)


def test_a_search_over_http_is_one_trace_under_the_callers(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    with (
        Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem,
        serve_in_thread(create_app(mem, auth=None, insecure_local=True, warm=False)) as url,
    ):
        base = f"{url}/v1/scopes/acme/{USER}"
        r = httpx.post(f"{base}/sessions", json={"session_id": "s1", "messages": [
            {"role": "user", "content": "My cat Miso is twelve."}, {"role": "assistant", "content": "Noted."}]})  # fmt: skip
        assert r.status_code == 200, r.text
        mem.flush()
        spans.clear()
        r = httpx.get(
            f"{base}/search",
            params={"query": "how old is my cat"},
            headers={"traceparent": f"00-{PARENT_TRACE}-00f067aa0ba902b7-01"},
        )
        assert r.status_code == 200 and r.json()["hits"], r.text
    done = list(spans.get_finished_spans())
    [server] = _named(done, "GET ")
    assert server.name == "GET /v1/scopes/{org}/{user}/search"
    assert format(server.context.trace_id, "032x") == PARENT_TRACE  # the caller's trace continues here
    assert server.attributes is not None and server.attributes["http.response.status_code"] == 200
    [search] = [s for s in done if s.name == "graphrecall.search"]
    assert search.parent is not None and search.parent.span_id == server.context.span_id
    assert search.attributes is not None and search.attributes["graphrecall.org"] == "acme"
    assert len(str(search.attributes["graphrecall.scope_hash"])) == 16
    stages = _named(done, "graphrecall.search.")
    assert {"graphrecall.search.embed_query"} <= {s.name for s in stages}
    assert len(stages) >= 3
    assert all(s.context.trace_id == server.context.trace_id for s in done)  # worker threads included
    _no_user_id(done)


def test_ingest_flush_and_extraction_with_its_llm_calls(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    llm = ScriptedLLM(ordered=False)
    llm.add("Session id: s1\n", {"facts": [{"text": "The user has a cat.", "kind": "attribute", "message_ids": ["m1"]}],
                                 "events": []})  # fmt: skip
    with Memory.open(
        tmp_path / "store",
        embedder=HashingEmbedder(64),
        llm=llm,
        extraction=ExtractionConfig(background=False),
    ) as mem:
        mem.add_session(
            ("acme", USER), [{"id": "m1", "role": "user", "content": "I have a cat."}], session_id="s1"
        )
        mem.flush()
        mem.extract(("acme", USER), session_id="s1")
    done = list(spans.get_finished_spans())
    assert _named(done, "graphrecall.embed") and _named(done, "graphrecall.flush")
    [job] = _named(done, "graphrecall.extraction.session")
    calls = _named(done, "graphrecall.llm.")
    assert calls and all(
        c.context.trace_id == job.context.trace_id for c in calls
    )  # across the LLM loop's thread
    call = calls[0]
    assert call.attributes is not None and call.attributes["gen_ai.request.model"] == llm.model
    assert "gen_ai.usage.input_tokens" in call.attributes
    _no_user_id(done)


def test_a_cli_command_is_a_span(
    tmp_path: Path, spans: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["stats", "--root", str(tmp_path), "--embedder", "hashing", "--json"]) == 0
    assert [s.name for s in spans.get_finished_spans()] == ["graphrecall.cli stats"]


def test_tracing_is_off_unless_the_environment_asks() -> None:
    assert telemetry.wanted_exporter({}) is None
    assert telemetry.wanted_exporter({"OTEL_SERVICE_NAME": "x"}) is None
    assert telemetry.wanted_exporter({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) == "otlp"
    assert telemetry.wanted_exporter({"OTEL_TRACES_EXPORTER": "console"}) == "console"
    assert (
        telemetry.wanted_exporter({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
        is None
    )
    assert telemetry.wanted_exporter({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}) is None
    assert not telemetry.enabled()
    with telemetry.span("graphrecall.nothing") as s:
        assert s is telemetry.NO_SPAN


def test_the_console_exporter_from_the_standard_variables(tmp_path: Path) -> None:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "memory-test"}
    out = subprocess.run(
        [sys.executable, "-m", "graphrecall", "stats", "--root", str(tmp_path), "--embedder", "hashing"],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    ).stdout  # fmt: skip
    spans = [json.loads(chunk) for chunk in _json_objects(out)]
    [cmd] = [s for s in spans if s.get("name") == "graphrecall.cli stats"]
    assert cmd["resource"]["attributes"]["service.name"] == "memory-test"


def _json_objects(text: str) -> list[str]:
    """The top-level JSON objects the console exporter printed among the command's own output."""
    objects, depth, start = [], 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                objects.append(text[start : i + 1])
    return [o for o in objects if '"trace_id"' in o or '"context"' in o]


def test_an_otlp_endpoint_receives_the_commands_trace_over_http(tmp_path: Path) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append((self.path, self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}"}
        env.pop("OTEL_TRACES_EXPORTER", None)
        subprocess.run(
            [sys.executable, "-m", "graphrecall", "stats", "--root", str(tmp_path), "--embedder", "hashing"],
            capture_output=True, text=True, env=env, timeout=120, check=True,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    [(path, body)] = received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    names = [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert names == ["graphrecall.cli stats"]
