"""One time cutoff for every read: a round, a fact, an event and a supersession recorded after the question date
are invisible to search, context, answer and every Reader tool, and visible to a question asked after them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM, Step
from graphrecall.read.tools import ToolBox

SCOPE = Scope(org_id="acme", user_id="bob")
BEFORE = "2024-03-01"  # between the two sessions
AFTER = "2024-07-01"  # after both
LATE = ("Berlin", "marathon")  # words that only the late session holds


def _say(m: Memory, llm: ScriptedLLM, sid: str, date: str, said: str, fact: str, event: str) -> None:
    """Store one session whose scripted extraction yields ``fact`` and ``event`` (the event on the day before)."""
    day_before = f"{date[:8]}{int(date[8:10]) - 1:02d}"
    llm.add(
        f"Session id: {sid}\n",
        {
            "facts": [{"text": fact, "kind": "attribute", "message_ids": ["m1"]}],
            "events": [
                {"subject": "user", "verb": "do", "object": "", "text": event, "time_start": day_before,
                 "message_ids": ["m1"]}
            ],
        },
    )  # fmt: skip
    m.add_session(SCOPE, [{"role": "user", "content": said}], session_id=sid, date=date, extract=True)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    root = tmp_path_factory.mktemp("cutoff")
    llm = ScriptedLLM(ordered=False)
    # Hashing vectors: "lives in Munich" and "lives in Berlin" share enough features to be version candidates.
    with Memory.open(
        root,
        embedder=HashingEmbedder(64),
        llm=llm,
        extraction=ExtractionConfig(version_min_similarity=0.3, background=False),
    ) as m:
        said = "I live in Munich and adopted a cat yesterday"
        _say(m, llm, "early", "2024-01-10", said, "The user lives in Munich", "The user adopted a cat.")
        llm.add(
            "New facts, each followed",
            {"decisions": [{"fact": "n1", "decision": "UPDATE", "target": "c1", "reason": "moved"}]},
        )
        said = "I moved to Berlin and ran a marathon yesterday"
        _say(m, llm, "late", "2024-06-10", said, "The user lives in Berlin", "The user ran a marathon.")
        yield m


def _texts(items: list[Any]) -> str:
    return " ".join(x.text for x in items)


def _leaks(text: str) -> list[str]:
    return [w for w in LATE if w in text]


def test_the_store_holds_a_supersession_recorded_after_the_cutoff(mem: Memory) -> None:
    (current,) = mem.facts(SCOPE)
    assert current.text == "The user lives in Berlin"
    assert len(mem.facts(SCOPE, include_superseded=True)) == 2


@pytest.mark.parametrize(("asked", "sees_late"), [(BEFORE, False), (AFTER, True)])
def test_search_and_context(mem: Memory, asked: str, sees_late: bool) -> None:
    rounds = mem.search(SCOPE, "where do I live and what did I do", 10, question_date=asked)
    nodes = mem.search(SCOPE, "where do I live", 10, question_date=asked, kinds=("fact", "event"))
    context = mem.context(SCOPE, "where do I live", 2000, question_date=asked).text
    for text in (_texts(rounds), _texts(nodes), context):
        assert bool(_leaks(text)) is sees_late, text
    facts = [h.text for h in nodes if h.kind == "fact"]
    assert facts == (["The user lives in Berlin"] if sees_late else ["The user lives in Munich"])


@pytest.mark.parametrize(("asked", "sees_late"), [(BEFORE, False), (AFTER, True)])
def test_every_reader_tool(mem: Memory, asked: str, sees_late: bool) -> None:
    tools = ToolBox(mem.recall(SCOPE, asked))
    calls = {
        "search_memory": {
            "query": "Berlin marathon Munich cat",
            "kinds": ["round", "fact", "event"],
            "k": 10,
        },
        "timeline": {"start": "2024-01-01", "end": "2024-12-31"},
        "current_facts": {},
    }
    for name, args in calls.items():
        result = tools.run(name, args)
        assert result.error is None, result.content
        assert bool(_leaks(result.content)) is sees_late, (name, result.content)
    timeline = json.loads(tools.run("timeline", {"start": "2024-01-01", "end": "2024-12-31"}).content)
    assert timeline["event_count"] == (2 if sees_late else 1)
    facts = json.loads(tools.run("current_facts", {}).content)["facts"]
    assert [f["text"] for f in facts] == [
        "The user lives in Berlin" if sees_late else "The user lives in Munich"
    ]
    # An id learnt elsewhere reads nothing past the cutoff.
    late = tools.run("read_round", {"id": "late@0"})
    assert (late.error is None) is sees_late, late.content
    early = json.loads(tools.run("read_round", {"id": "[early@0]"}).content)
    assert "Munich" in early["text"] and early["characters"] == len(early["text"])


@pytest.mark.parametrize(("asked", "sees_late"), [(BEFORE, False), (AFTER, True)])
def test_answer_reads_only_what_the_cutoff_shows(mem: Memory, asked: str, sees_late: bool) -> None:
    llm = ScriptedLLM([Step("Retrieved memory", {"verdict": "NO", "missing": "where the user lives"})])
    ans = mem.answer(SCOPE, "Where do I live now?", question_date=asked, mode="recall", llm=llm)
    assert ans.abstained
    (call,) = llm.calls
    prompt = "\n".join(m.content for m in call.messages)
    assert "Munich" in prompt
    assert bool(_leaks(prompt)) is sees_late


def test_no_question_date_means_now(mem: Memory) -> None:
    view = mem.recall(SCOPE)
    assert view.cutoff.question_date.year >= 2026
    assert _leaks(_texts(mem.search(SCOPE, "Berlin marathon", 5))) != []
