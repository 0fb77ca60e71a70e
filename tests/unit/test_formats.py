"""Ingest file formats: every valid shape round-trips, detection needs no hint, and every malformed input is an
``InvalidInput`` that says where the problem is (never a bare JSONDecodeError, KeyError or UnicodeError)."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphrecall.errors import InvalidInput
from graphrecall.formats import FORMATS, detect_format, parse_bytes, read_sessions
from graphrecall.models import Message, Role, Session, SessionInput
from graphrecall.results import ExportDocument

ROLES = [r.value for r in Role]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies --------------------------------------------------------------------------------------------------------
ids = st.text(
    alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-_#@"),
    min_size=1,
    max_size=24,
)
dates = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1))
contents = st.text(min_size=1, max_size=80).filter(lambda s: bool(s.strip()))
messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(ROLES), "content": contents}), min_size=1, max_size=5
)
sessions = st.lists(
    st.fixed_dictionaries({"session_id": ids, "date": dates, "messages": messages}),
    min_size=1,
    max_size=6,
    unique_by=lambda s: s["session_id"],
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


# -- writers: how each format looks on disk ----------------------------------------------------------------------------
def as_json(ss: list[dict[str, Any]]) -> bytes:
    return json.dumps([{**s, "date": s["date"].isoformat()} for s in ss], ensure_ascii=False).encode()


def as_jsonl(ss: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps({**s, "date": s["date"].isoformat()}) for s in ss).encode() + b"\n"


def as_longmemeval(ss: list[dict[str, Any]]) -> bytes:
    """Two questions whose haystacks overlap in one session, as LongMemEval's do, with its own date format."""

    def question(part: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "question_id": "q",
            "question": "?",
            "haystack_session_ids": [s["session_id"] for s in part],
            "haystack_dates": [s["date"].strftime("%Y/%m/%d (%a) %H:%M") for s in part],
            "haystack_sessions": [[{**m, "has_answer": False} for m in s["messages"]] for s in part],
        }

    half = max(1, len(ss) // 2)
    return json.dumps([question(ss[:half]), question(ss[half - 1 :])]).encode()


def as_messages(s: dict[str, Any]) -> bytes:
    return json.dumps(s["messages"]).encode()


def flat(parsed: list[SessionInput]) -> list[tuple[str, Any, list[tuple[str, str]]]]:
    return [
        (p.session_id, p.date, [(m.role.value, m.content) for m in p.messages if isinstance(m, Message)])
        for p in parsed
    ]


def expected(
    ss: list[dict[str, Any]], *, minutes: bool = False
) -> list[tuple[str, Any, list[tuple[str, str]]]]:
    def when(d: datetime) -> datetime:
        return d.replace(second=0, microsecond=0) if minutes else d

    return [
        (s["session_id"], when(s["date"]), [(m["role"], m["content"]) for m in s["messages"]]) for s in ss
    ]


def maybe_gzip(data: bytes, compress: bool) -> bytes:
    return gzip.compress(data) if compress else data


# -- round trips -------------------------------------------------------------------------------------------------------
@SETTINGS
@given(ss=sessions, compress=st.booleans())
def test_json_list_round_trips_without_a_format_hint(ss: list[dict[str, Any]], compress: bool) -> None:
    assert flat(parse_bytes(maybe_gzip(as_json(ss), compress), "h.json")) == expected(ss)


@SETTINGS
@given(ss=sessions, compress=st.booleans())
def test_jsonl_round_trips_without_a_format_hint(ss: list[dict[str, Any]], compress: bool) -> None:
    assert flat(parse_bytes(maybe_gzip(as_jsonl(ss), compress), "h.jsonl")) == expected(ss)


@SETTINGS
@given(ss=sessions, compress=st.booleans())
def test_longmemeval_haystacks_become_sessions_once_each(ss: list[dict[str, Any]], compress: bool) -> None:
    parsed = parse_bytes(maybe_gzip(as_longmemeval(ss), compress), "lme.json")
    assert flat(parsed) == expected(ss, minutes=True)


@SETTINGS
@given(s=sessions.map(lambda ss: ss[0]), compress=st.booleans(), when=dates)
def test_a_message_list_is_one_session_named_after_the_file(
    s: dict[str, Any], compress: bool, when: datetime
) -> None:
    parsed = parse_bytes(maybe_gzip(as_messages(s), compress), "trip-notes.json.gz", default_date=when)
    assert flat(parsed) == [("trip-notes", when, [(m["role"], m["content"]) for m in s["messages"]])]


@SETTINGS
@given(ss=sessions)
def test_forcing_the_detected_format_gives_the_same_result(ss: list[dict[str, Any]]) -> None:
    for data, fmt in ((as_json(ss), "json"), (as_jsonl(ss), "jsonl"), (as_longmemeval(ss), "longmemeval")):
        assert flat(parse_bytes(data, "x", fmt=fmt)) == flat(parse_bytes(data, "x"))


@SETTINGS
@given(ss=sessions)
def test_an_export_re_parses_to_the_stored_sessions(ss: list[dict[str, Any]]) -> None:
    stored = [
        Session(
            id=s["session_id"],
            started_at=s["date"],
            messages=[
                Message(role=m["role"], content=m["content"], id=f"{s['session_id']}#{i}", at=s["date"])
                for i, m in enumerate(s["messages"])
            ],
        )
        for s in ss
    ]
    data = ExportDocument(org_id="acme", user_id="ana", sessions=stored).model_dump_json().encode()
    parsed = parse_bytes(data, "export.json")
    assert [(p.session_id, p.date) for p in parsed] == [(s.id, s.started_at) for s in stored]
    assert [[(m.id, m.role, m.content, m.at) for m in p.messages] for p in parsed] == [
        [(m.id, m.role, m.content, m.at) for m in s.messages] for s in stored
    ]


# -- malformed input: always InvalidInput --------------------------------------------------------------------------------
def parses_or_rejects(data: bytes, fmt: str | None = None) -> None:
    """The property: a result, or InvalidInput; any other exception type escapes and fails the test."""
    try:
        parse_bytes(data, "in.json", fmt=fmt, default_date="2024-01-01")
    except InvalidInput as e:
        assert str(e).startswith("in.json"), str(e)


@SETTINGS
@given(data=st.binary(max_size=200), fmt=st.sampled_from([None, *FORMATS]))
def test_arbitrary_bytes_never_raise_anything_but_invalid_input(data: bytes, fmt: str | None) -> None:
    parses_or_rejects(data, fmt)
    parses_or_rejects(gzip.compress(data), fmt)


@SETTINGS
@given(value=json_values, fmt=st.sampled_from([None, *FORMATS]))
def test_arbitrary_json_never_raises_anything_but_invalid_input(value: Any, fmt: str | None) -> None:
    parses_or_rejects(json.dumps(value).encode(), fmt)


@SETTINGS
@given(ss=sessions, cut=st.floats(min_value=0.0, max_value=1.0), compress=st.booleans())
def test_truncated_files_never_raise_anything_but_invalid_input(
    ss: list[dict[str, Any]], cut: float, compress: bool
) -> None:
    for data in (as_json(ss), as_jsonl(ss), as_longmemeval(ss)):
        blob = maybe_gzip(data, compress)
        parses_or_rejects(blob[: int(len(blob) * cut)])


MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "role missing": (lambda m: m.pop("role"), ".role"),
    "content missing": (lambda m: m.pop("content"), ".content"),
    "unknown role": (lambda m: m.update(role="bot"), ".role"),
    "role not a string": (lambda m: m.update(role=1), ".role"),
    "blank content": (lambda m: m.update(content="  "), ".content"),
    "content not a string": (lambda m: m.update(content=["hi"]), ".content"),
}


