"""Opt-in: the LLM reranker against the real local llama.cpp server (see /work/shared/llm/README.md).

Proves what the scripted tests cannot: the real server returns first-token log probabilities for the yes/no
question, so scores are probabilities rather than the 1/0 fallback, and the excerpt that answers scores above
ones that only share words with the question. Run with ``pytest -m e2e tests/e2e/test_e2e_rerank.py``.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def test_the_answering_excerpt_gets_the_highest_probability(local_llm_url: str) -> None:
    pytest.importorskip("openai")
    from graphrecall.llm.openai import OpenAILLM
    from graphrecall.retrieve.llm_rerank import LLMReranker

    reranker = LLMReranker(OpenAILLM("local", base_url=local_llm_url, timeout=300, max_retries=1))
    docs = [
        "I'm hosting book club on Friday. I think I'll cook a big pot of mushroom risotto for everyone",
        "I adopted a little grey kitten from the shelter today!! I named her Miso",
        "Just got home from a night shift. I work in the ER and I can never sleep during the day",
    ]
    scores = reranker.score("what's my cat called again?", docs)
    assert reranker.unparsed == 0
    assert all(0.0 < s < 1.0 for s in scores), scores  # probabilities, not the 1/0 of a bare yes or no
    assert scores[1] == max(scores) and scores[1] - max(scores[0], scores[2]) > 0.1, scores
