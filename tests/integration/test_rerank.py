"""Reranking plumbing: a tiny cross-encoder built here (no download) loads through ``rerankers`` and is applied.

The model is random and tiny, so these tests check wiring (scores per document, in input order, used by the
retriever), not ranking quality.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

from graphrecall import Memory, NotAvailable, RetrievalConfig, Scope, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.retrieve import rerank
from graphrecall.retrieve.rerank import CrossEncoderReranker, Reranker, load_reranker

WORDS = "i my a the puppy dog name called biscuit what is cat adopted pasta recipe garden tomatoes".split()
DOCS = ["I adopted a puppy called Biscuit", "a pasta recipe", "my cat", "tomatoes in the garden"]


def session_order(
    root: Path,
    sessions: list[dict[str, Any]],
    query: str,
    k: int,
    reranker: Reranker | None,
    rerank_weight: float,
) -> list[str]:
    """The session ids of ``query``'s hits in a fresh store at ``root`` holding ``sessions``."""
    scope = Scope(org_id="acme", user_id="alice")
    with Memory.open(
        root,
        embedder=HashingEmbedder(64),
        settings=Settings(root=root),
        reranker=reranker,
        retrieval=RetrievalConfig(rerank_weight=rerank_weight),
    ) as m:
        m.add_sessions(scope, sessions)
        return [h.session_id for h in m.search(scope, query, k)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=1,
    )
    model = BertForSequenceClassification(config)
    with torch.no_grad():  # spread the scores so that their order is unambiguous
        model.classifier.weight.mul_(200.0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def direct_scores(path: Path, query: str, docs: Sequence[str]) -> list[float]:
    """The model's logits computed straight with transformers, one pair at a time."""
    tokenizer = BertTokenizerFast.from_pretrained(path)
    model = BertForSequenceClassification.from_pretrained(path).eval()
    out = []
    with torch.no_grad():
        for doc in docs:
            out.append(float(model(**tokenizer(query, doc, return_tensors="pt")).logits[0, 0]))
    return out


def test_scores_come_back_per_document_in_input_order(tiny_model: Path) -> None:
    reranker = CrossEncoderReranker(str(tiny_model))
    assert isinstance(reranker, Reranker)
    query = "what is my dog called"
    scores = reranker.score(query, DOCS)
    assert scores == pytest.approx(direct_scores(tiny_model, query, DOCS), abs=1e-4)
    assert len(set(scores)) == len(DOCS)
    assert reranker.score(query, DOCS[::-1]) == pytest.approx(scores[::-1], abs=1e-4)
    assert reranker.score(query, DOCS[:1]) == pytest.approx(scores[:1], abs=1e-4)
    assert reranker.score(query, []) == []


def test_the_retriever_applies_the_reranker(tiny_model: Path, tmp_path: Path) -> None:
    scope = Scope(org_id="acme", user_id="alice")
    reranker = CrossEncoderReranker(str(tiny_model))
    with Memory.open(
        tmp_path, embedder=HashingEmbedder(64), settings=Settings(root=tmp_path), reranker=reranker
    ) as mem:
        mem.add_sessions(
            scope,
            [
                {"session_id": f"s{i}", "messages": [{"role": "user", "content": d}]}
                for i, d in enumerate(DOCS)
            ],
        )
        hits = mem.search(scope, "what is my puppy called", 4)
    assert hits
    expected = reranker.score("what is my puppy called", [h.text for h in hits])
    assert [h.signals["rerank"] for h in hits] == pytest.approx(expected, abs=1e-4)


class KeywordReranker:
    """A deterministic stand-in: documents containing the keyword score 1, others 0."""

    def __init__(self, keyword: str) -> None:
        self.keyword = keyword
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls.append((query, list(documents)))
        return [1.0 if self.keyword in d else 0.0 for d in documents]


def test_reranking_can_reorder_what_fusion_found(tmp_path: Path) -> None:
    sessions = [
        {"session_id": "a", "messages": [{"role": "user", "content": "garden garden garden tomatoes"}]},
        {"session_id": "b", "messages": [{"role": "user", "content": "garden notes, see Biscuit"}]},
    ]

    # With rerank_weight 1 (the default) fusion rank and rerank rank weigh the same, so swapping two neighbours
    # is a tie; a deployment that trusts its cross-encoder raises the weight.
    def order(reranker: Reranker | None, root: Path) -> list[str]:
        return session_order(root, sessions, "garden tomatoes", 2, reranker, 2.0)

    assert order(None, tmp_path / "plain") == ["a", "b"]
    keyword = KeywordReranker("Biscuit")
    assert order(keyword, tmp_path / "reranked") == ["b", "a"]
    assert keyword.calls and keyword.calls[0][0] == "garden tomatoes"


def test_no_reranker_configured_is_said_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rerank._Warned, "done", False)
    with caplog.at_level(logging.INFO, logger=rerank.__name__):
        assert load_reranker(None) is None
        assert load_reranker("") is None
        assert load_reranker(None) is None
    notes = [r for r in caplog.records if r.name == rerank.__name__]
    assert len(notes) == 1
    assert "GRAPHRECALL_RERANKER" in notes[0].getMessage()