@SETTINGS
@given(
    ss=sessions,
    mutation=st.sampled_from(sorted(MUTATIONS)),
    pick=st.tuples(st.integers(min_value=0), st.integers(min_value=0)),
)
def test_a_bad_message_is_named_by_session_message_and_field(
    ss: list[dict[str, Any]], mutation: str, pick: tuple[int, int]
) -> None:
    si = pick[0] % len(ss)
    mi = pick[1] % len(ss[si]["messages"])
    mutate, field = MUTATIONS[mutation]
    mutate(ss[si]["messages"][mi])
    with pytest.raises(InvalidInput) as json_err:
        parse_bytes(as_json(ss), "h.json")
    assert json_err.value.where == f"h.json: sessions[{si}].messages[{mi}]{field}"
    with pytest.raises(InvalidInput) as jsonl_err:
        parse_bytes(as_jsonl(ss), "h.jsonl")
    assert jsonl_err.value.where == f"h.jsonl: line {si + 1}: session.messages[{mi}]{field}"


@SETTINGS
@given(
    ss=sessions, pick=st.integers(min_value=0), bad=st.text(max_size=12).filter(lambda t: not t[:4].isdigit())
)
def test_a_bad_date_is_named(ss: list[dict[str, Any]], pick: int, bad: str) -> None:
    si = pick % len(ss)
    doc = json.loads(as_json(ss))
    doc[si]["date"] = bad
    with pytest.raises(InvalidInput) as err:
        parse_bytes(json.dumps(doc).encode(), "h.json")
    assert err.value.where == f"h.json: sessions[{si}].date"


