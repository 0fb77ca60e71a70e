"""The QA harnesses without a real model: judge prompt choice per category, the official-judge loader (which
must run only the one function, never the rest of the official script), resume semantics, summaries and
reports, LoCoMo loading and token F1, and one LongMemEval question answered and judged with scripted models."""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks package lives at the repo root

from benchmarks.locomo import data as locomo
from benchmarks.longmemeval import data as lme
from benchmarks.longmemeval.judge import Judge, OfficialJudgeError, is_yes, load_official, template_for
from benchmarks.longmemeval.qa import answer_question, categories, run_all, summarize, write_outputs
from benchmarks.provenance import Run

from graphrecall import Memory, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.llm import ScriptedLLM, Step


def test_each_category_gets_its_own_judge_prompt() -> None:
    assert template_for("temporal-reasoning", False) == "judge_temporal"
    assert template_for("knowledge-update", False) == "judge_update"
    assert template_for("single-session-preference", False) == "judge_preference"
    assert template_for("multi-session", False) == "judge_default"
    assert template_for("temporal-reasoning", True) == "judge_abstention"


def test_our_judge_prompts_carry_the_official_criteria() -> None:
    llm = ScriptedLLM([])
    judge = Judge(llm)
    _, temporal = judge.prompt("temporal-reasoning", "How many days?", "19", "20 days", False)
    assert "off" in temporal.lower() or "differs from the reference by exactly one" in temporal
    _, update = judge.prompt("knowledge-update", "Where now?", "Paris", "Lyon, now Paris", False)
    assert "earlier value" in update
    _, abst = judge.prompt("multi-session", "Q?", "never mentioned", "I don't know", True)
    assert "cannot answer" in abst
    _, pref = judge.prompt("single-session-preference", "Suggest?", "likes jazz", "jazz bars", False)
    assert "Rubric" in pref and "likes jazz" in pref


def test_yes_rule_matches_the_official_script() -> None:
    assert is_yes("Yes.") and is_yes("yes, it is") and not is_yes("No") and not is_yes("")


OFFICIAL_STUB = """
import module_that_does_not_exist  # the loader must not execute module-level code
raise SystemExit("module body executed")

def get_anscheck_prompt(task, question, answer, response, abstention=False):
    return f"STUB[{task}|{abstention}] {question} / {answer} / {response}"
"""


def test_official_templates_are_loaded_from_a_local_checkout_without_running_it(tmp_path: Path) -> None:
    file = tmp_path / "LongMemEval" / "src" / "evaluation" / "evaluate_qa.py"
    file.parent.mkdir(parents=True)
    file.write_text(OFFICIAL_STUB)
    for where in (tmp_path / "LongMemEval", file):
        fn = load_official(where)
        assert fn("multi-session", "Q", "A", "R", abstention=True) == "STUB[multi-session|True] Q / A / R"
    llm = ScriptedLLM([Step("STUB[knowledge-update|False]", "yes")])
    verdict = Judge(llm, load_official(file)).judge("knowledge-update", "Q", "A", "R", False)
    assert verdict.correct and verdict.prompt_name == "official"


def test_a_missing_or_unusable_official_checkout_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OfficialJudgeError, match="not found"):
        load_official(tmp_path)
    bad = tmp_path / "evaluate_qa.py"
    bad.write_text("def something_else(): pass\n")
    with pytest.raises(OfficialJudgeError, match="get_anscheck_prompt"):
        load_official(bad)


def test_run_all_resumes_skipping_finished_items_and_retrying_failed_ones(tmp_path: Path) -> None:
    jsonl = tmp_path / "qa.jsonl"
    seen: list[str] = []

    def work(item: str) -> dict[str, object]:
        seen.append(item)
        if item == "b" and seen.count("b") == 1:
            raise RuntimeError("flaky")
        return {"id": item, "correct": item != "c"}

    first = run_all(["a", "b", "c"], str, work, jsonl, concurrency=2, progress=False)
    assert {r["id"]: bool(r.get("error")) for r in first} == {"a": False, "b": True, "c": False}
    second = run_all(["a", "b", "c"], str, work, jsonl, concurrency=2, progress=False)
    assert sorted(seen) == ["a", "b", "b", "c"]
    assert [r["id"] for r in second] == ["a", "b", "c"] and not any(r.get("error") for r in second)


