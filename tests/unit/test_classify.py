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


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("где я сейчас живу?", QuestionType.knowledge_update),
        ("что ты мне посоветовал?", QuestionType.single_session_assistant),
        ("сколько всего книг я прочитал?", QuestionType.multi_session),
        ("что я делал две недели назад?", QuestionType.temporal_reasoning),
        ("посоветуй мне фильм на вечер", QuestionType.single_session_preference),
        ("我现在住在哪里？", QuestionType.knowledge_update),
        ("我总共买了几本书？", QuestionType.multi_session),
        ("推荐一部电影", QuestionType.single_session_preference),
        ("wie viele Bücher habe ich insgesamt gelesen?", QuestionType.multi_session),
        ("¿qué hice hace dos semanas?", QuestionType.temporal_reasoning),
        ("combien de livres ai-je lus au total ?", QuestionType.multi_session),
        ("quel est le nom de mon chat ?", QuestionType.single_session_user),
    ],
)
def test_the_rules_read_the_same_cues_in_other_languages(question: str, expected: QuestionType) -> None:
    assert classify(question).type is expected
