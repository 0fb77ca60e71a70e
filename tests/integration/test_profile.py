"""The profile: the user's current facts grouped by kind, ranked, dated, cut to a budget; and context with it.

Facts come from the real extraction path (scripted LLM, real Kuzu), so groups, reinforcement and supersession are
the ones extraction writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from graphrecall import InvalidInput, Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ChatMessage, ScriptedLLM
from graphrecall.models import PROFILE_GROUP_OF_KIND, PROFILE_GROUPS, FactKind

SCOPE = ("acme", "bob")
VERSION = "New facts, each followed"


def fact(text: str, kind: str, *about: str) -> dict[str, Any]:
    return {"text": text, "kind": kind, "message_ids": ["m1"], "about": list(about)}


def event(text: str, day: str) -> dict[str, Any]:
    return {"subject": "user", "verb": "do", "object": "", "text": text, "time_start": day, "time_end": day,
            "message_ids": ["m1"]}  # fmt: skip


def replaces(new: str, old: str) -> Any:
    """A versioning answer: ``new`` UPDATEs the candidate whose text is ``old``; everything else is NEW."""

    def reply(messages: list[ChatMessage]) -> dict[str, Any]:
        prompt = messages[-1].content.split("Today:", 1)[1]
        labels = dict(re.findall(r"^\s*(n\d+): (.+?) \(said on", prompt, re.M))
        cands = dict(re.findall(r"^\s+(c\d+): (.+?) \(recorded", prompt, re.M))
        out = []
        for label, text in labels.items():
            target = next((c for c, t in cands.items() if t == old), None)
            if text == new and target is not None:
                out.append({"fact": label, "decision": "UPDATE", "target": target, "reason": "moved"})
            else:
                out.append({"fact": label, "decision": "NEW", "target": None, "reason": "other"})
        return {"decisions": out}

    return reply


@pytest.fixture
def m(tmp_path: Path) -> Iterator[Memory]:
    cfg = ExtractionConfig(version_min_similarity=0.3, background=False)
    llm = ScriptedLLM(ordered=False)
    with Memory.open(tmp_path / "s", embedder=HashingEmbedder(64), llm=llm, extraction=cfg) as mem:
        yield mem


def say(m: Memory, sid: str, date: str, answer: dict[str, Any], versions: Any = None) -> None:
    assert isinstance(m.llm, ScriptedLLM)
    m.llm.add(f"Session id: {sid}\n", answer, times=1)
    if versions is not None:
        m.llm.add(VERSION, versions, times=1)
    r = m.add_session(SCOPE, [{"role": "user", "content": f"news of {sid}"}], session_id=sid, date=date,
                      extract=True)  # fmt: skip
    assert r.extraction is not None and r.extraction.sessions_done == 1, r.extraction


def months(m: Memory) -> None:
    """Two sessions two months apart: a move (UPDATE), a restated preference (DUPLICATE), events old and new."""
    say(m, "s1", "2024-01-10", {
        "facts": [fact("The user lives in Munich.", "attribute"), fact("The user is vegetarian.", "preference"),
                  fact("Ana is the user's sister.", "relationship", "Ana"),
                  fact("The user plans to run a marathon in October.", "plan"),
                  fact("The user thinks jazz is overrated.", "opinion")],
        "events": [event("The user adopted a cat.", "2024-01-08")],
        "entities": [{"name": "Ana", "type": "person"}],
    })  # fmt: skip
    say(m, "s2", "2024-03-05", {
        "facts": [fact("The user lives in Berlin.", "attribute"), fact("The user is vegetarian.", "preference")],
        "events": [event("The user ran a half marathon.", "2024-03-03"),
                   event("The user flies to Lisbon.", "2024-03-20")],
    }, versions=replaces("The user lives in Berlin.", "The user lives in Munich."))  # fmt: skip


def texts(p: Any, group: str) -> list[str]:
    return [i.text for s in p.sections if s.group == group for i in s.items]


def test_every_fact_kind_has_a_group() -> None:
    assert set(PROFILE_GROUP_OF_KIND) == set(FactKind)
    assert set(PROFILE_GROUP_OF_KIND.values()) == set(PROFILE_GROUPS)


def test_the_profile_groups_current_facts_and_ranks_the_reinforced_first(m: Memory) -> None:
    months(m)
    p = m.profile(SCOPE, as_of="2024-03-06")
    assert texts(p, "identity") == ["The user lives in Berlin."]  # Munich was superseded
    assert texts(p, "preferences") == ["The user is vegetarian.", "The user thinks jazz is overrated."]
    assert texts(p, "relationships") == ["Ana is the user's sister."]
    # plans: plan facts, then events dated after the profile's date (upcoming)
    assert texts(p, "plans") == ["The user plans to run a marathon in October.", "The user flies to Lisbon."]
    # recent events: the last 30 days only; the cat adopted in January is history
    assert texts(p, "recent_events") == ["The user ran a half marathon."]
    veg = p.sections[1].items[0]
    assert (veg.mentions, veg.session_id, veg.date, veg.last_seen) == (
        2, "s1", datetime(2024, 1, 10), datetime(2024, 3, 5)
    )  # fmt: skip
    assert [s.group for s in p.sections] == list(PROFILE_GROUPS)
    lines = p.text.splitlines()
    assert lines[0] == "About the user (as of 2024-03-06):"
    assert "- The user is vegetarian. [s1, 2024-01-10; said in 2 sessions]" in lines
    assert "- 2024-03-20 (upcoming): The user flies to Lisbon. [s2]" in lines
    assert "- 2024-03-03: The user ran a half marathon. [s2]" in lines
    assert p.token_count == (len(p.text) + 3) // 4 and not p.truncated
    again = type(p).model_validate_json(p.model_dump_json())
    assert again == p  # the JSON form carries everything


def test_the_profile_at_an_earlier_date_shows_what_was_true_and_known_then(m: Memory) -> None:
    months(m)
    p = m.profile(SCOPE, as_of=datetime(2024, 2, 1))
    assert texts(p, "identity") == ["The user lives in Munich."]  # the move was not said yet
    assert texts(p, "recent_events") == ["The user adopted a cat."]
    assert [i.mentions for i in p.sections[1].items] == [1, 1]
    assert m.profile(SCOPE, as_of="2023-12-01").text == ""  # nothing recorded by then


def test_a_budget_keeps_the_top_of_every_group_and_never_overflows(m: Memory) -> None:
    months(m)
    full = m.profile(SCOPE, as_of="2024-03-06")
    for budget in (1, 20, 60, 90, 120, full.token_count):
        p = m.profile(SCOPE, as_of="2024-03-06", token_budget=budget)
        assert p.token_count <= budget
        assert p.omitted == len(full.items) - len(p.items)
        assert p.truncated == (p.omitted > 0)
        for s in p.sections:  # what is kept is the top of each group, in order
            assert s.items == next(f for f in full.sections if f.group == s.group).items[: len(s.items)]
    small = m.profile(SCOPE, as_of="2024-03-06", token_budget=90)
    assert len(small.sections) >= 3  # round-robin: several groups, not all of the first one


def test_a_scope_without_extracted_memory_has_an_empty_profile(m: Memory) -> None:
    assert m.profile(("acme", "nobody")).text == ""
    m.add_session(SCOPE, [{"role": "user", "content": "hi"}], session_id="s0", date="2024-01-01")
    p = m.profile(SCOPE)
    assert (p.sections, p.text, p.token_count) == ([], "", 0)
    with pytest.raises(InvalidInput) as e:
        m.profile(SCOPE, token_budget=0)
    assert e.value.where == "token_budget"
    with pytest.raises(InvalidInput) as e:
        m.profile(SCOPE, as_of="someday")
    assert e.value.where == "as_of"


def test_context_with_the_profile_puts_it_first_within_the_budget(m: Memory) -> None:
    months(m)
    plain = m.context(SCOPE, "half marathon", 400, question_date="2024-03-06")
    assert plain.profile is None
    ctx = m.context(SCOPE, "half marathon", 400, question_date="2024-03-06", include_profile=True)
    assert ctx.profile is not None and ctx.profile.token_count <= 400 // 3
    assert ctx.text.startswith(ctx.profile.text) and "Question date: 2024-03-06" in ctx.text
    assert ctx.token_count <= 400 and ctx.hits
    tiny = m.context(SCOPE, "half marathon", 3, question_date="2024-03-06", include_profile=True)
    assert tiny.token_count <= 3
