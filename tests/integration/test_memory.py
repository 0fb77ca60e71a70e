"""The Memory facade: idempotent ingest, all-or-nothing validation, search semantics and provenance."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from graphrecall import InvalidInput, Memory, NotFound, RetrievalConfig, Scope, Settings, testing
from graphrecall.embed import HashingEmbedder


def chat(*turns: str) -> list[dict[str, str]]:
    """Alternating user/assistant messages, user first."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]


def snapshot(mem: Memory, scope: Scope) -> tuple[int, int, int, list[Any]]:
    s = mem.stats(scope)
    return s.sessions, s.messages, s.rounds, [x.model_dump() for x in mem.export_sessions(scope)]


# -- ingest ------------------------------------------------------------------------------------------------------
def test_adding_the_same_session_twice_adds_nothing_the_second_time(mem: Memory, scope: Scope) -> None:
    first = mem.add_session(
        scope, chat("I adopted a puppy", "Congratulations!"), session_id="s1", date="2024-05-01"
    )
    assert (first.sessions_added, first.messages_added, first.rounds_written) == (1, 2, 1)
    before = snapshot(mem, scope)
    again = mem.add_session(
        scope, chat("I adopted a puppy", "Congratulations!"), session_id="s1", date="2024-05-01"
    )
    assert (again.sessions_added, again.messages_added, again.rounds_written) == (0, 0, 0)
    assert again.messages_skipped == 2
    assert snapshot(mem, scope) == before


def test_appending_to_a_session_rewrites_the_round_the_reply_joins(mem: Memory, scope: Scope) -> None:
    mem.add_session(scope, chat("Can you suggest a name for my puppy?"), session_id="s1", date="2024-05-01")
    grown = mem.add_session(
        scope, chat("Can you suggest a name for my puppy?", "How about Biscuit?"), session_id="s1"
    )
    assert (grown.messages_added, grown.messages_skipped, grown.rounds_written) == (1, 1, 1)
    stats = mem.stats(scope)
    assert (stats.sessions, stats.messages, stats.rounds) == (1, 2, 1)
    [hit] = mem.search(scope, "Biscuit", 5)
    assert hit.id == "s1@0"
    assert "How about Biscuit?" in hit.text
    assert "suggest a name" in hit.text
    assert hit.message_ids == ["s1#0", "s1#1"]
    assert hit.date == datetime(2024, 5, 1)


def test_add_messages_numbers_turns_after_those_stored(mem: Memory, scope: Scope) -> None:
    mem.add_messages(scope, chat("first", "second"), session_id="live", date="2024-05-01T10:00:00")
    mem.add_messages(scope, chat("third"), session_id="live")
    mem.add_messages(scope, [{"role": "assistant", "content": "fourth"}], session_id="live")
    session = mem.get_session(scope, "live")
    assert [(m.id, m.idx, m.content) for m in session.messages] == [
        ("live#0", 0, "first"),
        ("live#1", 1, "second"),
        ("live#2", 2, "third"),
        ("live#3", 3, "fourth"),
    ]
    assert mem.stats(scope).rounds == 2
    assert [h.message_ids for h in mem.search(scope, "fourth", 1)] == [["live#2", "live#3"]]


def test_add_messages_with_explicit_ids_is_idempotent(mem: Memory, scope: Scope) -> None:
    msgs = [
        {"role": "user", "content": "ping", "id": "m-1"},
        {"role": "assistant", "content": "pong", "id": "m-2"},
    ]
    assert mem.add_messages(scope, msgs, session_id="live").messages_added == 2
    again = mem.add_messages(scope, msgs, session_id="live")
    assert (again.messages_added, again.messages_skipped) == (0, 2)
    assert [m.id for m in mem.get_session(scope, "live").messages] == ["m-1", "m-2"]


