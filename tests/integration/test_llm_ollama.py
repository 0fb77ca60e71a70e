"""OllamaLLM over real HTTP against a loopback fake of Ollama's /api/chat."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from pydantic import BaseModel

from graphrecall.llm import ChatMessage, LLMError, ToolSpec

pytest.importorskip("ollama")  # an optional extra; also pays the SDK import at collection

from tests.fakeserver import FakeHTTPServer, Recorded, Reply

from graphrecall.llm.ollama import OllamaLLM


class Pet(BaseModel):
    name: str
    species: str


def chat(content: str = "", tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return {
        "model": "llama3.1",
        "created_at": "2024-01-01T00:00:00Z",
        "message": msg,
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 50,
        "eval_count": 12,
    }


def with_logprobs(reply: dict[str, Any], first: list[tuple[str, float]]) -> dict[str, Any]:
    """``reply`` with Ollama's ``logprobs``: the first token is the first pair, its alternatives all of them."""
    token, logprob = first[0]
    alts = [{"token": t, "logprob": lp} for t, lp in first]
    return {**reply, "logprobs": [{"token": token, "logprob": logprob, "top_logprobs": alts}]}


def make_llm(srv: FakeHTTPServer) -> OllamaLLM:
    return OllamaLLM("llama3.1", host=srv.url, retry_base_delay=0.001)


async def test_structured_output_sends_the_schema_as_format() -> None:
    with FakeHTTPServer(lambda req: (200, chat('{"name": "Rex", "species": "dog"}'))) as srv:
        pet, resp = await make_llm(srv).parse("My dog Rex", Pet, temperature=0.2, max_tokens=64)
        sent = srv.bodies("/api/chat")[0]

    assert pet == Pet(name="Rex", species="dog")
    assert sent["format"] == Pet.model_json_schema()
    assert sent["options"] == {"temperature": 0.2, "num_predict": 64}
    assert sent["stream"] is False
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.cost_usd) == (50, 12, 0.0)


async def test_tool_calls_get_synthetic_ids_and_results_carry_the_tool_name() -> None:
    def handler(req: Recorded) -> Reply:
        if req.body["messages"][-1]["role"] == "tool":
            return 200, chat("It is sunny.")
        return 200, chat(tool_calls=[{"function": {"name": "weather", "arguments": {"city": "Rome"}}}])

    spec = ToolSpec(name="weather", description="forecast", parameters={"type": "object", "properties": {}})
    with FakeHTTPServer(handler) as srv:
        llm = make_llm(srv)
        first = await llm.complete("Weather in Rome?", tools=[spec])
        call = first.tool_calls[0]
        second = await llm.complete(
            [
                ChatMessage.user("Weather in Rome?"),
                ChatMessage.assistant(tool_calls=[call]),
                ChatMessage.tool(call, "sun"),
            ]
        )
        sent = srv.bodies()

    assert (call.id, call.name, call.arguments) == ("call_0", "weather", {"city": "Rome"})
    assert sent[0]["tools"][0]["function"]["name"] == "weather"
    assert sent[1]["messages"][1]["tool_calls"] == [
        {"function": {"name": "weather", "arguments": {"city": "Rome"}}}
    ]
    assert sent[1]["messages"][2] == {"role": "tool", "content": "sun", "tool_name": "weather"}
    assert second.text == "It is sunny."


async def test_server_errors_are_retried_and_missing_models_are_not() -> None:
    calls = 0

    def handler(req: Recorded) -> Reply:
        nonlocal calls
        calls += 1
        if req.body["model"] == "missing":
            return 404, {"error": "model 'missing' not found"}
        return (503, {"error": "loading"}) if calls == 1 else (200, chat("ok"))

    with FakeHTTPServer(handler) as srv:
        assert (await make_llm(srv).complete("hi")).text == "ok"
        assert calls == 2
        with pytest.raises(LLMError, match="not found"):
            await OllamaLLM("missing", host=srv.url, retry_base_delay=0.001).complete("hi")
        assert calls == 3


async def test_log_probabilities_are_asked_for_and_read_as_the_first_tokens_alternatives() -> None:
    reply = with_logprobs(chat("No"), [("No", -0.4), ("Yes", -1.2), ("no", -3.0)])
    with FakeHTTPServer(lambda req: (200, reply)) as srv:
        llm = make_llm(srv)
        resp = await llm.complete("Does the text answer the question?", max_tokens=1, top_logprobs=5)
        plain = await llm.complete("Hello")
        sent = srv.bodies("/api/chat")

    assert (sent[0]["logprobs"], sent[0]["top_logprobs"]) == (True, 5)
    assert "logprobs" not in sent[1] and "top_logprobs" not in sent[1]
    assert resp.text == "No"
    assert resp.first_token_logprobs == {"No": -0.4, "Yes": -1.2, "no": -3.0}
    assert plain.first_token_logprobs == {"No": -0.4, "Yes": -1.2, "no": -3.0}  # what the server sent is read


async def test_a_server_that_sends_no_log_probabilities_gives_none() -> None:
    with FakeHTTPServer(lambda req: (200, chat("yes"))) as srv:
        resp = await make_llm(srv).complete("q", top_logprobs=5)
    assert resp.text == "yes" and resp.first_token_logprobs == {}


async def test_the_llm_reranker_reads_ollamas_probabilities() -> None:
    from graphrecall.retrieve.llm_rerank import LLMReranker

    def handler(req: Recorded) -> Reply:
        named = "Miso" in req.body["messages"][-1]["content"]
        first = [("No", -0.9), ("Yes", -0.5)] if named else [("No", -0.1), ("Yes", -2.5)]
        return 200, with_logprobs(chat(first[0][0]), first)

    with FakeHTTPServer(handler) as srv:
        scores = await asyncio.to_thread(
            LLMReranker(make_llm(srv)).score, "what's my cat called?", ["I named her Miso", "risotto"]
        )
    assert scores[0] > 0.5 > scores[1]
    assert scores[1] == pytest.approx(math.exp(-2.5) / (math.exp(-2.5) + math.exp(-0.1)))
