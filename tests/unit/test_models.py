"""Scope and identifier validation: ids become directory and file names, so they must be one safe path component."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from graphrecall.errors import InvalidInput
from graphrecall.memory import as_scope
from graphrecall.models import MAX_ID_LENGTH, Message, Scope, Session, TimeRange, validate_identifier

BAD_IDS = {
    "dot-dot": ("..", "'.'"),
    "single dot": (".", "'.'"),
    "hidden": (".x", "'.'"),
    "slash": ("a/b", "'/'"),
    "backslash": ("a\\b", "'\\\\'"),
    "colon": ("c:x", "':'"),
    "empty": ("", "empty"),
    "too long": ("x" * (MAX_ID_LENGTH + 1), "limit"),
    "NUL": ("a\x00b", "control"),
    "newline": ("a\nb", "control"),
    "escape": ("a\x1bb", "control"),
    "leading space": (" a", "whitespace"),
    "trailing space": ("a ", "whitespace"),
    "trailing tab": ("a\t", "whitespace"),
}


@pytest.mark.parametrize(("value", "reason"), BAD_IDS.values(), ids=BAD_IDS.keys())
@pytest.mark.parametrize("field", ["org_id", "user_id"])
def test_scope_rejects_unsafe_ids_naming_the_field(field: str, value: str, reason: str) -> None:
    fields = {"org_id": "acme", "user_id": "alice", field: value}
    with pytest.raises(ValidationError) as info:
        Scope(**fields)
    message = str(info.value)
    assert field in message
    assert reason in message


@pytest.mark.parametrize(("value", "reason"), BAD_IDS.values(), ids=BAD_IDS.keys())
def test_as_scope_turns_bad_tuples_into_invalid_input_at_scope(value: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        as_scope(("acme", value))
    assert info.value.where == "scope"
    assert info.value.code == "invalid_input"
    assert "user_id" in str(info.value)


@pytest.mark.parametrize("bad", ["acme", ("a", "b", "c"), None, 3])
def test_as_scope_rejects_things_that_are_not_pairs(bad: object) -> None:
    with pytest.raises(InvalidInput, match="scope must be"):
        as_scope(bad)  # type: ignore[arg-type]


def test_non_string_id_is_rejected() -> None:
    with pytest.raises(ValueError, match="user_id must be a string"):
        validate_identifier(42, "user_id")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value", ["alice", "user-1_2", "a.b", "x" * MAX_ID_LENGTH, "ünïcødé", "名前", "a b", "1"]
)
def test_ordinary_ids_are_accepted_unchanged(value: str) -> None:
    assert validate_identifier(value, "user_id") == value
    assert as_scope(("acme", value)) == Scope(org_id="acme", user_id=value)


def _accepted(value: str) -> bool:
    try:
        validate_identifier(value, "id")
    except ValueError:
        return False
    return True


ID_ALPHABET = st.sampled_from([*list('ab.-_ /\\:*?"<>|\x00\n\t\x7f\u200b\u2028é名'), "..", "x"])
ids = st.one_of(st.text(max_size=140), st.lists(ID_ALPHABET, max_size=12).map("".join))


@given(org=ids, user=ids)
def test_every_accepted_id_stays_one_component_under_the_root(org: str, user: str) -> None:
    if not (_accepted(org) and _accepted(user)):
        return
    root = Path("/srv/graphrecall/store")
    for value in (org, user):
        assert PurePosixPath(value).parts == (value,)
        assert PureWindowsPath(value).parts == (value,)
    target = root / org / f"{user}.kuzu"
    assert target.parent.parent == root
    assert Path(os.path.normpath(target)).parent.parent == root


@given(ids)
def test_validation_is_a_pure_check(value: str) -> None:
    """Accepted ids come back unchanged (no silent normalization that could merge two tenants)."""
    if _accepted(value):
        assert validate_identifier(value, "x") == value


def test_scope_is_hashable_and_prints_as_a_path() -> None:
    s = Scope(org_id="acme", user_id="alice")
    assert {s: 1}[Scope(org_id="acme", user_id="alice")] == 1
    assert str(s) == "acme/alice"


def test_message_rejects_blank_content_and_unknown_roles() -> None:
    with pytest.raises(ValidationError, match="content"):
        Message(role="user", content="   ")
    with pytest.raises(ValidationError, match="role"):
        Message(role="robot", content="hi")  # type: ignore[arg-type]


def test_timestamps_are_stored_as_naive_utc() -> None:
    aware = datetime(2024, 5, 20, 16, 30, tzinfo=timezone(timedelta(hours=2)))
    m = Message(role="user", content="hi", at=aware)
    assert m.at == datetime(2024, 5, 20, 14, 30)
    assert m.at.tzinfo is None
    s = Session(id="s1", started_at=datetime(2024, 5, 20, 14, 30, tzinfo=UTC))
    assert s.started_at == datetime(2024, 5, 20, 14, 30)


def test_session_and_message_ids_are_validated_like_scope_ids() -> None:
    with pytest.raises(ValidationError, match="session_id"):
        Session(id="../x", started_at=datetime(2024, 1, 1))
    with pytest.raises(ValidationError, match="id"):
        Message(role="user", content="hi", id="a/b")


def test_time_range_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="before its start"):
        TimeRange(start=datetime(2024, 2, 1), end=datetime(2024, 1, 1))
