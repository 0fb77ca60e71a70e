"""The lock policy of ``services.access``: what reads extracted memory and writes against it never interleaves with
another such operation, nor with an erase, on the same scope.

Each test pauses an LLM call in the middle of an extraction or a consolidation (the model is a scripted one that
waits on an event), starts the competing operation on another thread, and checks two things: that it did not run
while the first was between its read and its write (it waits for the scope's knowledge lock), and that the final
state is one a serial order could produce (an erased message is not resurrected as a fact; no fact is superseded
twice).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrecall import InvalidInput, Memory, Scope
from graphrecall.config import ConsolidationConfig
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ChatMessage, ScriptedLLM

SCOPE = Scope(org_id="acme", user_id="cora")
MERGE_PROMPT = "You tidy an assistant's long-term memory"
PAUSE_S = 0.5  # how long the competing operation is given to (wrongly) run while the first one is paused


class Gate:
    """An LLM answer that holds its caller until released, and says when it has been reached."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, messages: list[ChatMessage]) -> Any:
        self.reached.set()
        assert self.release.wait(30), "the test never released the paused LLM call"
        return self.answer


def run(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except Exception as e:  # the test inspects it
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    llm = ScriptedLLM(ordered=False)
    cfg = ExtractionConfig(version_min_similarity=0.3, background=False, known_fact_min_similarity=0.99)
    consolidation = ConsolidationConfig(min_similarity=0.7, near_exact_similarity=0.75)
    with Memory.open(
        tmp_path, embedder=HashingEmbedder(64), llm=llm, extraction=cfg, consolidation=consolidation
    ) as m:
        yield m


def race(first: Callable[[], Any], second: Callable[[], Any], gate: Gate) -> tuple[bool, Any, Any]:
    """Start ``first``, wait until it is held at ``gate`` (between its read and its write), start ``second`` and
    give it ``PAUSE_S`` to run; then let both finish. Returns whether ``second`` finished while ``first`` was held,
    and both outcomes (``{"value": ...}`` or ``{"error": ...}``)."""
    one, first_out = run(first)
    assert gate.reached.wait(30)
    two, second_out = run(second)
    two.join(PAUSE_S)
    ran_meanwhile = not two.is_alive()
    gate.release.set()
    one.join(30)
    two.join(30)
    return ran_meanwhile, first_out, second_out


def script(m: Memory) -> ScriptedLLM:
    assert isinstance(m.llm, ScriptedLLM)
    return m.llm


def facts_of(*texts: str) -> dict[str, Any]:
    return {"facts": [{"text": t, "kind": "attribute", "message_ids": ["m1"]} for t in texts]}


def test_an_erase_waits_for_a_running_extraction_and_what_it_erases_stays_erased(memory: Memory) -> None:
    memory.add_session(
        SCOPE, [{"role": "user", "content": "I am allergic to peanuts, remember that."}], session_id="s1",
        date="2024-03-01",
    )  # fmt: skip
    gate = Gate(facts_of("The user is allergic to peanuts."))
    script(memory).add("Session id: s1\n", gate, times=1)

    ran_meanwhile, extracted, erased = race(
        lambda: memory.extract(SCOPE, "s1"), lambda: memory.erase(SCOPE, matching="peanuts"), gate
    )

    assert not ran_meanwhile, "the erase ran while the extraction was between its read and its write"
    assert "error" not in extracted and "error" not in erased, (extracted, erased)
    assert memory.facts(SCOPE, include_superseded=True) == []  # the erased message is not back as a fact
    assert memory.search(SCOPE, "peanuts allergic") == []


def chess_facts(memory: Memory) -> list[str]:
    """Two current facts that say the same thing (a consolidation merges them), and one about something else."""
    for sid, date, text in (
        ("s1", "2024-01-10", "The user plays chess every Sunday."),
        ("s2", "2024-02-10", "The user plays chess on Sundays."),
        ("s3", "2024-02-11", "The user has a dog named Max."),
    ):
        script(memory).add(f"Session id: {sid}\n", facts_of(text), times=1)
        script(memory).add(
            "New facts, each followed",
            {"decisions": [{"fact": "n1", "decision": "NEW", "target": None, "reason": "t"}]},
            times=1,
        )
        memory.add_session(
            SCOPE, [{"role": "user", "content": text}], session_id=sid, date=date, extract=True
        )
    return [f.id for f in memory.facts(SCOPE) if "chess" in f.text]


@pytest.mark.parametrize("which", [0, 1])
def test_a_supersede_waits_for_a_running_consolidation_and_no_fact_is_superseded_twice(
    memory: Memory, which: int
) -> None:
    chess = chess_facts(memory)
    [dog] = [f.id for f in memory.facts(SCOPE) if "dog" in f.text]
    gate = Gate({"decision": "MERGE", "keep": "f1", "text": None, "reason": "same habit"})
    script(memory).add(lambda msgs: MERGE_PROMPT in msgs[-1].content, gate, times=1)

    ran_meanwhile, consolidated, superseded = race(
        lambda: memory.consolidate(SCOPE), lambda: memory.supersede(SCOPE, chess[which], dog), gate
    )

    assert not ran_meanwhile, "the supersede ran while the consolidation was between its plan and its write"
    assert "error" not in consolidated, consolidated
    # Serialized after the merge: either the fact was the one kept (superseded now) or the one merged away (then
    # superseding it again is refused, naming it).
    if "error" in superseded:
        assert isinstance(superseded["error"], InvalidInput) and "already superseded" in str(
            superseded["error"]
        )
    edges = memory.export_scope(SCOPE).supersedes
    olds = [e.old_id for e in edges]
    assert len(olds) == len(set(olds)), f"a fact superseded twice: {edges}"
