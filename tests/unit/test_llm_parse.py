"""Structured output: validation, the single repair retry and StructuredOutputError (shared by all providers)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from graphrecall.llm import ScriptedLLM, Step, StructuredOutputError
from graphrecall.llm.base import validate_json


class Person(BaseModel):
    name: str
    age: int = Field(ge=0)


async def test_valid_json_is_returned_without_repair() -> None:
    llm = ScriptedLLM([(None, '{"name": "Ana", "age": 31}')])

    person, resp = await llm.parse("Who?", Person)

    assert person == Person(name="Ana", age=31)
    assert len(llm.calls) == 1
    assert resp.usage.calls == 1


async def test_invalid_answer_is_repaired_once_with_the_validation_error() -> None:
    llm = ScriptedLLM(
        [
            (None, '{"name": "Ana", "age": "thirty"}'),
            (None, '{"name": "Ana", "age": 30}'),
        ]
    )

    person, resp = await llm.parse("Who is Ana?", Person)

    assert person.age == 30
    repair = llm.calls[1].messages
    assert repair[0].content == "Who is Ana?"  # the original prompt is kept
    assert repair[1].role == "assistant" and "thirty" in repair[1].content  # the bad answer is shown back
    assert repair[2].role == "user" and "age" in repair[2].content and "Person" in repair[2].content
    assert resp.usage.calls == 2  # the returned usage covers both attempts
    assert llm.usage.total.calls == 2


async def test_a_second_invalid_answer_raises_structured_output_error() -> None:
    llm = ScriptedLLM([(None, "not json at all"), (None, '{"name": "Ana", "age": -1}')])

    with pytest.raises(StructuredOutputError) as info:
        await llm.parse("Who?", Person)

    assert info.value.schema == "Person"
    assert "age" in info.value.error
    assert "Person" in str(info.value)
    assert len(llm.calls) == 2  # exactly one repair, no loop


async def test_repair_prompt_can_be_matched_by_a_script() -> None:
    llm = ScriptedLLM(
        [Step(None, "{}"), Step("not a valid Person", '{"name": "B", "age": 2}', where="last_user")]
    )

    person, _ = await llm.parse("Who?", Person)

    assert person.name == "B"


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "A", "age": 1}\n```',
        'Sure! Here it is: {"name": "A", "age": 1} Hope that helps.',
        '  {"name": "A", "age": 1}\n',
    ],
)
def test_json_wrapped_in_prose_or_fences_is_accepted(text: str) -> None:
    assert validate_json(Person, text) == Person(name="A", age=1)


def test_schema_errors_are_preferred_over_json_syntax_errors() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        validate_json(Person, 'Here: {"name": "A"}')

    assert info.value.errors()[0]["type"] == "missing"
