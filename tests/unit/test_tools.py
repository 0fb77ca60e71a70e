"""Reader tools without a model: exact date arithmetic (property-based against a day-count oracle), argument
validation returned as error results, and parsing of the JSON text protocol."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from graphrecall.llm import ToolSpec
from graphrecall.models import Round
from graphrecall.read.access import MemoryAccess
from graphrecall.read.tools import (
    READ_CHARS,
    TOOL_ARGS,
    DateMathArgs,
    ToolBox,
    date_math,
    parse_text_tool_calls,
    text_protocol_instructions,
    tool_specs,
)

dates = st.dates(min_value=date(1900, 1, 1), max_value=date(2200, 12, 31))


@given(dates, dates)
def test_days_between_equals_the_ordinal_difference(a: date, b: date) -> None:
    out = date_math(DateMathArgs(op="days_between", date=a.isoformat(), other_date=b.isoformat()))
    assert out["signed_days"] == b.toordinal() - a.toordinal()
    assert out["days"] == abs(b.toordinal() - a.toordinal())


@given(dates, st.integers(min_value=-20000, max_value=20000))
def test_add_days_round_trips_with_days_between(d: date, n: int) -> None:
    try:
        expected = d + timedelta(days=n)
    except OverflowError:
        return
    added = date_math(DateMathArgs(op="add_days", date=d.isoformat(), days=n))
    assert added["date"] == expected.isoformat()
    back = date_math(DateMathArgs(op="days_between", date=d.isoformat(), other_date=added["date"]))
    assert back["signed_days"] == n


@given(dates)
def test_weekday_matches_the_ordinal_cycle(d: date) -> None:
    names = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    assert (
        date_math(DateMathArgs(op="weekday", date=d.isoformat()))["weekday"] == names[(d.toordinal() - 1) % 7]
    )


def test_longmemeval_style_dates_are_accepted() -> None:
    out = date_math(DateMathArgs(op="days_between", date="2023/05/20 (Sat) 07:47", other_date="2023-06-01"))
    assert out["days"] == 12


class NoMemory:
    """An access object with nothing in it: tools that need memory see an empty store."""

    question_date = None
    has_extracted = False

    def search(self, *a: object, **k: object) -> list[object]:
        return []

    def rounds_between(self, *a: object, **k: object) -> list[object]:
        return []

    def events_between(self, *a: object, **k: object) -> list[object]:
        return []

    def facts(self, *a: object, **k: object) -> list[object]:
        return []

    def rounds(self, *a: object, **k: object) -> list[object]:
        return []


def box() -> ToolBox:
    access: MemoryAccess = NoMemory()  # type: ignore[assignment]
    return ToolBox(access)


def test_bad_arguments_come_back_as_error_results_not_exceptions() -> None:
    cases = {
        ("date_math", '{"op": "fortnight", "date": "2024-01-01"}'): "op",
        ("date_math", '{"op": "add_days", "date": "2024-01-01"}'): "needs 'days'",
        (
            "date_math",
            '{"op": "days_between", "date": "yesterday-ish", "other_date": "2024-01-01"}',
        ): "not a date",
        ("timeline", '{"start": "2024-02-01", "end": "2024-01-01"}'): "before start",
        ("search_memory", '{"query": "  "}'): "must not be empty",
        ("search_memory", '{"query": "x", "k": 500}'): "k",
        ("current_facts", "{}"): "pass 'query'",
        ("read_round", '{"id": "s@0"}'): "no round 's@0'",
        ("read_round", '{"id": "s@0", "offset": -1}'): "offset",
        ("nope", "{}"): "unknown tool",
    }
    for (name, args), fragment in cases.items():
        result = box().run(name, json.loads(args))
        assert result.error is not None and fragment in result.error, (name, result.error)
        assert json.loads(result.content) == {"error": result.error}


def test_every_tool_has_a_spec_with_its_argument_schema() -> None:
    specs = {s.name: s for s in tool_specs()}
    assert set(specs) == set(TOOL_ARGS) == {
        "search_memory", "timeline", "date_math", "current_facts", "read_round"
    }  # fmt: skip
    assert isinstance(specs["date_math"], ToolSpec)
    assert set(specs["date_math"].parameters["properties"]) == {"op", "date", "other_date", "days"}


def test_text_protocol_instructions_list_every_tool() -> None:
    text = text_protocol_instructions(tool_specs())
    for name in TOOL_ARGS:
        assert f"- {name}(" in text


def test_text_tool_calls_are_parsed_from_prose_fences_and_bare_json() -> None:
    bare = '{"tool": "date_math", "arguments": {"op": "weekday", "date": "2024-03-01"}}'
    fenced = f"Let me check.\n```json\n{bare}\n```"
    alt = '{"name": "timeline", "arguments": {"start": "2024-01-01", "end": "2024-01-31"}}'
    assert [c.name for c in parse_text_tool_calls(bare)] == ["date_math"]
    [call] = parse_text_tool_calls(fenced, step=3)
    assert call.arguments == {"op": "weekday", "date": "2024-03-01"} and call.id == "text-3-0"
    assert [c.name for c in parse_text_tool_calls(f"{bare} then {alt}")] == ["date_math", "timeline"]


def test_json_that_is_not_a_known_tool_call_is_not_a_call() -> None:
    assert parse_text_tool_calls('ANSWER: the config was {"retries": 3}') == []
    assert parse_text_tool_calls('{"tool": "rm_rf", "arguments": {}}') == []
    assert parse_text_tool_calls('{"tool": "timeline", "arguments": "2024"}') == []
    assert parse_text_tool_calls("{not json}") == []


class OneLongRound(NoMemory):
    """Memory holding one round longer than a ``read_round`` page."""

    ROUND = Round(id="s1@0", session_id="s1", idx=0, text="user: hi\nassistant: " + "x" * (READ_CHARS + 500),
                  at=datetime(2024, 5, 1))  # fmt: skip

    def rounds(self, ids: Sequence[str]) -> list[Round]:
        return [self.ROUND] if self.ROUND.id in ids else []


def test_read_round_pages_through_a_long_round_by_offset() -> None:
    tools = ToolBox(OneLongRound())  # type: ignore[arg-type]
    first = tools.run("read_round", {"id": "[s1@0]"})
    page = json.loads(first.content)
    assert first.error is None and page["text"] == OneLongRound.ROUND.text[:READ_CHARS]
    assert page["next_offset"] == READ_CHARS and page["characters"] == len(OneLongRound.ROUND.text)
    assert [h.id for h in first.hits] == ["s1@0"]  # citable
    rest = json.loads(tools.run("read_round", {"id": "s1@0", "offset": READ_CHARS}).content)
    assert page["text"] + rest["text"] == OneLongRound.ROUND.text and "next_offset" not in rest
    past = tools.run("read_round", {"id": "s1@0", "offset": len(OneLongRound.ROUND.text)})
    assert past.error is not None and "past the end" in past.error
