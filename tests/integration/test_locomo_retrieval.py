"""The LoCoMo retrieval benchmark: speaker layouts, evidence dia ids mapped to stored rounds, metrics, a tiny run."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.locomo import data
from benchmarks.locomo.retrieval import (
    evidence_recall,
    evidence_turns,
    labelled_rounds,
    run_conversation,
    summarize,
)
from benchmarks.longmemeval import harness

from graphrecall import Memory
from graphrecall.config import RetrievalConfig
from graphrecall.embed import HashingEmbedder


def _raw() -> dict[str, Any]:
    turn = lambda s, d, t: {"speaker": s, "dia_id": d, "text": t}  # noqa: E731
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1": [
                turn("Ann", "D1:1", "I adopted a puppy called Biscuit."),
                turn("Bob", "D1:2", "Lovely! I started pottery classes."),
                turn("Bob", "D1:3", "The teacher is called Mira."),
                turn("Ann", "D1:4", " "),
                turn("Ann", "D1:5", "Pottery sounds fun."),
            ],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": [
                turn("Bob", "D2:1", "My sister visits Lisbon next week."),
                turn("Ann", "D2:2", "Biscuit chewed my shoes."),
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
        },
        "qa": [
            {
                "question": "What is Ann's puppy called?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Who teaches Bob pottery?",
                "answer": "Mira",
                "evidence": ["D1:2; D1:3"],
                "category": 1,
            },
            {
                "question": "Where does Bob's sister go?",
                "answer": "Lisbon",
                "evidence": ["D2:1", "D9:9"],
                "category": 2,
            },
            {"question": "Is there a cat?", "adversarial_answer": "no", "evidence": [], "category": 5},
        ],
    }


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump([_raw()], f)
    return path


def test_speaker_b_is_the_assistant_by_default_and_a_user_with_both_user(tmp_path: Path) -> None:
    (conv,) = data.load(_write(tmp_path))
    roles = [m["role"] for m in conv.sessions[0]["messages"]]
    assert roles == ["user", "assistant", "assistant", "user"]  # the blank turn is dropped
    assert conv.dia_ids[0] == ("D1:1", "D1:2", "D1:3", "D1:5")
    (both,) = data.load(_write(tmp_path), both_user=True)
    assert {m["role"] for s in both.sessions for m in s["messages"]} == {"user"}
    assert [m["content"] for m in both.sessions[0]["messages"]] == [
        m["content"] for m in conv.sessions[0]["messages"]
    ]
    assert [q.category for q in conv.qa] == [4, 1, 2]  # adversarial left out by default


def test_evidence_turns_map_to_the_rounds_memory_builds(tmp_path: Path) -> None:
    (conv,) = data.load(_write(tmp_path))
    rounds = labelled_rounds(conv)
    # Ann's turn and Bob's two replies form one round; the layout decides the round boundaries.
    assert [r.dia_ids for r in rounds] == [("D1:1", "D1:2", "D1:3"), ("D1:5",), ("D2:1",), ("D2:2",)]
    (both,) = data.load(_write(tmp_path), both_user=True)
    assert len(labelled_rounds(both)) == 6  # every turn its own round
    round_of = {d: r.id for r in rounds for d in r.dia_ids}
    found, unknown = evidence_turns(conv.qa[1], round_of)
    assert found == ["D1:2", "D1:3"] and unknown == []  # "D1:2; D1:3" is split
    found, unknown = evidence_turns(conv.qa[2], round_of)
    assert found == ["D2:1"] and unknown == ["D9:9"]


def test_evidence_recall_is_the_fraction_of_evidence_turns_in_the_top_k() -> None:
    round_of = {"D1:1": "s1@0", "D1:2": "s1@0", "D2:1": "s2@0"}
    assert evidence_recall(["s1@0", "x"], ["D1:1", "D1:2", "D2:1"], round_of, 2) == pytest.approx(2 / 3)
    assert evidence_recall(["x", "s1@0", "s2@0"], ["D1:1", "D2:1"], round_of, 1) == 0.0
    assert evidence_recall(["x", "s1@0", "s2@0"], ["D1:1", "D2:1"], round_of, 3) == 1.0


@pytest.mark.parametrize("both_user", [False, True])
def test_a_conversation_is_stored_once_searched_per_question_and_erased(
    tmp_path: Path, both_user: bool
) -> None:
    (conv,) = data.load(_write(tmp_path), both_user=both_user)
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        variants = harness.variant_searchers(mem, RetrievalConfig(), {"k60": {"rrf_k": 60}})
        rows, _ = run_conversation(mem, conv, conv.qa, variants, [4000], "test")
        assert mem.scopes() == []
    assert [r.category for r in rows] == ["single-hop", "multi-hop", "temporal"]
    stored = {r.id for r in labelled_rounds(conv)}
    for r in rows:
        assert set(r.ranked) == {"ours", "k60", "bm25"}
        assert r.ranked["ours"] and set(r.ranked["ours"]) <= stored
        # The whole conversation fits in 4000 tokens and in the top 10: everything is found.
        assert r.scores["bm25"]["turn.evidence_recall@10"] == 1.0
        assert r.scores["ours"]["context.sessions_all@4000"] == 1.0
    summary = summarize(rows, ["ours", "k60", "bm25"])
    assert summary["n_scored"] == 3
    assert summary["ours"]["by_category"]["temporal"]["n"] == 1
