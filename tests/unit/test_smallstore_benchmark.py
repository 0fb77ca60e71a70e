"""The small-store test set and its benchmark: the data is what its README promises, and the scoring is right."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from benchmarks.smallstore import data
from benchmarks.smallstore.run import score
from pydantic import ValidationError


@pytest.fixture(scope="module")
def histories() -> dict[str, list[data.History]]:
    return {split: data.load(split) for split in data.SPLITS}


def test_the_set_is_big_enough_and_split_by_history(histories: dict[str, list[data.History]]) -> None:
    every = [h for hs in histories.values() for h in hs]
    assert len(every) >= 20
    assert sum(len(h.questions) for h in every) >= 80
    assert all(5 <= len(h.sessions) <= 15 for h in every)
    dev_ids = {h.id for h in histories["dev"]}
    assert dev_ids and dev_ids.isdisjoint(h.id for h in histories["test"])
    assert sum(q.changed for h in every for q in h.questions) >= 10


def test_every_history_is_a_chat_and_never_hands_its_labels_to_the_store(
    histories: dict[str, list[data.History]],
) -> None:
    for h in (h for hs in histories.values() for h in hs):
        sent = json.dumps(h.session_inputs())
        assert all(q.question not in sent for q in h.questions), h.id
        assert all({m.role for m in s.messages} == {"user", "assistant"} for s in h.sessions), h.id
        assert h.question_date == h.sessions[-1].date + timedelta(days=1)
        rounds = h.rounds()
        assert {sid for _, sid, _ in rounds} == {s.session_id for s in h.sessions}


def test_a_changed_answer_is_gold_in_a_later_session_than_the_first(
    histories: dict[str, list[data.History]],
) -> None:
    for h in (h for hs in histories.values() for h in hs):
        order = [s.session_id for s in h.sessions]
        for q in (q for q in h.questions if q.changed):
            assert max(order.index(g) for g in q.gold) > 0, q.id


def test_recall_and_reciprocal_rank_count_the_first_gold_session() -> None:
    assert score(["a", "b", "c", "d"], ["c"]) == {"r@1": 0.0, "r@3": 1.0, "mrr": pytest.approx(1 / 3)}
    assert score(["b", "a"], ["a", "b"]) == {"r@1": 1.0, "r@3": 1.0, "mrr": 1.0}
    assert score(["a", "b", "c", "d"], ["d"]) == {"r@1": 0.0, "r@3": 0.0, "mrr": 0.25}
    assert score(["a"], ["z"])["mrr"] == 0.0


def test_a_gold_id_that_names_no_session_is_refused_with_its_question(tmp_path: Path) -> None:
    raw = json.loads((data.DATA_DIR / "dev.json").read_text(encoding="utf-8"))
    raw["histories"][0]["questions"][0]["gold"] = ["h01-s99"]
    (tmp_path / "dev.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"h01-q1.*h01-s99"):
        data.load("dev", tmp_path)
    with pytest.raises(ValueError, match="unknown split"):
        data.load("train")


def test_the_llm_judgements_are_asked_once_and_kept_for_the_next_run(tmp_path: Path) -> None:
    from benchmarks.smallstore.run import MemoReranker

    from graphrecall.llm import ScriptedLLM, Step
    from graphrecall.retrieve.llm_rerank import LLMReranker

    llm = ScriptedLLM([Step(None, lambda m: "yes" if "Miso" in m[-1].content else "no")], ordered=False)
    cache = tmp_path / "judgements.json"
    memo = MemoReranker(LLMReranker(llm, max_documents=3), cache)
    assert memo.score("cat?", ["Miso", "risotto", "Miso"]) == [1.0, 0.0, 1.0]
    assert memo.score("cat?", ["risotto"]) == [0.0]
    assert (len(llm.calls), memo.calls) == (2, 2)
    memo.save()
    again = MemoReranker(LLMReranker(ScriptedLLM(), max_documents=3), cache)  # a model that answers nothing
    assert again.score("cat?", ["risotto", "Miso"]) == [0.0, 1.0]
    assert again.calls == 0 and again.max_documents == 3
    assert again.probabilities  # the retriever adds its scores, as it would the LLM reranker's own