def test_add_sessions_reports_progress_per_batch(mem: Memory, scope: Scope) -> None:
    seen: list[tuple[int, int]] = []
    sessions = [
        {"session_id": f"s{i}", "date": f"2024-05-0{i + 1}", "messages": chat(f"note {i}")} for i in range(5)
    ]
    result = mem.add_sessions(scope, sessions, batch_sessions=2, progress=lambda d, t: seen.append((d, t)))
    assert result.sessions_added == 5
    assert seen == [(2, 5), (4, 5), (5, 5)]
    assert [s.id for s in mem.sessions(scope)] == [f"s{i}" for i in range(5)]  # oldest first


GOOD = {"session_id": "good", "date": "2024-05-01", "messages": chat("this must not be stored", "ok")}
MALFORMED: dict[str, tuple[Any, str, str]] = {
    "missing role": ([GOOD, {"session_id": "b", "messages": [{"content": "hi"}]}], "sessions[1].messages[0]", "'role'"),
    "missing content": ([GOOD, {"session_id": "b", "messages": [{"role": "user"}]}], "sessions[1].messages[0]", "'content'"),
    "unknown role": ([GOOD, {"session_id": "b", "messages": [{"role": "bot", "content": "x"}]}], "sessions[1].messages[0].role", "'bot'"),
    "blank content": ([GOOD, {"session_id": "b", "messages": [{"role": "user", "content": " "}]}], "sessions[1].messages[0].content", "blank"),
    "bad date": ([GOOD, {"session_id": "b", "date": "last tuesday", "messages": chat("x")}], "sessions[1].date", "'last tuesday'"),
    "bad message date": ([GOOD, {"session_id": "b", "messages": [{"role": "user", "content": "x", "at": "noon"}]}], "sessions[1].messages[0].at", "'noon'"),
    "duplicate session ids": ([GOOD, {**GOOD, "messages": chat("other")}], "sessions", "'good' appears twice"),
    "unsafe session id": ([GOOD, {"session_id": "../etc", "messages": chat("x")}], "sessions[1].session_id", "'.'"),
    "no messages": ([GOOD, {"session_id": "b", "messages": []}], "sessions[1].messages", "at least one message"),
    "messages not a list": ([GOOD, {"session_id": "b", "messages": "hello"}], "sessions[1].messages", "expected a list"),
    "session not an object": ([GOOD, "just text"], "sessions[1]", "valid dictionary"),
    "duplicate message ids": ([GOOD, {"session_id": "b", "messages": [{"role": "user", "content": "x", "id": "m"}, {"role": "user", "content": "y", "id": "m"}]}], "sessions[1].messages[1].id", "'m'"),
}  # fmt: skip


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, Scope]]:
    """One store shared by the rejection tests: every rejected call must leave it exactly as it was."""
    root = tmp_path_factory.mktemp("seeded")
    scope = Scope(org_id="acme", user_id="alice")
    with Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root)) as m:
        m.add_session(
            scope, chat("I adopted a puppy called Biscuit", "Lovely!"), session_id="old", date="2024-04-01"
        )
        yield m, scope


