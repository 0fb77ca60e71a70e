"""The documents benchmark (``benchmarks/documents/recall.py``) on a made-up LongMemEval file, model-free: the notes
document holds the answer session's user turns and nothing of the labels, and both ranks are measured."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # ``benchmarks`` lives at the repository root

from benchmarks.documents import recall
from benchmarks.longmemeval import data


def _question(qid: str, question: str, evidence: str) -> dict[str, object]:
    sessions = {
        "chat_1": [
            ("user", "Any tips for a rainy weekend in town?"),
            ("assistant", "Museums and a long lunch."),
        ],
        "answer_1": [
            ("user", "Morning! Quick question about my plants."),
            ("assistant", "Sure, go ahead."),
            ("user", evidence),
            ("assistant", "Noted."),
        ],
        "chat_2": [("user", "How do I fix a squeaky door?"), ("assistant", "A drop of oil on the hinge.")],
    }
    return {
        "question_id": qid, "question_type": "single-session-user", "question": question,
        "question_date": "2023/06/01 (Thu) 10:00", "answer": "x", "answer_session_ids": ["answer_1"],
        "haystack_session_ids": list(sessions),
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/10 (Wed) 09:00", "2023/05/20 (Sat) 09:00"],
        "haystack_sessions": [
            [{"role": r, "content": c, **({"has_answer": True} if c == evidence else {})} for r, c in turns]
            for turns in sessions.values()
        ],
    }  # fmt: skip


def test_the_notes_hold_the_answer_sessions_user_turns_and_both_ranks_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "lme.json"
    path.write_text(
        json.dumps(
            [
                _question(
                    "q1", "What did I name my cactus?", "I named my cactus Spike, he lives on the sill."
                ),
                _question("q2", "How often do I water the fern?", "I water the fern every Tuesday morning."),
            ]
        )
    )
    q = data.load(path)[0]
    text, date, evidence = recall.notes(q)
    assert text.startswith("# Notes\n\n## Session 2023/05/10 (Wed) 09:00\n\nMorning! Quick question")
    assert "Noted." not in text and "has_answer" not in text  # user turns only, never a label
    assert evidence == ["I named my cactus Spike, he lives on the sill."] and date == "2023/05/10 (Wed) 09:00"
    out = tmp_path / "out"
    recall.main(["--data", str(path), "--embedder", "hashing", "--out", str(out)])
    report = json.loads((out / "documents.json").read_text())
    assert [r["question_id"] for r in report["questions"]] == ["q1", "q2"]
    assert all(r["document_rank"] is not None and r["chat_rank"] is not None for r in report["questions"])
    assert set(report["document"]) == {"r1", "r5", "mrr"} and "run" in report
    assert "| document passage" in (out / "documents.md").read_text()
