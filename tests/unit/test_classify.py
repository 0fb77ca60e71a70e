"""The question classifier: accuracy on the LongMemEval dev questions (kept >= 0.9) and the LLM fallback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from graphrecall.llm import LLMError, ScriptedLLM, Step
from graphrecall.read.classify import QuestionType, classify, classify_rules, classify_with_llm

DEV = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "data"
    / "longmemeval"
    / "longmemeval_s_dev.json.gz"
)


@pytest.mark.skipif(not DEV.exists(), reason=f"LongMemEval dev split not found at {DEV}")
def test_rules_classify_the_dev_questions_with_at_least_90_percent_accuracy() -> None:
    with gzip.open(DEV, "rt", encoding="utf-8") as f:
        questions = [(q["question"], q["question_type"]) for q in json.load(f)]
    correct = sum(classify(text).type.value == qtype for text, qtype in questions)
    accuracy = correct / len(questions)
    print(f"classifier accuracy on {len(questions)} dev questions: {accuracy:.3f}")
    assert len(questions) > 100
    assert accuracy >= 0.9


def test_preference_questions_get_synthesis_and_the_rest_recall() -> None:
    assert classify("Can you recommend some podcasts for my commute?").mode == "synthesis"
    assert classify("What is my dog's name?").mode == "recall"


def test_llm_fallback_is_asked_only_when_no_rule_claims_the_question() -> None:
    llm = ScriptedLLM([Step("Which Pokemon", {"type": "single-session-assistant"})])
    unclaimed = "Which Pokemon card was the rarest one in that list?"
    assert classify_rules(unclaimed) is None
    plan = classify_with_llm(unclaimed, llm)
    assert (plan.type, plan.rule) == (QuestionType.single_session_assistant, "LLM fallback")
    claimed = classify_with_llm("Can you recommend a good book?", llm)
    assert claimed.type is QuestionType.single_session_preference
    assert len(llm.calls) == 1


def test_llm_fallback_failure_falls_back_to_the_rule_default() -> None:
    llm = ScriptedLLM([Step(None, LLMError("down", status=503))])
    plan = classify_with_llm("Which Pokemon card was the rarest one in that list?", llm)
    assert plan.type is QuestionType.single_session_user and "failed" in plan.rule