@pytest.mark.parametrize(("sessions", "where", "fragment"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_input_is_rejected_whole_and_earlier_data_survives(
    seeded: tuple[Memory, Scope], sessions: list[Any], where: str, fragment: str
) -> None:
    mem, scope = seeded
    before = snapshot(mem, scope)
    with pytest.raises(InvalidInput) as info:
        mem.add_sessions(scope, sessions, batch_sessions=1)
    assert info.value.where == where
    assert fragment in str(info.value)
    assert snapshot(mem, scope) == before
    with pytest.raises(NotFound):
        mem.get_session(scope, "good")


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda m, s: m.add_session(s, [{"role": "user"}], session_id="x"), "messages[0]"),
        (lambda m, s: m.add_session(s, chat("hi"), session_id="a/b"), "session_id"),
        (lambda m, s: m.add_session(s, chat("hi"), session_id="x", date="soon"), "date"),
        (
            lambda m, s: m.add_messages(s, [{"role": "robot", "content": "x"}], session_id="old"),
            "messages[0].role",
        ),
        (lambda m, s: m.add_messages(s, chat("hi"), session_id=".hidden"), "session_id"),
        (lambda m, s: m.add_session(("acme", ".."), chat("hi"), session_id="x"), "scope"),
        (lambda m, s: m.add_session(s, "hello", session_id="x"), "messages"),
        (lambda m, s: m.add_sessions(s, 42), "sessions"),
    ],
)
def test_single_session_calls_validate_too(seeded: tuple[Memory, Scope], call: Any, where: str) -> None:
    mem, scope = seeded
    before = snapshot(mem, scope)
    with pytest.raises(InvalidInput) as info:
        call(mem, scope)
    assert info.value.where.startswith(where)
    assert snapshot(mem, scope) == before


