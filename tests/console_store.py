"""A small real store for the console's tests: acme/alice with an extracted fact that was superseded (Munich, then
Berlin), entities with a relation, an event, and a message that says two things (cilantro and a PhD); acme/bob and
globex/carol so that a key of one organisation has someone else's users to not see. Extraction is scripted
(``ScriptedLLM``) but runs for real into Kuzu."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphrecall import Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM

ALICE = ("acme", "alice")
MIXED = "I hate cilantro. I'm doing a PhD at MIT."
VERSION = "New facts, each followed"


def _extraction(sid: str, fact: str, mid: str, **more: Any) -> dict[str, Any]:
    return {
        "facts": [{"text": fact, "kind": "attribute", "message_ids": [mid], "about": ["Anna"]}],
        "entities": [{"name": "Anna", "type": "person"}, {"name": "Munich", "type": "place"}],
        "relations": [{"source": "Anna", "relation": "lives_in", "target": "Munich", "message_ids": [mid]}],
        **more,
    }


def build(root: Path) -> None:
    llm = ScriptedLLM(ordered=False)
    cfg = ExtractionConfig(version_min_similarity=0.3, background=False)
    with Memory.open(root, embedder=HashingEmbedder(64), llm=llm, extraction=cfg) as m:
        llm.add("Session id: s1\n", _extraction("s1", "The user lives in Munich", "s1#0", events=[
            {"subject": "user", "verb": "visit", "object": "Anna", "text": "The user visited Anna in Munich.",
             "time_start": "2024-01-08", "message_ids": ["s1#0"]}]), times=1)  # fmt: skip
        m.add_session(ALICE, [{"role": "user", "content": "I live in Munich and visited my sister Anna."},
                              {"role": "assistant", "content": "Lovely!"}],
                      session_id="s1", date="2024-01-10T09:00:00", extract=True)  # fmt: skip
        llm.add("Session id: s2\n", _extraction("s2", "The user lives in Berlin", "s2#0"), times=1)
        llm.add(VERSION, {"decisions": [{"fact": "n1", "decision": "UPDATE", "target": "c1",
                                         "reason": "moved"}]}, times=1)  # fmt: skip
        m.add_session(ALICE, [{"role": "user", "content": "I moved to Berlin last week."}],
                      session_id="s2", date="2024-03-05T18:30:00", extract=True)  # fmt: skip
        llm.add("Session id: s3\n", {"facts": [{"text": "The user dislikes cilantro", "kind": "preference",
                                                "message_ids": ["s3#0"]}]}, times=1)  # fmt: skip
        llm.add(VERSION, {"decisions": [{"fact": "n1", "decision": "NEW", "target": None, "reason": "-"}]})
        m.add_session(ALICE, [{"role": "user", "content": MIXED}], session_id="s3",
                      date="2024-04-01T12:00:00", extract=True)  # fmt: skip
        m.add_session(("acme", "bob"), [{"role": "user", "content": "I play chess."}], session_id="b1",
                      date="2024-02-01")  # fmt: skip
        m.add_session(("globex", "carol"), [{"role": "user", "content": "Secret globex plans."}],
                      session_id="c1", date="2024-02-01")  # fmt: skip
        facts = m.facts(ALICE, include_superseded=True)
        assert sorted((f.text, f.current) for f in facts) == [
            ("The user dislikes cilantro", True), ("The user lives in Berlin", True),
            ("The user lives in Munich", False),
        ], facts  # fmt: skip