# -- examples: the messages people will read ---------------------------------------------------------------------------
def session(sid: str, *roles: str) -> dict[str, Any]:
    return {
        "session_id": sid,
        "date": "2024-03-01T10:00:00",
        "messages": [{"role": r, "content": f"turn {i}"} for i, r in enumerate(roles)],
    }


def test_an_unknown_role_message_lists_the_allowed_roles() -> None:
    doc = [session(f"s{i}", "user", "assistant") for i in range(3)] + [
        session("s3", "user", "assistant", "bot")
    ]
    with pytest.raises(InvalidInput) as err:
        parse_bytes(json.dumps(doc).encode(), "history.json")
    assert str(err.value) == (
        "history.json: sessions[3].messages[2].role: 'bot' is not one of user, assistant, system, tool, document"
    )


def test_a_session_id_used_twice_names_both_places() -> None:
    doc = [session("a", "user"), session("b", "user"), session("a", "user")]
    with pytest.raises(InvalidInput) as err:
        parse_bytes(json.dumps(doc).encode(), "h.json")
    assert err.value.where == "h.json: sessions[2].session_id"
    assert "h.json: sessions[0]" in str(err.value)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"[]", "empty"),
        (b"hello", "starts with 'hello'"),
        (b'[{"session_id": "a"', "not valid JSON"),
        (b"\xff\xfe[]", "not UTF-8"),
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
        (b"[1, 2]", "cannot tell the format"),
    ],
)
def test_unusable_files_say_what_is_wrong(data: bytes, says: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_bytes(data, "f.json")
    assert says in str(err.value)
    assert str(err.value).startswith("f.json")


def test_a_session_without_a_date_takes_the_default_date_or_is_rejected() -> None:
    doc = json.dumps([{"session_id": "a", "messages": [{"role": "user", "content": "hi"}]}]).encode()
    with pytest.raises(InvalidInput) as err:
        parse_bytes(doc, "h.json")
    assert err.value.where == "h.json: sessions[0].date"
    assert parse_bytes(doc, "h.json", default_date="2024-02-03")[0].date == datetime(2024, 2, 3)


def test_longmemeval_lists_must_line_up() -> None:
    q = {
        "haystack_session_ids": ["a", "b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [[{"role": "user", "content": "x"}], [{"role": "user", "content": "y"}]],
    }
    with pytest.raises(InvalidInput) as err:
        parse_bytes(json.dumps(q).encode(), "lme.json")
    assert err.value.where == "lme.json: questions[0].haystack_dates"


def test_a_single_longmemeval_question_object_is_accepted() -> None:
    q = {
        "question_id": "x1",
        "haystack_session_ids": ["a"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [[{"role": "user", "content": "x", "has_answer": True}]],
    }
    parsed = parse_bytes(json.dumps(q, indent=2).encode(), "lme.json")
    assert [(p.session_id, p.date) for p in parsed] == [("a", datetime(2023, 5, 20, 2, 21))]


# -- files -------------------------------------------------------------------------------------------------------------
def test_detection_reads_content_not_file_names(tmp_path: Path) -> None:
    ss = [session("a", "user", "assistant"), session("b", "user")]
    cases = {
        "json": json.dumps(ss).encode(),
        "jsonl": "\n".join(json.dumps(s) for s in ss).encode(),
        "longmemeval": json.dumps(
            [
                {
                    "haystack_session_ids": ["a"],
                    "haystack_dates": ["2024/01/01"],
                    "haystack_sessions": [ss[0]["messages"]],
                }
            ]
        ).encode(),
        "messages": json.dumps(ss[0]["messages"]).encode(),
    }
    for fmt, data in cases.items():
        for compress in (False, True):
            path = tmp_path / f"{fmt}-{compress}.txt"  # a misleading suffix on purpose
            path.write_bytes(maybe_gzip(data, compress))
            assert detect_format(path) == fmt


def test_a_message_list_is_dated_by_the_file_mtime_without_a_date(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    stamp = datetime(2024, 5, 6, 7, 8, 9).timestamp()
    os.utime(path, (stamp, stamp))
    [only] = read_sessions(path)
    assert only.session_id == "notes"
    assert only.date == datetime.fromtimestamp(stamp, UTC).replace(tzinfo=None)  # stored times are naive UTC


def test_jsonl_is_streamed_so_earlier_sessions_arrive_before_a_later_error(tmp_path: Path) -> None:
    from graphrecall.formats import iter_sessions

    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(session("a", "user")) + "\n" + json.dumps(session("b", "user")) + "\n{oops\n")
    it = iter_sessions(path)
    assert next(it).session_id == "a"
    assert next(it).session_id == "b"
    with pytest.raises(InvalidInput) as err:
        next(it)
    assert err.value.where == "h.jsonl: line 3: session"


def test_a_missing_file_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as err:
        read_sessions(tmp_path / "nope.json")
    assert "no such file" in str(err.value)