def test_a_configured_name_gives_a_lazy_cross_encoder(tiny_model: Path) -> None:
    loaded = load_reranker(str(tiny_model))
    assert isinstance(loaded, CrossEncoderReranker)
    assert loaded.model == str(tiny_model)


def test_a_model_that_cannot_be_loaded_is_not_available(tmp_path: Path) -> None:
    reranker = CrossEncoderReranker(str(tmp_path / "no-such-model"))
    with pytest.raises(NotAvailable, match="no-such-model"):
        reranker.score("q", ["d"])


def test_a_reranker_with_max_documents_reads_no_more_than_that(tmp_path: Path) -> None:
    scope = Scope(org_id="acme", user_id="alice")
    keyword = KeywordReranker("Biscuit")
    keyword.max_documents = 2  # type: ignore[attr-defined]
    with Memory.open(
        tmp_path, embedder=HashingEmbedder(64), settings=Settings(root=tmp_path), reranker=keyword
    ) as mem:
        mem.add_sessions(
            scope,
            [
                {"session_id": f"s{i}", "messages": [{"role": "user", "content": f"garden note {i}"}]}
                for i in range(6)
            ],
        )
        hits = mem.search(scope, "garden note", 6)
    assert len(hits) == 6
    assert [len(docs) for _, docs in keyword.calls] == [2]
    assert sum("rerank" in h.signals for h in hits) == 2


def test_equal_rerank_scores_keep_the_fused_order_between_them(tmp_path: Path) -> None:
    sessions = [
        {
            "session_id": f"s{i:02d}",
            "messages": [{"role": "user", "content": f"garden note {'odd' if i % 2 else 'even'}" + " x" * i}],
        }
        for i in range(24)
    ]

    def order(reranker: Reranker | None, root: Path) -> list[str]:
        return session_order(root, sessions, "garden", 24, reranker, 3.0)

    # a reranker with coarse grades (an LLM's 0-3 scale) ties many candidates: ties keep the fused order
    plain = order(None, tmp_path / "plain")
    graded = order(KeywordReranker("odd"), tmp_path / "graded")
    assert graded != plain
    odd = {s["session_id"] for s in sessions if "odd" in s["messages"][0]["content"]}  # type: ignore[index]
    assert [x for x in graded if x in odd] == [x for x in plain if x in odd]
    assert [x for x in graded if x not in odd] == [x for x in plain if x not in odd]


