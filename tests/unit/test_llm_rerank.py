"""The LLM reranker: one graded request per candidate, the grade as its score, a bad reply scored 0 not raised."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.llm import ChatMessage, ScriptedLLM, Step
from graphrecall.prompts import load_prompt
from graphrecall.retrieve.llm_rerank import LLMReranker, parse_grade
from graphrecall.retrieve.rerank import Reranker


def grade_by_keyword(messages: list[ChatMessage]) -> str:
    """A stand-in model: grade 3 when the excerpt names Miso, 1 when it mentions a cat, else 0."""
    excerpt = messages[-1].content.split("Excerpt:", 1)[1]
    return "3" if "Miso" in excerpt else "1" if "cat" in excerpt else "0"


def test_the_prompt_has_the_question_and_the_document_as_placeholders() -> None:
    assert load_prompt("rerank_relevance").placeholders == {"question", "document"}


def test_each_document_is_graded_in_its_own_request_question_first() -> None:
    llm = ScriptedLLM([Step(None, grade_by_keyword, times=None)], ordered=False)
    reranker = LLMReranker(llm)
    assert isinstance(reranker, Reranker)
    docs = ["my cat knocked a cup over", "I named the kitten Miso", "risotto for book club"]
    assert reranker.score("what's my cat called?", docs) == [1.0, 3.0, 0.0]
    assert len(llm.calls) == 3
    for call, doc in zip(llm.calls, docs, strict=True):
        # the question precedes the excerpt, so a local server reuses the cached prefix across candidates
        assert call.last_user.index("what's my cat called?") < call.last_user.index(doc)
    assert reranker.score("anything", []) == []


def test_a_reply_without_a_grade_scores_zero_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM([Step(None, "I think it is relevant", times=None)], ordered=False)
    reranker = LLMReranker(llm)
    with caplog.at_level(logging.WARNING, logger="graphrecall.retrieve.llm_rerank"):
        assert reranker.score("q", ["a", "b"]) == [0.0, 0.0]
    assert reranker.unparsed == 2
    assert len([r for r in caplog.records if "without a grade" in r.getMessage()]) == 1


def test_a_long_document_is_clipped_before_it_is_sent() -> None:
    llm = ScriptedLLM([Step(None, "2", times=None)], ordered=False)
    LLMReranker(llm).score("q", ["word " * 2000])
    assert len(llm.calls[0].last_user) < 3000


def test_max_documents_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_documents"):
        LLMReranker(ScriptedLLM(), max_documents=0)


@given(st.text(max_size=40))
def test_parse_grade_takes_the_first_digit_from_0_to_3(reply: str) -> None:
    m = re.search(r"[0-3]", reply)
    assert parse_grade(reply) == (int(m.group(0)) if m else None)


@pytest.mark.parametrize(
    ("reply", "grade"), [("3", 3), (" 2.", 2), ("Grade: 1", 1), ("0 - unrelated", 0), ("9", None), ("", None)]
)
def test_parse_grade_reads_the_replies_models_give(reply: str, grade: int | None) -> None:
    assert parse_grade(reply) == grade
