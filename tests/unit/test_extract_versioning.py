"""The versioning decision logic without a store: rules first, one batched LLM call, safe defaults."""

from __future__ import annotations

from datetime import datetime

from graphrecall.extract.schema import VersionDecisions
from graphrecall.extract.versioning import NewFact, decide, reinforced_confidence, render_batch
from graphrecall.store.facts import Candidate

DAY = datetime(2024, 3, 11)


def cand(cid: str, text: str) -> Candidate:
    return Candidate(cid, text, 0.9, DAY, DAY, DAY, 0.8)


def test_rules_settle_what_needs_no_model_and_the_rest_goes_in_one_call() -> None:
    items = [
        NewFact("n1", "The user plays golf", DAY),
        NewFact("n2", "The user lives in Munich.", DAY, [cand("f1", "the user lives in munich")]),
        NewFact("n3", "The user lives in Berlin", DAY, [cand("f1", "The user lives in Munich")]),
        NewFact("n4", "The user has two cats", DAY, [cand("f2", "The user has a cat"), cand("f1", "x")]),
    ]
    seen: list[str] = []

    def ask(block: str) -> VersionDecisions:
        seen.append(block)
        return VersionDecisions.model_validate(
            {
                "decisions": [
                    {"fact": "n3", "decision": "UPDATE", "target": "c1"},
                    {"fact": "n4", "decision": "UPDATE", "target": "c9"},
                    {"fact": "n9", "decision": "NEW"},
                ]
            }
        )

    verdicts, calls = decide(items, ask)
    assert calls == 1 and len(seen) == 1
    assert "n1" not in seen[0] and "n2" not in seen[0] and "n3: The user lives in Berlin" in seen[0]
    assert (verdicts["n1"].decision, verdicts["n1"].by) == ("NEW", "rule")
    assert (verdicts["n2"].decision, verdicts["n2"].target and verdicts["n2"].target.id) == (
        "DUPLICATE",
        "f1",
    )
    assert (verdicts["n3"].decision, verdicts["n3"].target and verdicts["n3"].target.id) == ("UPDATE", "f1")
    assert (verdicts["n4"].decision, verdicts["n4"].by) == ("NEW", "default")  # c9 is nobody


def test_without_an_llm_everything_undecided_is_new() -> None:
    verdicts, calls = decide([NewFact("n1", "a b c", DAY, [cand("f1", "a b d")])], None)
    assert calls == 0 and verdicts["n1"].decision == "NEW"


def test_batches_bound_the_prompt_size() -> None:
    items = [NewFact(f"n{i}", f"fact {i}", DAY, [cand("f1", "other")]) for i in range(1, 6)]
    calls: list[str] = []
    decide(items, lambda b: calls.append(b) or VersionDecisions(), batch=2)
    assert len(calls) == 3


def test_a_shared_candidate_gets_one_label() -> None:
    block, labels = render_batch(
        [
            NewFact("n1", "a", DAY, [cand("f1", "x")]),
            NewFact("n2", "b", DAY, [cand("f1", "x"), cand("f2", "y")]),
        ]
    )
    assert list(labels) == ["c1", "c2"] and block.count("c1: x") == 2


def test_reinforcement_raises_confidence_towards_one_and_never_lowers_it() -> None:
    assert reinforced_confidence(0.5, 1.0) == 0.75
    assert reinforced_confidence(0.5, 0.0) == 0.5
    assert reinforced_confidence(1.0, 1.0) == 1.0
