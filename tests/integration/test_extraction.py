"""Extraction into the graph with a scripted LLM, a real Kuzu store and the hashing embedder."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory, NotAvailable, testing
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import LLMTimeout, ScriptedLLM, Step
from graphrecall.store.schema import MATCH_SCOPE, owned

SCOPE = ("acme", "alice")
EXTRACT = "Extract four lists"
VERSION = "New facts, each followed"
RESOLVE = "Decide whether a newly mentioned entity"


def answer(**lists: Any) -> dict[str, Any]:
    return {"facts": [], "events": [], "entities": [], "relations": [], **lists}


def fact(text: str, *ids: str, **kw: Any) -> dict[str, Any]:
    return {"text": text, "kind": "attribute", "message_ids": list(ids) or ["m1"], **kw}


def mem(tmp_path: Path, llm: ScriptedLLM | None, **cfg: Any) -> Memory:
    return Memory.open(
        tmp_path / "store",
        embedder=HashingEmbedder(64),
        llm=llm,
        extraction=ExtractionConfig(**{"background": False, **cfg}),
    )


def session(text: str, reply: str = "Noted.") -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]


def edges(m: Memory, cypher: str) -> list[list[Any]]:
    with testing.database(m, m_scope(), create=False) as db:
        return db.query(cypher)


def m_scope() -> Any:
    from graphrecall.memory import as_scope

    return as_scope(SCOPE)


def test_one_call_stores_facts_events_entities_linked_to_their_messages(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            Step(
                EXTRACT,
                answer(
                    facts=[fact("The user's sister Ana works as a nurse", "m1", about=["Ana"])],
                    events=[
                        {
                            "subject": "user",
                            "verb": "visit",
                            "object": "Ana",
                            "text": "The user visited Ana.",
                            "message_ids": ["m1"],
                        },
                    ],
                    entities=[{"name": "Ana", "type": "person", "aliases": ["my sister", "my sister Ana"]}],
                    relations=[
                        {
                            "source": "Ana",
                            "relation": "works at",
                            "target": "City Hospital",
                            "message_ids": ["m1"],
                        }
                    ],
                ),
            )
        ]
    )
    with mem(tmp_path, llm) as m:
        r = m.add_session(
            SCOPE,
            session("My sister Ana is a nurse; I visited her."),
            session_id="s1",
            date="2024-03-11",
            extract=True,
        )
        assert r.messages_added == 2 and r.extraction is not None
        ex = r.extraction
        assert (ex.facts_added, ex.events_added, ex.entities_added, ex.llm_calls) == (1, 1, 1, 1)
        assert ex.input_tokens > 0 and ex.output_tokens > 0
        (f,) = m.facts(SCOPE)
        (ana,) = m.entities(SCOPE)
        assert f.message_ids == ["s1#0"] and f.entity_ids == [ana.id] and f.session_id == "s1"
        assert f.valid_from == datetime(2024, 3, 11)
        assert edges(m, f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')}-[:FACT_FROM]->(x:Message) RETURN x.id") == [
            ["s1#0"]
        ]
        assert edges(
            m, f"{MATCH_SCOPE}MATCH {owned('v', 'Event')}-[:EVENT_FROM]->(x:Message) RETURN x.id"
        ) == [["s1#0"]]
        assert edges(m, f"{MATCH_SCOPE}MATCH {owned('v', 'Event')}-[:OBJECT]->(e:Entity) RETURN e.name") == [
            ["Ana"]
        ]
        assert edges(m, f"{MATCH_SCOPE}MATCH {owned('f', 'Fact')}-[:ABOUT]->(e:Entity) RETURN e.name") == [
            ["Ana"]
        ]
        # the relation names an entity that was never listed: no dangling edge
        assert edges(m, f"{MATCH_SCOPE}MATCH {owned('e', 'Entity')}-[r:RELATED]->() RETURN count(r)") == [[0]]
        assert m.get_session(SCOPE, "s1").extract_status == "done"
    llm.assert_done()


def test_relative_event_time_is_computed_from_the_session_date_not_taken_from_the_model(
    tmp_path: Path,
) -> None:
    wrong = {"subject": "user", "verb": "buy", "object": "bike", "text": "The user bought a bike.",
             "when": "last Tuesday", "time_start": "2024-03-01", "message_ids": ["m1"]}  # fmt: skip
    only_iso = {**wrong, "when": None, "time_start": "2024-02-20", "text": "The user sold a car."}
    nonsense = {**wrong, "when": "at some point", "time_start": "soonish", "text": "The user fixed a lamp."}
    llm = ScriptedLLM([Step(EXTRACT, answer(events=[wrong, only_iso, nonsense]))])
    with mem(tmp_path, llm) as m:
        # 2024-03-11 is a Monday: "last Tuesday" is 2024-03-05, whatever the model claimed.
        m.add_session(
            SCOPE,
            session("I bought a bike last Tuesday."),
            session_id="s1",
            date="2024-03-11T09:00",
            extract=True,
        )
        by_text = {e.text: e for e in m.events(SCOPE)}
    assert by_text["The user bought a bike."].time_start == datetime(2024, 3, 5)
    assert by_text["The user sold a car."].time_start == datetime(2024, 2, 20)
    assert by_text["The user fixed a lamp."].time_start is None


def test_invented_message_ids_are_dropped_and_items_citing_only_invented_ids_too(
    tmp_path: Path, caplog: Any
) -> None:
    llm = ScriptedLLM(
        [
            Step(
                EXTRACT,
                answer(
                    facts=[
                        fact("The user has a dog named Rex", "m1", "m7"),
                        fact("The user owns a yacht", "m42"),
                        fact("The user likes tea", "s1#1"),  # a real id in full form is accepted
                    ]
                ),
            )
        ]
    )
    with mem(tmp_path, llm) as m, caplog.at_level("INFO"):
        r = m.add_session(SCOPE, session("I have a dog, Rex."), session_id="s1", extract=True)
        facts = {f.text: f for f in m.facts(SCOPE)}
    assert set(facts) == {"The user has a dog named Rex", "The user likes tea"}
    assert facts["The user has a dog named Rex"].message_ids == ["s1#0"]
    assert facts["The user likes tea"].message_ids == ["s1#1"]
    assert r.extraction is not None and r.extraction.items_dropped == 1  # the yacht
    assert "invented message id" in caplog.text and "m7" in caplog.text


def test_invalid_items_are_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            Step(
                EXTRACT,
                answer(
                    facts=[
                        fact("The user is a teacher"),
                        {"text": "", "message_ids": ["m1"]},
                        {"kind": "plan"},
                    ],
                    events=[{"verb": "run", "text": "no subject here"}],
                    entities=[{"name": "Lisbon", "type": "place"}, {"type": "person"}],
                ),
            )
        ]
    )
    with mem(tmp_path, llm) as m:
        r = m.add_session(SCOPE, session("I teach in Lisbon."), session_id="s1", extract=True)
        assert [f.text for f in m.facts(SCOPE)] == ["The user is a teacher"]
        assert [e.name for e in m.entities(SCOPE)] == ["Lisbon"]
        assert m.events(SCOPE) == []
        assert m.get_session(SCOPE, "s1").extract_status == "done"
    assert r.extraction is not None and r.extraction.items_dropped == 4


@pytest.mark.parametrize(
    ("reply", "error_part"),
    [
        ("I am sorry, I cannot produce JSON.", "StructuredOutputError"),
        (answer(facts=[{"text": "x"}, {"kind": "plan"}]), "nothing usable"),
        (LLMTimeout("openai test: request timed out"), "timed out"),
    ],
)
def test_unusable_answer_or_llm_failure_marks_the_session_failed_and_keeps_raw_history(
    tmp_path: Path, reply: Any, error_part: str
) -> None:
    llm = ScriptedLLM([Step(EXTRACT, reply, times=None)], ordered=False)
    with mem(tmp_path, llm) as m:
        r = m.add_session(SCOPE, session("I live in Porto."), session_id="s1", extract=True)
        assert r.messages_added == 2  # raw ingest committed regardless
        assert r.extraction is not None and r.extraction.sessions_failed == 1
        assert error_part in r.extraction.errors["s1"]
        s = m.get_session(SCOPE, "s1")
        assert s.extract_status == "failed" and next(x.content for x in s.messages) == "I live in Porto."
        assert m.facts(SCOPE) == [] and m.stats(SCOPE).rounds == 1
        assert m.search(SCOPE, "Porto")[0].id == "s1@0"
        with testing.database(m, m_scope(), create=False) as db:
            stored_error = db.query(
                "MATCH (s:Session {key: $k}) RETURN s.extract_error", {"k": db.key("s1")}
            )[0][0]
        assert error_part in stored_error


def test_a_failed_session_is_retried_by_extract_and_then_done(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            Step(EXTRACT, LLMTimeout("timed out")),
            Step(EXTRACT, answer(facts=[fact("The user lives in Porto")])),
        ]
    )
    with mem(tmp_path, llm) as m:
        m.add_session(SCOPE, session("I live in Porto."), session_id="s1", extract=True)
        m.add_session(SCOPE, session("Hi there."), session_id="s2")  # never extracted: status none
        assert m.get_session(SCOPE, "s1").extract_status == "failed"
        llm.add(EXTRACT, answer())
        r = m.extract(SCOPE)
        assert (r.sessions, r.sessions_done, r.facts_added, r.llm_calls) == (2, 2, 1, 2)
        assert [s.extract_status for s in m.sessions(SCOPE)] == ["done", "done"]
        assert m.extract(SCOPE).sessions == 0  # nothing left to do
    llm.assert_done()


def test_an_empty_answer_is_a_successful_extraction(tmp_path: Path) -> None:
    llm = ScriptedLLM([Step(EXTRACT, answer())])
    with mem(tmp_path, llm) as m:
        r = m.add_session(SCOPE, session("Hello!"), session_id="s1", extract=True)
        assert r.extraction is not None and r.extraction.sessions_done == 1
        assert m.get_session(SCOPE, "s1").extract_status == "done"


def test_extract_without_an_llm_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with mem(tmp_path, None) as m:
        with pytest.raises(NotAvailable, match="GRAPHRECALL_LLM"):
            m.add_session(SCOPE, session("I live in Porto."), session_id="s1", extract=True)
        assert m.sessions(SCOPE) == []
        m.add_session(SCOPE, session("I live in Porto."), session_id="s1")
        with pytest.raises(NotAvailable):
            m.extract(SCOPE)


def test_a_long_session_is_extracted_in_batches_of_messages(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            Step(lambda ms: "m1 [user]" in ms[-1].content and "m5 [user]" not in ms[-1].content,
                 answer(facts=[fact("The user plays chess", "m1")])),
            Step(lambda ms: "m5 [user]" in ms[-1].content and "m1 [user]" not in ms[-1].content,
                 answer(facts=[fact("The user plays the violin", "m5")])),
        ]
    )  # fmt: skip
    msgs = []
    for i in range(4):
        msgs += session(f"Turn {i}: " + "blah " * 100, "ok " * 50)
    with mem(tmp_path, llm, max_chars_per_call=1_500) as m:
        r = m.add_session(SCOPE, msgs, session_id="s1", extract=True)
        assert r.extraction is not None and r.extraction.llm_calls == 2
        assert {f.text: f.message_ids for f in m.facts(SCOPE)} == {
            "The user plays chess": ["s1#0"],
            "The user plays the violin": ["s1#4"],
        }
    llm.assert_done()


# -- entity resolution -------------------------------------------------------------------------------------------
def _entities_session(m: Memory, sid: str, *entities: dict[str, Any]) -> None:
    assert isinstance(m.llm, ScriptedLLM)
    m.llm.add(f"Session id: {sid}", answer(entities=list(entities)))
    m.add_session(SCOPE, session(f"session {sid}"), session_id=sid, extract=True)


def test_an_alias_from_an_earlier_session_resolves_to_the_same_entity(tmp_path: Path) -> None:
    with mem(tmp_path, ScriptedLLM(ordered=False)) as m:
        _entities_session(m, "s1", {"name": "Ana", "type": "person", "aliases": ["my sister"]})
        _entities_session(m, "s2", {"name": "my sister Ana", "type": "person", "aliases": ["Ana Silva"]})
        _entities_session(m, "s3", {"name": "ANA!", "type": "person"})
        (ana,) = m.entities(SCOPE)
    assert ana.name == "Ana" and "Ana Silva" in ana.aliases


def test_same_name_but_clashing_types_stay_apart(tmp_path: Path) -> None:
    with mem(tmp_path, ScriptedLLM(ordered=False)) as m:
        _entities_session(m, "s1", {"name": "Jordan", "type": "person"})
        _entities_session(m, "s2", {"name": "Jordan", "type": "place"})
        assert sorted(e.type for e in m.entities(SCOPE)) == ["person", "place"]


def test_a_very_similar_name_merges_by_embedding_without_the_llm(tmp_path: Path) -> None:
    # "Silva Ana" shares every word with "Ana Silva": hashing similarity 2/3 (only the word pair differs).
    with mem(tmp_path, ScriptedLLM(ordered=False), entity_auto=0.6, entity_ambiguous=0.3) as m:
        _entities_session(m, "s1", {"name": "Ana Silva", "type": "person"})
        _entities_session(m, "s2", {"name": "Silva Ana", "type": "person"})
        (e,) = m.entities(SCOPE)
        assert e.aliases == ["Silva Ana"]
        assert isinstance(m.llm, ScriptedLLM) and all(RESOLVE not in c.prompt for c in m.llm.calls)


@pytest.mark.parametrize(("llm_says", "expected"), [("e1", 1), (None, 2)])
def test_an_ambiguous_name_is_decided_by_the_llm(tmp_path: Path, llm_says: str | None, expected: int) -> None:
    with mem(tmp_path, ScriptedLLM(ordered=False), entity_auto=0.9, entity_ambiguous=0.5) as m:
        _entities_session(m, "s1", {"name": "Ana Silva", "type": "person"})
        assert isinstance(m.llm, ScriptedLLM)
        m.llm.add(RESOLVE, {"match": llm_says, "confidence": 0.8, "reason": "same sister"})
        _entities_session(m, "s2", {"name": "Silva Ana", "type": "person"})
        assert len(m.entities(SCOPE)) == expected
        (ask,) = [c for c in m.llm.calls if RESOLVE in c.prompt]
        assert "e1: Ana Silva (type: person" in ask.prompt and "Silva Ana" in ask.prompt


def test_facts_link_to_entities_named_in_their_text(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            Step(
                EXTRACT,
                answer(
                    facts=[fact("The user's dog Rex loves the beach")],
                    entities=[{"name": "Rex", "type": "pet"}],
                ),
            )
        ]
    )
    with mem(tmp_path, llm) as m:
        m.add_session(SCOPE, session("Rex loves the beach"), session_id="s1", extract=True)
        (rex,) = m.entities(SCOPE)
        assert m.facts(SCOPE)[0].entity_ids == [rex.id]


def test_search_can_return_fact_and_event_hits_with_provenance(tmp_path: Path) -> None:
    llm = ScriptedLLM(
        [
            Step(
                EXTRACT,
                answer(
                    facts=[fact("The user is allergic to peanuts", "m1", kind="attribute")],
                    events=[{"subject": "user", "verb": "adopt", "object": "cat", "text": "The user adopted a cat.",
                             "when": "yesterday", "message_ids": ["m3"]}],
                ),
            )
        ]
    )  # fmt: skip
    msgs = session("I'm allergic to peanuts.", "I'll remember.") + session(
        "We adopted a cat yesterday!", "Lovely."
    )
    with mem(tmp_path, llm) as m:
        m.add_session(SCOPE, msgs, session_id="s1", date="2024-03-11T09:00", extract=True)
        rounds = m.search(SCOPE, "peanuts allergy", k=5)
        assert {h.kind for h in rounds} == {"round"} and rounds[0].signals.get("fact", 0) > 0
        hits = m.search(SCOPE, "peanuts allergic", k=5, kinds=("fact", "event"))
        assert [h.kind for h in hits][:1] == ["fact"] and hits[0].message_ids == ["s1#0"]
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        ev = m.search(SCOPE, "adopted a cat", k=5, kinds=("event",))
        assert ev[0].kind == "event" and ev[0].date == datetime(2024, 3, 10)
        mixed = m.search(SCOPE, "cat adopted", k=10, kinds=("round", "event"))
        assert {"round", "event"} <= {h.kind for h in mixed}
        # nothing said after the question date leaks out
        assert m.search(SCOPE, "peanuts", k=5, kinds=("fact",), question_date="2024-01-01") == []
        with pytest.raises(ValueError, match="kinds"):
            m.search(SCOPE, "x", kinds=("memo",))  # type: ignore[arg-type]


def test_prompt_shows_labelled_messages_and_the_session_date(tmp_path: Path) -> None:
    llm = ScriptedLLM([Step(EXTRACT, answer())])
    with mem(tmp_path, llm) as m:
        m.add_session(
            SCOPE, session("I live in Porto."), session_id="s1", date="2024-03-11T09:00", extract=True
        )
    prompt = llm.calls[0].prompt
    assert "Session date: 2024-03-11 (Monday)" in prompt
    assert re.search(r"^m1 \[user\]: I live in Porto\.$", prompt, re.M)
    assert re.search(r"^m2 \[assistant\]: Noted\.$", prompt, re.M)
