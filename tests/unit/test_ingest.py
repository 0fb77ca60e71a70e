"""Ingest: validating chat input, numbering messages, and grouping them into rounds (pure functions, no store)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.dates import parse_date
from graphrecall.errors import InvalidInput
from graphrecall.ingest import build_rounds, message_rows, validate_messages
from graphrecall.models import Message, Role
from graphrecall.store.rows import MessageRow

DAY = datetime(2024, 5, 20, 9, 0)


def rows(*turns: tuple[str, str], session_id: str = "s1", start_idx: int = 0) -> list[MessageRow]:
    msgs = validate_messages([{"role": r, "content": c} for r, c in turns])
    return message_rows(session_id, msgs, start_idx=start_idx, date=DAY)


# -- rounds ------------------------------------------------------------------------------------------------------
def test_a_round_is_a_user_turn_with_the_reply_that_followed() -> None:
    rounds = build_rounds(
        "s1", rows(("user", "hi"), ("assistant", "hello"), ("user", "bye"), ("assistant", "ok"))
    )
    assert [r.id for r in rounds] == ["s1@0", "s1@1"]
    assert [r.idx for r in rounds] == [0, 1]
    assert rounds[0].user_text == "hi"
    assert rounds[0].reply_text == "hello"
    assert rounds[0].text == "user: hi\nassistant: hello"
    assert rounds[0].message_ids == ["s1#0", "s1#1"]
    assert rounds[1].message_ids == ["s1#2", "s1#3"]


def test_a_leading_assistant_turn_is_a_round_of_its_own() -> None:
    rounds = build_rounds("s1", rows(("assistant", "How can I help?"), ("user", "hi"), ("assistant", "yes")))
    assert [r.message_ids for r in rounds] == [["s1#0"], ["s1#1", "s1#2"]]
    assert rounds[0].user_text == ""
    assert rounds[0].reply_text == "How can I help?"


def test_system_messages_are_not_part_of_any_round() -> None:
    msgs = rows(("system", "be nice"), ("user", "hi"), ("system", "note"), ("assistant", "hello"))
    rounds = build_rounds("s1", msgs)
    assert len(rounds) == 1
    assert rounds[0].message_ids == ["s1#1", "s1#3"]
    assert "be nice" not in rounds[0].text
    assert "note" not in rounds[0].text


def test_consecutive_replies_join_one_round_and_consecutive_user_turns_do_not() -> None:
    rounds = build_rounds(
        "s1",
        rows(("user", "a"), ("user", "b"), ("assistant", "c"), ("tool", "d"), ("assistant", "e")),
    )
    assert [r.message_ids for r in rounds] == [["s1#0"], ["s1#1", "s1#2", "s1#3", "s1#4"]]
    assert rounds[1].reply_text == "c\nd\ne"
    assert rounds[1].user_text == "b"


def test_round_time_is_its_first_message_time_and_terms_are_indexed() -> None:
    msgs = validate_messages(
        [
            {"role": "user", "content": "my dog Biscuit", "at": "2024-05-20T10:00:00"},
            {"role": "assistant", "content": "nice", "at": "2024-05-20T10:05:00"},
        ]
    )
    rounds = build_rounds("s1", message_rows("s1", msgs, start_idx=0, date=DAY))
    assert rounds[0].at == datetime(2024, 5, 20, 10, 0)
    assert "wbiscuit" in rounds[0].terms.split()


roles = st.lists(st.sampled_from([r.value for r in Role]), max_size=20)


@given(roles)
def test_every_non_system_message_lands_in_exactly_one_round_in_order(role_seq: list[str]) -> None:
    msgs = rows(*[(r, f"m{i}") for i, r in enumerate(role_seq)])
    rounds = build_rounds("s1", msgs)
    flat = [mid for r in rounds for mid in r.message_ids]
    assert flat == [m.id for m in msgs if m.role != "system"]
    non_system = [r for r in role_seq if r != "system"]
    opens = ("user", "document")  # a user turn, and a learned document's passage, each open a round
    leading = 1 if non_system and non_system[0] not in opens else 0
    expected_rounds = sum(r in opens for r in non_system) + leading
    assert len(rounds) == expected_rounds
    assert [r.idx for r in rounds] == list(range(len(rounds)))
    for r in rounds[leading:]:
        assert r.text.startswith(("user: ", "document: "))


# -- message ids -------------------------------------------------------------------------------------------------
def test_message_ids_default_to_session_and_position() -> None:
    assert [m.id for m in rows(("user", "a"), ("assistant", "b"), start_idx=5)] == ["s1#5", "s1#6"]
    assert [m.idx for m in rows(("user", "a"), ("assistant", "b"), start_idx=5)] == [5, 6]


def test_explicit_message_ids_are_kept_and_must_be_unique() -> None:
    msgs = validate_messages(
        [{"role": "user", "content": "a", "id": "m-1"}, {"role": "user", "content": "b"}]
    )
    assert [m.id for m in message_rows("s1", msgs, start_idx=0, date=DAY)] == ["m-1", "s1#1"]
    dup = validate_messages(
        [{"role": "user", "content": "a", "id": "x"}, {"role": "user", "content": "b", "id": "x"}]
    )
    with pytest.raises(InvalidInput, match="duplicate message id 'x'") as info:
        message_rows("s1", dup, start_idx=0, date=DAY)
    assert info.value.where == "messages[1].id"


def test_messages_without_a_time_take_the_session_date() -> None:
    assert {m.at for m in rows(("user", "a"), ("assistant", "b"))} == {DAY}


# -- dates -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-20T14:30:00", datetime(2024, 5, 20, 14, 30)),
        ("2024-05-20 14:30", datetime(2024, 5, 20, 14, 30)),
        ("2024-05-20", datetime(2024, 5, 20)),
        ("2024-05-20T14:30:00Z", datetime(2024, 5, 20, 14, 30)),
        ("2024-05-20T16:30:00+02:00", datetime(2024, 5, 20, 14, 30)),
        ("2023/05/20 (Sat) 07:47", datetime(2023, 5, 20, 7, 47)),
        ("2023/05/20 07:47", datetime(2023, 5, 20, 7, 47)),
        ("2023/05/20", datetime(2023, 5, 20)),
        ("  2024-05-20  ", datetime(2024, 5, 20)),
    ],
)
def test_parse_date_accepts_iso_and_longmemeval_formats(text: str, expected: datetime) -> None:
    parsed = parse_date(text, where="date")
    assert parsed == expected
    assert parsed.tzinfo is None


def test_parse_date_converts_aware_datetimes_to_naive_utc() -> None:
    aware = datetime(2024, 5, 20, 16, 30, tzinfo=timezone(timedelta(hours=2)))
    assert parse_date(aware, where="date") == datetime(2024, 5, 20, 14, 30)


@pytest.mark.parametrize(
    "bad", ["yesterday", "", "   ", "2024-13-45", "20/05/2024", None, 20240520, ["2024"]]
)
def test_bad_dates_raise_invalid_input_naming_where(bad: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_date(bad, where="sessions[3].date")
    assert info.value.where == "sessions[3].date"
    assert str(info.value).startswith("sessions[3].date: ")
    assert repr(bad) in str(info.value)


# -- message validation ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("items", "where", "fragment"),
    [
        ([{"content": "hi"}], "messages[0]", "'role'"),
        ([{"role": "user", "content": "ok"}, {"role": "user"}], "messages[1]", "'content'"),
        ([{"role": "robot", "content": "hi"}], "messages[0].role", "'robot' is not one of user, assistant"),
        ([{"role": "user", "content": "   "}], "messages[0].content", "blank"),
        ([{"role": "user", "content": ""}], "messages[0].content", "at least 1 character"),
        ([{"role": "user", "content": 42}], "messages[0].content", "string"),
        (["hello"], "messages[0]", "got str"),
        ([{"role": "user", "content": "ok"}, None], "messages[1]", "got NoneType"),
        ([{"role": "user", "content": "hi", "at": "soon"}], "messages[0].at", "'soon'"),
        ([{"role": "user", "content": "hi", "id": "../etc"}], "messages[0].id", "'.'"),
    ],
)
def test_validate_messages_names_the_item_and_field(items: list[Any], where: str, fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_messages(items)
    assert info.value.where == where
    assert fragment in str(info.value)


def test_validate_messages_uses_the_callers_location_prefix() -> None:
    with pytest.raises(InvalidInput) as info:
        validate_messages([{"role": "user"}], where="sessions[2].messages")
    assert info.value.where == "sessions[2].messages[0]"


def test_validate_messages_accepts_dicts_and_message_objects() -> None:
    out = validate_messages(
        [Message(role=Role.user, content="a"), {"role": "assistant", "content": "b", "extra": "ignored"}]
    )
    assert [(m.role, m.content) for m in out] == [(Role.user, "a"), (Role.assistant, "b")]


# -- languages ---------------------------------------------------------------------------------------------------
def test_each_message_row_carries_the_language_detected_from_its_text() -> None:
    got = rows(
        ("user", "Letzten Monat bin ich nach Hamburg umgezogen"),
        ("assistant", "That sounds like a big move, how is the new flat?"),
        ("user", "ok"),
    )
    assert [r.lang for r in got] == ["de", "en", ""]
    assert [r.to_message().lang for r in got] == ["de", "en", ""]


def test_a_callers_language_is_not_taken() -> None:
    msgs = validate_messages([{"role": "user", "content": "Я переехал в Москву в марте", "lang": "en"}])
    assert [r.lang for r in message_rows("s1", msgs, start_idx=0, date=DAY)] == ["ru"]
