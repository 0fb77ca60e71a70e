"""OpenAILLM over real HTTP against a loopback fake of the Chat Completions API.

The fake behaves like the local llama.cpp server where it matters: it answers HTTP 500 to OpenAI's
``json_schema`` response_format and accepts ``json_object`` with a ``schema``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from graphrecall.llm import ChatMessage, LLMError, LLMRateLimited, ToolCall, ToolSpec

pytest.importorskip("openai")  # an optional extra; also pays the SDK import at collection

from tests.fakeserver import FakeHTTPServer, Recorded, Reply

from graphrecall.llm.openai import OpenAILLM


class City(BaseModel):
    name: str
    country: str


def completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
    }


def llama_cpp_like(req: Recorded) -> Reply:
    fmt = (req.body or {}).get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return 500, {"error": {"code": 500, "message": "response_format type json_schema is not supported"}}
    return 200, completion(json.dumps({"name": "Lisbon", "country": "Portugal"}))


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer(llama_cpp_like) as srv:
        yield srv


def make_llm(srv: FakeHTTPServer, **kw: Any) -> OpenAILLM:
    return OpenAILLM("gpt-4o-mini", base_url=srv.url + "/v1", retry_base_delay=0.001, **kw)


async def test_structured_output_falls_back_to_json_object_schema_and_remembers(
    server: FakeHTTPServer,
) -> None:
    llm = make_llm(server)

    city, _ = await llm.parse("Capital of Portugal?", City)
    assert city == City(name="Lisbon", country="Portugal")

    formats = [b["response_format"] for b in server.bodies("/chat/completions")]
    assert [f["type"] for f in formats] == ["json_schema", "json_object"]  # rejected once, then fell back
    assert formats[0]["json_schema"]["strict"] is True
    assert formats[1]["schema"] == City.model_json_schema()
    assert llm.structured_mechanism == "json_object_schema"

    await llm.parse("Capital of Spain?", City)
    later = server.bodies("/chat/completions")[2:]
    assert [b["response_format"]["type"] for b in later] == ["json_object"]  # straight to the working one


async def test_plain_json_object_is_the_last_resort() -> None:
    def only_plain_json(req: Recorded) -> Reply:
        fmt = req.body.get("response_format") or {}
        if fmt.get("type") != "json_object" or "schema" in fmt:
            return 400, {"error": {"message": f"unsupported response_format: {fmt.get('type')}"}}
        return 200, completion('{"name": "Rome", "country": "Italy"}')

    with FakeHTTPServer(only_plain_json) as srv:
        llm = make_llm(srv)
        city, _ = await llm.parse("Capital of Italy?", City)
        body = srv.bodies()[-1]

    assert city.name == "Rome"
    assert llm.structured_mechanism == "json_object"
    assert "JSON schema" in body["messages"][0]["content"]  # the schema travels in the system prompt


async def test_a_forced_mechanism_skips_probing(server: FakeHTTPServer) -> None:
    llm = make_llm(server, structured="json_object_schema")

    await llm.parse("Capital?", City)

    assert len(server.requests) == 1


async def test_rate_limit_is_retried_after_backoff() -> None:
    calls = 0

    def once_429(req: Recorded) -> Reply:
        nonlocal calls
        calls += 1
        if calls == 1:
            return 429, {"error": {"message": "Rate limit reached"}}, {"retry-after": "0"}
        return 200, completion("hello")

    with FakeHTTPServer(once_429) as srv:
        resp = await make_llm(srv).complete("hi")

    assert resp.text == "hello"
    assert calls == 2


async def test_persistent_rate_limit_gives_up_after_max_retries() -> None:
    with FakeHTTPServer(lambda req: (429, {"error": {"message": "quota"}})) as srv:
        with pytest.raises(LLMRateLimited):
            await make_llm(srv, max_retries=2).complete("hi")
        assert len(srv.requests) == 3


async def test_client_errors_are_not_retried() -> None:
    with FakeHTTPServer(lambda req: (401, {"error": {"message": "bad key"}})) as srv:
        with pytest.raises(LLMError, match="HTTP 401") as info:
            await make_llm(srv).complete("hi")
        assert len(srv.requests) == 1
    assert info.value.status == 401


async def test_tool_calls_round_trip(server: FakeHTTPServer) -> None:
    tool_call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }

    def handler(req: Recorded) -> Reply:
        last = req.body["messages"][-1]
        if last["role"] == "tool":
            return 200, completion("It is 3°C in Oslo.")
        return 200, completion(None, [tool_call])

    spec = ToolSpec.from_model(City, name="get_weather", description="Weather in a city")
    with FakeHTTPServer(handler) as srv:
        llm = make_llm(srv)
        first = await llm.complete("Weather in Oslo?", tools=[spec])
        call = first.tool_calls[0]
        messages = [
            ChatMessage.user("Weather in Oslo?"),
            ChatMessage.assistant(tool_calls=first.tool_calls),
            ChatMessage.tool(call, "3°C"),
        ]
        second = await llm.complete(messages, tools=[spec])
        sent = srv.bodies()

    assert call == ToolCall(id="call_7", name="get_weather", arguments={"city": "Oslo"})
    assert sent[0]["tools"][0]["function"]["name"] == "get_weather"
    assert sent[0]["tools"][0]["function"]["parameters"]["properties"].keys() == {"name", "country"}
    assert sent[1]["messages"][1]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert sent[1]["messages"][2] == {"role": "tool", "tool_call_id": "call_7", "content": "3°C"}
    assert second.text == "It is 3°C in Oslo."


async def test_usage_is_read_from_the_response_and_priced(server: FakeHTTPServer) -> None:
    llm = make_llm(server, structured="json_object_schema")

    _, resp = await llm.parse("Capital?", City, purpose="extract")
    await llm.complete("hi")

    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (120, 30)
    assert resp.model == "gpt-4o-mini-2024-07-18"
    total = llm.usage.total
    assert (total.calls, total.input_tokens, total.output_tokens) == (2, 240, 60)
    assert total.cost_usd == pytest.approx(2 * (120 * 0.15 + 30 * 0.60) / 1e6)
    assert llm.usage.records[0].purpose == "extract"
    assert llm.usage.records[0].latency_s > 0


async def test_placeholder_key_for_local_servers_and_no_key_in_repr(
    server: FakeHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = make_llm(server)
    await llm.complete("hi")
    assert server.requests[0].headers["authorization"].startswith("Bearer ")

    keyed = OpenAILLM("m", api_key="sk-secret-123", base_url=server.url + "/v1")
    assert "sk-secret" not in repr(keyed)


def test_sync_wrapper_talks_http(server: FakeHTTPServer) -> None:
    llm = make_llm(server, structured="json_object_schema")

    city, _ = llm.parse_sync("Capital of Portugal?", City)

    assert city.country == "Portugal"


def test_first_token_log_probabilities_are_asked_for_and_read() -> None:
    def with_logprobs(req: Recorded) -> Reply:
        body = completion("No")
        if (req.body or {}).get("logprobs"):
            alts = [
                {"token": "No", "logprob": -0.4, "bytes": None},
                {"token": "Yes", "logprob": -1.1, "bytes": None},
            ]
            body["choices"][0]["logprobs"] = {
                "content": [{"token": "No", "logprob": -0.4, "bytes": None, "top_logprobs": alts}]
            }
        return 200, body

    with FakeHTTPServer(with_logprobs) as srv:
        llm = make_llm(srv)
        resp = llm.complete_sync("Does it answer?", max_tokens=1, top_logprobs=5)
        plain = llm.complete_sync("Does it answer?")
        sent = [r.body for r in srv.requests]
    assert resp.first_token_logprobs == {"No": -0.4, "Yes": -1.1}
    assert (sent[0]["logprobs"], sent[0]["top_logprobs"]) == (True, 5)
    assert plain.first_token_logprobs == {} and "logprobs" not in sent[1]