def test_an_llm_reranker_reorders_by_its_grades(tmp_path: Path) -> None:
    from graphrecall.llm import ScriptedLLM, Step
    from graphrecall.retrieve.llm_rerank import LLMReranker

    def grade(messages: list) -> str:  # type: ignore[type-arg]
        return "yes" if "Biscuit" in messages[-1].content.split("Text:", 1)[1] else "no"

    llm = ScriptedLLM([Step(None, grade)], ordered=False)
    scope = Scope(org_id="acme", user_id="alice")
    with Memory.open(
        tmp_path,
        embedder=HashingEmbedder(64),
        settings=Settings(root=tmp_path),
        reranker=LLMReranker(llm, max_documents=4),
        retrieval=RetrievalConfig(rerank_weight=2.0),
    ) as mem:
        mem.add_sessions(
            scope,
            [
                {
                    "session_id": "a",
                    "messages": [{"role": "user", "content": "garden garden garden tomatoes"}],
                },
                {"session_id": "b", "messages": [{"role": "user", "content": "garden notes, see Biscuit"}]},
            ],
        )
        hits = mem.search(scope, "garden tomatoes", 2)
    assert [h.session_id for h in hits] == ["b", "a"]
    assert [h.signals["rerank"] for h in hits] == [1.0, 0.0]
    assert len(llm.calls) == 2


def test_the_llm_spec_builds_an_llm_reranker_over_the_memorys_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphrecall.errors import ConfigurationError
    from graphrecall.llm import ScriptedLLM
    from graphrecall.retrieve.llm_rerank import DEFAULT_MAX_DOCUMENTS, LLMReranker

    llm = ScriptedLLM()
    loaded = load_reranker("llm", llm)
    assert isinstance(loaded, LLMReranker)
    assert (loaded.llm, loaded.max_documents) == (llm, DEFAULT_MAX_DOCUMENTS)
    three = load_reranker("llm:3", llm)
    assert isinstance(three, LLMReranker) and three.max_documents == 3
    for bad in ("llm:0", "llm:many"):
        with pytest.raises(ConfigurationError, match="llm:N") as err:
            load_reranker(bad, llm)
        assert err.value.where == "GRAPHRECALL_RERANKER"
    settings = Settings(root=tmp_path, reranker="llm:2")
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings, llm=llm) as mem:
        from graphrecall import testing

        reranker = testing.retriever(mem).reranker
        assert isinstance(reranker, LLMReranker) and reranker.max_documents == 2
        assert reranker.llm is llm


def test_the_llm_reranker_without_an_llm_fails_at_search_and_names_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphrecall.errors import ConfigurationError

    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    scope = Scope(org_id="acme", user_id="alice")
    settings = Settings(root=tmp_path, reranker="llm")
    # opening the store, writing and listing need no model: only a search that reranks does
    with Memory.open(tmp_path, embedder=HashingEmbedder(64), settings=settings) as mem:
        mem.add_sessions(
            scope, [{"session_id": "s", "messages": [{"role": "user", "content": "hello there"}]}]
        )
        assert mem.scopes() == [scope]
        with pytest.raises(ConfigurationError, match="GRAPHRECALL_LLM") as err:
            mem.search(scope, "hello", 3)
    assert err.value.where == "GRAPHRECALL_LLM"


class ProbabilityReranker:
    """A stand-in whose scores are probabilities: fixed per keyword found in the document."""

    probabilities = True

    def __init__(self, by_keyword: dict[str, float]) -> None:
        self.by_keyword = by_keyword

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        return [next((p for k, p in self.by_keyword.items() if k in d), 0.0) for d in documents]


def test_probabilities_move_a_round_by_their_margin_not_their_rank(tmp_path: Path) -> None:
    sessions = [
        {"session_id": "a", "messages": [{"role": "user", "content": "garden garden garden tomatoes"}]},
        {"session_id": "b", "messages": [{"role": "user", "content": "garden notes, see Biscuit"}]},
    ]

    def order(reranker: Reranker, name: str) -> list[str]:
        return session_order(tmp_path / name, sessions, "garden tomatoes", 2, reranker, 2.0)

    # ranked by rank, 0.31 over 0.30 would count as much as 1 over 0
    assert order(ProbabilityReranker({"tomatoes": 0.30, "Biscuit": 0.31}), "close") == ["a", "b"]
    assert order(ProbabilityReranker({"tomatoes": 0.05, "Biscuit": 0.95}), "clear") == ["b", "a"]