# -- search ------------------------------------------------------------------------------------------------------
def test_search_on_an_unknown_scope_is_empty_and_creates_nothing(mem: Memory) -> None:
    assert mem.search(("acme", "nobody"), "anything") == []
    assert mem.scopes() == []
    assert mem.sessions(("acme", "nobody")) == []
    with pytest.raises(NotFound):
        mem.get_session(("acme", "nobody"), "s1")


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "question_date": "whenever"}, "question_date"),
    ],
)
def test_search_validates_its_arguments(
    mem: Memory, scope: Scope, kwargs: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        mem.search(scope, **kwargs)
    assert info.value.where == where


def test_queries_full_of_search_syntax_are_safe(mem: Memory, scope: Scope) -> None:
    mem.add_session(scope, chat("I bought an XR-7734 router"), session_id="s1", date="2024-05-01")
    for query in ['"XR-7734" AND (router OR -modem)*', "'; DROP TABLE Round; --", "?!", "\\", "x:y~2^3"]:
        hits = mem.search(scope, query, 3)
        assert [h.session_id for h in hits] == ["s1"], query  # the vector list alone still finds the round


def test_the_question_date_hides_what_was_said_after_it(mem: Memory, scope: Scope) -> None:
    mem.add_session(scope, chat("My sister lives in Lisbon"), session_id="jan", date="2024-01-10")
    mem.add_session(scope, chat("My sister moved to Porto"), session_id="mar", date="2024-03-10")
    everything = {h.session_id for h in mem.search(scope, "where does my sister live", 5)}
    assert everything == {"jan", "mar"}
    asked_in_feb = mem.search(scope, "where does my sister live", 5, question_date="2024-02-01")
    assert [h.session_id for h in asked_in_feb] == ["jan"]


def test_time_expressions_boost_rounds_inside_the_range(store_root: Path, scope: Scope) -> None:
    def ranked(time_boost: float, in_range_weight: float = 0.0) -> list[tuple[str, float | None]]:
        root = store_root / f"boost-{time_boost}-{in_range_weight}"
        retrieval = RetrievalConfig(time_boost=time_boost, in_range_weight=in_range_weight)
        with Memory.open(
            root, embedder=HashingEmbedder(64), settings=Settings(root=root), retrieval=retrieval
        ) as m:
            # Same words, so only time separates them; the in-range one sorts last by id.
            m.add_session(
                scope, chat("I went hiking with Sam"), session_id="a-old", date="2024-03-02T10:00:00"
            )
            m.add_session(
                scope, chat("I went hiking with Sam"), session_id="z-recent", date="2024-05-11T10:00:00"
            )
            hits = m.search(
                scope, "when did I go hiking with Sam last weekend", 2, question_date="2024-05-15"
            )
            return [(h.session_id, h.signals.get("time")) for h in hits]

    assert ranked(0.5) == [("z-recent", 1.0), ("a-old", 0.0)]
    assert ranked(0.0, in_range_weight=0.5) == [("z-recent", 1.0), ("a-old", 0.0)]  # the in-range list alone
    assert [sid for sid, _ in ranked(0.0)] == ["a-old", "z-recent"]


def test_hits_carry_provenance_that_leads_back_to_the_messages(mem: Memory, scope: Scope) -> None:
    mem.add_session(
        scope,
        [
            {"role": "system", "content": "be brief"},
            *chat("hi", "hello", "I adopted a puppy called Biscuit", "Lovely!"),
        ],
        session_id="s1",
        date="2024-05-01T09:30:00",
    )
    [hit, *_] = mem.search(scope, "puppy called Biscuit", 3)
    assert (hit.kind, hit.session_id, hit.date, hit.rank) == ("round", "s1", datetime(2024, 5, 1, 9, 30), 1)
    messages = {m.id: m for m in mem.get_session(scope, "s1").messages}
    assert hit.message_ids and set(hit.message_ids) <= set(messages)
    assert [messages[i].content for i in hit.message_ids] == ["I adopted a puppy called Biscuit", "Lovely!"]
    assert {"fused", "bm25", "vector"} <= set(hit.signals)
    assert hit.score == pytest.approx(hit.signals["fused"])


def test_context_fits_the_budget_and_is_dated(mem: Memory, scope: Scope) -> None:
    notes = [
        {
            "session_id": f"s{i:02}",
            "date": f"2024-04-{i + 1:02}",
            "messages": chat(f"note {i}: " + "basil " * 90),
        }
        for i in range(12)
    ]
    mem.add_sessions(scope, notes)
    ctx = mem.context(scope, "what did I plant in the garden", 300, question_date="2024-05-01")
    assert ctx.token_count <= 300
    assert ctx.truncated
    assert ctx.hits
    assert ctx.text.startswith("Question date: 2024-05-01")
    with pytest.raises(InvalidInput) as info:
        mem.context(scope, "garden", 0)
    assert info.value.where == "token_budget"


# -- administration ----------------------------------------------------------------------------------------------
def test_stats_sessions_and_export_describe_what_is_stored(mem: Memory, scope: Scope) -> None:
    mem.add_session(scope, chat("b1", "b2"), session_id="b", date="2024-05-02")
    mem.add_session(scope, chat("a1"), session_id="a", date="2024-05-01")
    stats = mem.stats(scope)
    assert (stats.sessions, stats.messages, stats.rounds, stats.embedder_id, stats.dim) == (
        2,
        3,
        2,
        "hashing-64",
        64,
    )
    # Everything the scope holds on disk. A scope this small lives in its write log alone (Settings.resident_rounds)
    root = testing.pool(mem).root / "acme"

    def files() -> list[Path]:
        return [
            p for p in root.rglob("*") if p.is_file() and p.relative_to(root).parts[0].startswith("alice.")
        ]

    assert files() and all(".log.sqlite" in str(p) for p in files())
    assert stats.disk_bytes == sum(p.stat().st_size for p in files())
    # ...until it moves into Kuzu: then the Kuzu file, the derived indexes (a directory) and the write log.
    mem.flush()
    stats = mem.stats(scope)
    assert (stats.sessions, stats.messages, stats.rounds) == (2, 3, 2)
    assert any(".kuzu.idx" in str(p) for p in files()) and any(".log.sqlite" in str(p) for p in files())
    assert stats.disk_bytes == sum(p.stat().st_size for p in files())
    assert [s.id for s in mem.sessions(scope)] == ["a", "b"]
    assert [s.id for s in mem.sessions(scope, limit=1, offset=1)] == ["b"]
    exported = mem.export_sessions(scope)
    assert [[m.content for m in s.messages] for s in exported] == [["a1"], ["b1", "b2"]]
    assert mem.scopes() == [scope]
    with pytest.raises(NotFound, match="'zzz'"):
        mem.get_session(scope, "zzz")
