"""ScriptedLLM: the deterministic model double that every LLM-dependent test relies on."""

from __future__ import annotations

import inspect
import re
import threading

import pytest
from pydantic import BaseModel

from graphrecall.llm import (
    LLM,
    ChatMessage,
    LLMRateLimited,
    ScriptedLLM,
    Step,
    ToolCall,
    ToolSpec,
    UnexpectedPrompt,
)


class Answer(BaseModel):
    value: int


async def test_replays_steps_in_order_and_records_what_was_sent() -> None:
    llm = ScriptedLLM([("capital of France", "Paris"), ("capital of Italy", "Rome")])

    first = await llm.complete("What is the capital of France?")
    second = await llm.complete([ChatMessage.system("Be brief."), ChatMessage.user("capital of Italy?")])

    assert (first.text, second.text) == ("Paris", "Rome")
    assert [c.step for c in llm.calls] == [0, 1]
    assert llm.calls[1].messages[0].content == "Be brief."
    assert llm.calls[1].last_user == "capital of Italy?"
    assert llm.remaining == 0
    llm.assert_done()


async def test_a_prompt_that_does_not_match_the_next_step_raises_with_its_beginning() -> None:
    llm = ScriptedLLM([("weather", "sunny")])

    with pytest.raises(UnexpectedPrompt, match=r"does not match step 0 'weather'.*Tell me a joke"):
        await llm.complete("Tell me a joke")


async def test_an_exhausted_script_raises() -> None:
    llm = ScriptedLLM([(None, "only answer")])
    await llm.complete("one")

    with pytest.raises(UnexpectedPrompt, match="exhausted"):
        await llm.complete("two")


async def test_unused_steps_are_reported() -> None:
    llm = ScriptedLLM([("a", "x"), ("b", "y")])
    await llm.complete("a")

    with pytest.raises(AssertionError, match="1 step"):
        llm.assert_done()


async def test_unordered_rules_answer_with_the_first_match_and_are_reusable() -> None:
    llm = ScriptedLLM(
        [
            Step(re.compile(r"\bhello\b"), "hi", where="last_user"),
            Step("bye", "goodbye", times=1),
        ],
        ordered=False,
    )

    assert (await llm.complete("bye now")).text == "goodbye"
    assert (await llm.complete("hello there")).text == "hi"
    assert (await llm.complete("hello again")).text == "hi"
    with pytest.raises(UnexpectedPrompt, match="no rule matches"):
        await llm.complete("bye again")  # the "bye" rule was limited to one use


async def test_last_user_matcher_ignores_the_system_prompt() -> None:
    llm = ScriptedLLM([Step("secret", "found", where="last_user")])

    with pytest.raises(UnexpectedPrompt):
        await llm.complete([ChatMessage.system("secret"), ChatMessage.user("nothing here")])


async def test_callable_matchers_and_replies() -> None:
    llm = ScriptedLLM([(lambda msgs: len(msgs) == 2, lambda msgs: f"{len(msgs)} messages")])

    resp = await llm.complete([ChatMessage.system("s"), ChatMessage.user("u")])

    assert resp.text == "2 messages"


async def test_replies_can_be_tool_calls_or_exceptions() -> None:
    call = ToolCall(id="c1", name="lookup", arguments={"q": "x"})
    llm = ScriptedLLM([(None, [call]), (None, LLMRateLimited("slow down"))])
    tool = ToolSpec(name="lookup", description="find things")

    resp = await llm.complete("use the tool", tools=[tool])

    assert resp.tool_calls == [call]
    assert llm.calls[0].tools == [tool]
    with pytest.raises(LLMRateLimited):
        await llm.complete("again")


async def test_parse_accepts_dicts_and_models_as_replies() -> None:
    llm = ScriptedLLM([(None, {"value": 1}), (None, Answer(value=2))])

    first, _ = await llm.parse("one", Answer)
    second, _ = await llm.parse("two", Answer)

    assert (first.value, second.value) == (1, 2)
    assert [c.kind for c in llm.calls] == ["parse", "parse"]
    assert llm.calls[0].schema == "Answer"


async def test_token_counts_are_approximated_from_text_length() -> None:
    llm = ScriptedLLM([(None, "x" * 40)])

    resp = await llm.complete("y" * 400)

    assert resp.usage.output_tokens == 10
    assert 100 <= resp.usage.input_tokens <= 105  # "[user] " prefix included
    assert llm.usage.total.calls == 1


def test_satisfies_the_llm_protocol_with_the_same_signatures() -> None:
    """``isinstance`` against a runtime-checkable Protocol only checks that the names exist; a scripted model whose
    ``complete`` lost a parameter would pass it and then fail the code under test, so compare the signatures."""
    members = [n for n in dir(LLM) if not n.startswith("_") and callable(getattr(LLM, n))]
    assert {"complete", "parse"} <= set(members)
    for name in members:
        want = inspect.signature(getattr(LLM, name))
        got = inspect.signature(getattr(ScriptedLLM, name))
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
            (p.name, p.kind, p.default) for p in want.parameters.values()
        ], name


def test_sync_helpers_work_from_a_plain_thread() -> None:
    llm = ScriptedLLM([(None, "a"), (None, {"value": 3})])
    results: list[object] = []

    def worker() -> None:
        results.append(llm.complete_sync("hi").text)
        results.append(llm.parse_sync("num", Answer)[0].value)

    t = threading.Thread(target=worker)
    t.start()
    t.join(timeout=5)

    assert results == ["a", 3]


def test_sync_helpers_propagate_errors() -> None:
    llm = ScriptedLLM([])

    with pytest.raises(UnexpectedPrompt):
        llm.complete_sync("anything")