def test_summary_counts_categories_and_reports_are_written(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {
            "id": "q1",
            "question_type": "multi-session",
            "correct": True,
            "reader_input_tokens": 10,
            "answer_s": 1.0,
        },
        {
            "id": "q2_abs",
            "question_type": "multi-session",
            "correct": False,
            "abstained": True,
            "answer_s": 3.0,
        },
        {"id": "q3", "question_type": "temporal-reasoning", "correct": True, "judge_cost_usd": 0.5},
        {"id": "q4", "error": "boom"},
    ]
    s = summarize(rows, categories)
    assert (s["n"], s["accuracy"], s["abstained"]) == (3, 2 / 3, 1)
    assert s["by_category"]["multi-session"] == {"n": 2, "accuracy": 0.5, "abstained": 1}
    assert (
        s["by_category"]["abstention"]["n"] == 1 and s["by_category"]["temporal-reasoning"]["accuracy"] == 1.0
    )
    assert s["tokens"]["reader_input_tokens"] == 10 and s["cost_usd"]["judge_cost_usd"] == 0.5
    report = write_outputs(tmp_path, "LongMemEval QA", s, {"command": "x", "reader": "scripted"}, Run.begin())
    text = report.read_text()
    assert "| multi-session | 2 | 50.0% | 1 |" in text and "![accuracy per category](accuracy.png)" in text
    assert (tmp_path / "accuracy.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "summary.json").read_text())["summary"]["n"] == 3


def test_locomo_dates_speakers_and_token_f1() -> None:
    assert locomo.parse_locomo_date("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00"
    with pytest.raises(ValueError, match="unrecognised"):
        locomo.parse_locomo_date("sometime in spring")
    assert locomo.token_f1("7 May 2023", "7 May 2023") == 1.0
    assert locomo.token_f1("on the 7th of May", "7 May 2023") == pytest.approx(
        2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3)
    )
    assert locomo.token_f1("", "x") == 0.0


LOCOMO_DEV = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "locomo" / "locomo_dev.json.gz"


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason=f"LoCoMo dev data not found at {LOCOMO_DEV}")
def test_locomo_conversations_load_as_sessions_with_questions_of_categories_1_to_4() -> None:
    convs = locomo.load(LOCOMO_DEV)
    assert len(convs) == 2
    c = convs[0]
    assert all(q.category in {1, 2, 3, 4} for q in c.qa) and c.qa
    first = c.sessions[0]["messages"][0]
    assert first["role"] == "user" and first["content"].startswith(f"{c.speaker_a}: ")
    assert c.last_date == max(datetime.fromisoformat(s["date"]) for s in c.sessions)


def _question() -> lme.Question:
    turns = (
        lme.Turn("user", "My sister Ana lives in Porto.", True),
        lme.Turn("assistant", "Nice city!", False),
    )
    other = (
        lme.Turn("user", "How do I bake bread?", False),
        lme.Turn("assistant", "Flour, water, salt.", False),
    )
    return lme.Question(
        question_id="q_demo", question_type="single-session-user", question="Where does my sister live?",
        question_date="2024/05/01 (Wed) 10:00", answer="Porto", answer_session_ids=("answer_1",),
        sessions=(lme.HaystackSession("answer_1", "2024/04/01 (Mon) 09:00", turns),
                  lme.HaystackSession("s_2", "2024/04/02 (Tue) 09:00", other)),
    )  # fmt: skip


