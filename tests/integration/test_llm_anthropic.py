"""AnthropicLLM over real HTTP against a loopback fake of the Messages API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from graphrecall.llm import ChatMessage, StructuredOutputError, ToolCall, ToolSpec
from graphrecall.llm.anthropic import AnthropicLLM

pytest.importorskip("anthropic")  # an optional extra; also pays the SDK import at collection

from tests.fakeserver import FakeHTTPServer, Recorded, Reply


class Mood(BaseModel):
    label: str
    score: float


def message(*blocks: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-haiku-20241022",
        "content": list(blocks),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 200, "output_tokens": 40},
    }


def handler(req: Recorded) -> Reply:
    body = req.body
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool":
        return 200, message(
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": choice["name"],
                "input": {"label": "calm", "score": 0.8},
            },
            stop="tool_use",
        )
    if body["messages"][-1]["content"][0]["type"] == "tool_result":
        return 200, message({"type": "text", "text": "Done."})
    if body.get("tools"):
        return 200, message(
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "tea"}},
            stop="tool_use",
        )
    return 200, message({"type": "text", "text": "Hello!"})


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer(handler) as srv:
        yield srv


def make_llm(srv: FakeHTTPServer, **kw: Any) -> AnthropicLLM:
    return AnthropicLLM(
        "claude-3-5-haiku-latest", api_key="sk-ant-test", base_url=srv.url, retry_base_delay=0.001, **kw
    )


async def test_structured_output_is_a_forced_tool_call(server: FakeHTTPServer) -> None:
    llm = make_llm(server)

    mood, resp = await llm.parse(
        [ChatMessage.system("You rate moods."), ChatMessage.user("I feel fine")], Mood
    )

    assert mood == Mood(label="calm", score=0.8)
    sent = server.bodies("/v1/messages")[0]
    assert sent["system"] == "You rate moods."
    assert [m["role"] for m in sent["messages"]] == ["user"]
    assert sent["tool_choice"] == {"type": "tool", "name": "Mood"}
    assert sent["tools"][0]["input_schema"] == Mood.model_json_schema()
    assert sent["max_tokens"] == 4096
    headers = server.requests[0].headers
    assert "sk-ant-test" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (200, 40)
    assert resp.usage.cost_usd == pytest.approx((200 * 0.80 + 40 * 4.00) / 1e6)


async def test_tool_use_and_tool_results_map_to_content_blocks(server: FakeHTTPServer) -> None:
    llm = make_llm(server)
    spec = ToolSpec(name="lookup", description="search", parameters={"type": "object", "properties": {}})

    first = await llm.complete("Find tea", tools=[spec], max_tokens=50)
    call = first.tool_calls[0]
    second = await llm.complete(
        [
            ChatMessage.user("Find tea"),
            ChatMessage.assistant(first.text, [call]),
            ChatMessage.tool(call, "green"),
        ],
        tools=[spec],
    )
    sent = server.bodies()

    assert first.text == "Let me check."
    assert call == ToolCall(id="toolu_9", name="lookup", arguments={"q": "tea"})
    assert sent[0]["max_tokens"] == 50
    assert sent[0]["tools"] == [{"name": "lookup", "description": "search", "input_schema": spec.parameters}]
    assert sent[1]["messages"][1]["content"] == [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "tea"}},
    ]
    assert sent[1]["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "green"}],
    }
    assert second.text == "Done."


async def test_consecutive_same_role_messages_are_merged(server: FakeHTTPServer) -> None:
    await make_llm(server).complete([ChatMessage.user("a"), ChatMessage.user("b")])

    sent = server.bodies()[0]["messages"]
    assert sent == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


async def test_invalid_tool_input_goes_through_the_repair_retry() -> None:
    def bad(req: Recorded) -> Reply:
        return 200, message(
            {"type": "tool_use", "id": "t", "name": "Mood", "input": {"label": "x"}}, stop="tool_use"
        )

    with FakeHTTPServer(bad) as srv:
        with pytest.raises(StructuredOutputError, match="score"):
            await make_llm(srv).parse("mood?", Mood)
        repair = srv.bodies()[1]["messages"]

    assert len(srv.requests) == 2
    assert repair[-1]["role"] == "user" and "score" in repair[-1]["content"][0]["text"]


async def test_overloaded_529_is_retried() -> None:
    calls = 0

    def flaky(req: Recorded) -> Reply:
        nonlocal calls
        calls += 1
        if calls == 1:
            return 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return handler(req)

    with FakeHTTPServer(flaky) as srv:
        resp = await make_llm(srv).complete("hi")

    assert resp.text == "Hello!" and calls == 2
