"""The LLM reranker: one yes/no request per candidate, scored by the model's probability of "yes"."""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.llm import ChatMessage, LLMResponse, ScriptedLLM, Step
from graphrecall.prompts import load_prompt
from graphrecall.retrieve.llm_rerank import (
    DOCUMENT_MAX_CHARS,
    LLMReranker,
    parse_answer,
    yes_probability,
)
from graphrecall.retrieve.rerank import Reranker


def excerpt(messages: list[ChatMessage]) -> str:
    return messages[-1].content.split("Text:", 1)[1]


def confident_about_miso(messages: list[ChatMessage]) -> LLMResponse:
    """A stand-in model that says "no" every time but is less sure of it when the text names Miso."""
    p_yes = 0.45 if "Miso" in excerpt(messages) else 0.1
    return LLMResponse(
        text="No", first_token_logprobs={"No": math.log(1 - p_yes), "Yes": math.log(p_yes), "To": -6.0}
    )


def test_the_prompt_has_the_question_and_the_document_as_placeholders() -> None:
    assert load_prompt("rerank_answers").placeholders == {"question", "document"}


def test_scores_are_the_probability_of_yes_not_the_word_said() -> None:
    llm = ScriptedLLM([Step(None, confident_about_miso)], ordered=False)
    reranker = LLMReranker(llm)
    assert isinstance(reranker, Reranker)
    docs = ["my cat knocked a cup over", "I named the kitten Miso"]
    assert reranker.score("what's my cat called?", docs) == pytest.approx([0.1, 0.45])
    assert len(llm.calls) == 2
    for call, doc in zip(llm.calls, docs, strict=True):
        # the question precedes the text, so a local server reuses the cached prefix across candidates
        assert call.last_user.index("what's my cat called?") < call.last_user.index(doc)
    assert reranker.score("anything", []) == []


def test_a_provider_without_log_probabilities_gives_one_or_zero() -> None:
    llm = ScriptedLLM([Step(None, lambda m: "Yes." if "Miso" in excerpt(m) else "no")], ordered=False)
    assert LLMReranker(llm).score("q", ["Miso", "risotto"]) == [1.0, 0.0]


def test_a_reply_that_is_neither_scores_one_half_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM([Step(None, "Maybe")], ordered=False)
    reranker = LLMReranker(llm)
    with caplog.at_level(logging.WARNING, logger="graphrecall.retrieve.llm_rerank"):
        assert reranker.score("q", ["a", "b"]) == [0.5, 0.5]
    assert reranker.unparsed == 2
    assert len([r for r in caplog.records if "neither yes nor no" in r.getMessage()]) == 1


def test_a_long_document_is_cut_before_it_is_sent() -> None:
    llm = ScriptedLLM([Step(None, "no")], ordered=False)
    LLMReranker(llm).score("q", ["word " * 2000])
    assert len(llm.calls[0].last_user) < 2000


def test_a_long_round_is_shown_by_what_bears_on_the_question_not_by_its_opening() -> None:
    advice = " ".join(f"Tip {i}: keep the strings clean and the humidity steady." for i in range(60))
    round_text = (
        "user: my guitar buzzes on the third fret\n"
        f"assistant: {advice} The shop on Elm Street, Fretworks, did your setup last spring. {advice}"
    )
    assert round_text.index("Fretworks") > DOCUMENT_MAX_CHARS
    llm = ScriptedLLM([Step(None, "no")], ordered=False)
    LLMReranker(llm).score("which shop did the setup on my guitar?", [round_text])
    sent = llm.calls[0].last_user
    assert "my guitar buzzes on the third fret" in sent  # the user's words whole
    assert "Fretworks" in sent  # the reply's sentence that shares the question's words
    assert len(sent) < DOCUMENT_MAX_CHARS + 200  # the prompt's own words besides the excerpt


def test_max_documents_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_documents"):
        LLMReranker(ScriptedLLM(), max_documents=0)


@given(
    st.floats(min_value=-20, max_value=0),
    st.floats(min_value=-20, max_value=0),
    st.sampled_from(["yes", "Yes", " YES", "yes."]),
    st.sampled_from(["no", "No", " NO", "no,"]),
)
def test_yes_probability_is_yes_over_yes_and_no(lp_yes: float, lp_no: float, yes: str, no: str) -> None:
    p = yes_probability({yes: lp_yes, no: lp_no, "Maybe": -0.1})
    assert p == pytest.approx(math.exp(lp_yes) / (math.exp(lp_yes) + math.exp(lp_no)))
    assert 0.0 <= p <= 1.0  # type: ignore[operator]


def test_yes_probability_adds_up_spellings_and_knows_when_it_has_nothing() -> None:
    assert yes_probability(
        {"Yes": math.log(0.3), "yes": math.log(0.1), "No": math.log(0.4)}
    ) == pytest.approx(0.5)
    assert yes_probability({"Maybe": -0.1}) is None
    assert yes_probability({}) is None


@pytest.mark.parametrize(
    ("reply", "value"), [("Yes", 1.0), ("yes, it does", 1.0), (" No.", 0.0), ("Maybe", None), ("", None)]
)
def test_parse_answer_reads_the_replies_models_give(reply: str, value: float | None) -> None:
    assert parse_answer(reply) == value


def test_a_failing_model_leaves_the_fused_order_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    from graphrecall.llm import LLMError

    llm = ScriptedLLM([Step(None, LLMError("connection refused", status=None))], ordered=False)
    reranker = LLMReranker(llm)
    with caplog.at_level(logging.WARNING, logger="graphrecall.retrieve.llm_rerank"):
        assert reranker.score("q", ["a", "b"]) == [0.5, 0.5]  # equal scores: the retriever keeps its order
    assert reranker.failures == 1
    assert any("keeps the fused order" in r.getMessage() for r in caplog.records)