def test_one_longmemeval_question_is_ingested_answered_judged_and_its_scope_erased(tmp_path: Path) -> None:
    reader = ScriptedLLM(
        [
            Step("Retrieved memory", {"verdict": "YES", "evidence_ids": ["answer_1@0"]}),
            Step("Memory excerpts", "ANSWER: Porto\nEVIDENCE: [answer_1@0]"),
        ]
    )
    judge = Judge(ScriptedLLM([Step("Reference answer: Porto", "yes")]))
    root = tmp_path / "store"
    with Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root)) as mem:
        row = answer_question(mem, _question(), reader, judge, extract=False, tools="auto", max_tool_steps=2)
        assert mem.scopes() == []
    assert (row["id"], row["hypothesis"], row["correct"]) == ("q_demo", "Porto", True)
    assert row["cited_evidence"] == ["answer_1@0"] and row["judge_prompt"] == "judge_default"
    assert row["reader_input_tokens"] > 0 and row["judge_input_tokens"] > 0


def test_a_ray_task_rebuilds_reader_judge_and_store_from_its_spec(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What a Ray worker runs for one question (here in this process): the spec's plain values become the reader
    and the judge, kept for the worker's next task, and a store of the task's own, removed when it ends."""
    from benchmarks.longmemeval import qa

    from graphrecall import raymap

    scripts = {
        "openai:reader": lambda: ScriptedLLM(
            [
                Step("Retrieved memory", {"verdict": "YES", "evidence_ids": ["answer_1@0"]}),
                Step("Memory excerpts", "ANSWER: Porto\nEVIDENCE: [answer_1@0]"),
            ]
        ),
        "openai:judge": lambda: ScriptedLLM([Step("Reference answer: Porto", "yes")]),
    }
    monkeypatch.setattr(qa, "build_llm", lambda spec, base_url, timeout: scripts[spec]())
    spec = qa.QASpec(
        llm="openai:reader", base_url=None, judge="openai:judge", judge_base_url=None, timeout=5.0,
        embedder="hashing", embed_cache=None, extract=False, tools="auto", max_tool_steps=2, token_budget=None,
    )  # fmt: skip
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the task's temporary store goes
    row = qa.question_task(spec, _question())
    assert (row["id"], row["hypothesis"], row["correct"]) == ("q_demo", "Porto", True)
    assert list(tmp_path.iterdir()) == []  # the store is gone with the task; the worker keeps its models
    worker = raymap.worker_state(("lme-qa", spec.key()), lambda: pytest.fail("built again"))
    assert worker.reader.calls
    worker.close()


def test_a_locomo_ray_task_ingests_its_conversation_once_and_answers_the_questions_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a Ray worker runs for one LoCoMo conversation (here in this process, scripted models): only the
    questions it is handed, two at a time, each row as a local run writes it."""
    import gzip

    from benchmarks.locomo import qa as locomo_qa
    from tests.integration.test_locomo_retrieval import _raw as locomo_raw

    from graphrecall import raymap

    reader = [
        Step("Retrieved memory", {"verdict": "YES", "evidence_ids": []}),
        Step("Memory excerpts", "ANSWER: Biscuit\nEVIDENCE: []"),
    ]
    scripts = {
        "openai:reader": lambda: ScriptedLLM(reader, ordered=False),
        "openai:judge": lambda: ScriptedLLM([Step("Reference answer", "yes")], ordered=False),
    }
    monkeypatch.setattr(locomo_qa, "build_llm", lambda spec, base_url, timeout: scripts[spec]())
    monkeypatch.setattr(
        "benchmarks.longmemeval.qa.build_llm", lambda spec, base_url, timeout: scripts[spec]()
    )
    path = tmp_path / "locomo.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump([locomo_raw()], f)
    (conv,) = locomo.load(path, {1, 2, 4})
    spec = locomo_qa.QASpec(
        llm="openai:reader", base_url=None, judge="openai:judge", judge_base_url=None, timeout=5.0,
        embedder="hashing", embed_cache=None, extract=False, tools="none", max_tool_steps=0, token_budget=None,
    )  # fmt: skip
    rows = locomo_qa.conversation_task(spec, 2, locomo_qa.Pending(conv, tuple(conv.qa[:2])))
    assert [r["id"] for r in rows] == [qa.id for qa in conv.qa[:2]]
    assert all(not r.get("error") and r["hypothesis"] == "Biscuit" for r in rows), rows
    assert rows[0]["correct"] is True and rows[0]["f1"] == 1.0
    raymap.worker_state(("locomo-qa", spec.key()), lambda: pytest.fail("built again")).close()
