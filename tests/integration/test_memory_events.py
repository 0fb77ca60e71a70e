"""Memory.subscribe: what changed, after it is stored, with ids and counts and never the user's text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.events import MemoryEvent
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ChatMessage, ScriptedLLM

SCOPE = ("acme", "alice")
SECRET_TEXT = "I moved to Lisbon and my PIN is 4321"


def _llm() -> ScriptedLLM:
    llm = ScriptedLLM(ordered=False)
    llm.add("Session id: s1\n", {
        "facts": [{"text": "The user lives in Lisbon.", "kind": "attribute", "message_ids": ["m1"]}],
        "events": [],
    })  # fmt: skip
    llm.add("New facts, each followed", _all_new)  # add_fact's versioning call: every fact is new
    return llm


def _all_new(messages: list[ChatMessage]) -> dict[str, Any]:
    labels = re.findall(r"^(n\d+): ", messages[-1].content, re.M)
    return {
        "decisions": [{"fact": n, "decision": "NEW", "target": None, "reason": "scripted"} for n in labels]
    }


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory.open(
        tmp_path / "store",
        embedder=HashingEmbedder(64),
        llm=_llm(),
        extraction=ExtractionConfig(background=False),
    )


def test_every_change_is_told_once_and_a_repeat_that_changes_nothing_is_not(memory: Memory) -> None:
    seen: list[MemoryEvent] = []
    memory.subscribe(seen.append)
    with memory:
        memory.add_session(SCOPE, [{"id": "m1", "role": "user", "content": SECRET_TEXT}], session_id="s1")
        memory.add_session(SCOPE, [{"id": "m1", "role": "user", "content": SECRET_TEXT}], session_id="s1")
        memory.extract(SCOPE, session_id="s1")
        old = memory.add_fact(SCOPE, "The user's favourite colour is green.").fact
        new = memory.add_fact(SCOPE, "The user's favourite colour is blue.").fact
        memory.supersede(SCOPE, old.id, new.id)
        memory.erase(SCOPE, fact_ids=[new.id], dry_run=True)
        memory.erase(SCOPE, fact_ids=[new.id])
        memory.forget(SCOPE)
        memory.forget(SCOPE)  # nothing left to forget

    assert [e.type for e in seen] == [
        "session.stored",
        "extraction.done",
        "fact.superseded",
        "memory.erased",
        "scope.erased",
    ]
    stored, extracted, superseded, erased, _ = seen
    assert stored.data == {"session_ids": ["s1"], "sessions_added": 1, "messages_added": 1}
    assert extracted.data["session_id"] == "s1" and extracted.data["facts_added"] == 1
    assert superseded.data == {"fact_id": old.id, "superseded_by": new.id, "by": "supersede"}
    assert erased.data["facts"] == 1 and erased.data["sessions"] == 0
    assert all(e.scope.org_id == "acme" and e.scope.user_id == "alice" for e in seen)
    assert len({e.id for e in seen}) == len(seen)
    wire = json.dumps([e.to_json() for e in seen])
    assert "Lisbon" not in wire and "4321" not in wire and "green" not in wire  # ids and counts only
    assert seen[0].to_json()["at"].endswith("+00:00")


def test_a_failing_sink_does_not_fail_the_write_and_unsubscribe_stops_it(memory: Memory) -> None:
    def broken(event: MemoryEvent) -> None:
        raise RuntimeError("the listener is down")

    seen: list[str] = []
    memory.subscribe(broken)
    stop = memory.subscribe(lambda e: seen.append(e.type))
    with memory:
        result = memory.add_session(SCOPE, [{"role": "user", "content": "hello"}], session_id="a")
        assert result.sessions_added == 1
        stop()
        memory.add_session(SCOPE, [{"role": "user", "content": "again"}], session_id="b")
        assert [s.id for s in memory.sessions(SCOPE)] == ["a", "b"]
    assert seen == ["session.stored"]
