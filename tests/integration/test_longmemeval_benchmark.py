"""The LongMemEval retrieval benchmark: metric definitions, data handling (labels never reach the store), BM25."""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

# ``benchmarks`` lives at the repository root, outside the installed package (until pytest's ``pythonpath``
# includes the root, put it on the path here).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.longmemeval import data, harness, metrics
from benchmarks.longmemeval.bm25 import BM25
from benchmarks.longmemeval.retrieval import (
    _parser,
    render_context,
    render_systems,
    rescore,
    reusable,
    run_cv,
    run_question,
    summarize,
)

from graphrecall import Memory
from graphrecall.config import RetrievalConfig
from graphrecall.embed import HashingEmbedder


# -- metrics ---------------------------------------------------------------------------------------------------
def test_recall_any_needs_one_relevant_item_in_the_top_k() -> None:
    assert metrics.recall_any(["a", "b", "c"], {"c", "z"}, 3) == 1.0
    assert metrics.recall_any(["a", "b", "c"], {"c", "z"}, 2) == 0.0


def test_recall_all_needs_every_relevant_item_in_the_top_k() -> None:
    assert metrics.recall_all(["a", "b", "c"], {"a", "c"}, 3) == 1.0
    assert metrics.recall_all(["a", "b", "c"], {"a", "c"}, 2) == 0.0


def test_ndcg_is_one_when_relevant_items_lead_and_uses_the_official_discount() -> None:
    assert metrics.ndcg_any(["a", "b", "x"], {"a", "b"}, 10) == pytest.approx(1.0)
    # The official discount weighs ranks 1 and 2 alike, so a single relevant item at rank 2 still scores 1.
    assert metrics.ndcg_any(["x", "a"], {"a"}, 10) == pytest.approx(1.0)
    assert metrics.ndcg_any(["x", "y", "z", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(4))
    assert metrics.ndcg_any(["x", "y", "z", "a"], {"a"}, 3) == 0.0


def test_ndcg_ideal_counts_relevant_items_that_were_not_retrieved() -> None:
    # Two relevant items, one retrieved at rank 1: DCG 1 over ideal DCG 1 + 1 (ranks 1 and 2).
    assert metrics.ndcg_any(["a", "x"], {"a", "b"}, 10) == pytest.approx(0.5)


def test_sessions_rank_by_their_best_round() -> None:
    session_of = {"s1@0": "s1", "s2@0": "s2", "s1@1": "s1", "s3@0": "s3"}
    assert metrics.sessions_from_rounds(["s2@0", "s1@1", "s3@0", "s1@0"], session_of) == ["s2", "s1", "s3"]


def test_first_rank_is_one_based_and_none_when_missing() -> None:
    assert metrics.first_rank(["x", "a"], {"a"}) == 2
    assert metrics.first_rank(["x"], {"a"}) is None


def test_group_means_report_sizes() -> None:
    out = metrics.by_group([("t1", {"m": 1.0}), ("t1", {"m": 0.0}), ("t2", {"m": 1.0})])
    assert out == {"t1": (2, {"m": 0.5}), "t2": (1, {"m": 1.0})}


# -- BM25 ------------------------------------------------------------------------------------------------------
def test_bm25_ranks_the_document_with_the_rare_query_term_first() -> None:
    docs = ["the cat sat", "the dog sat", "a zebra sat on the mat", "the cat ran"]
    bm = BM25(docs)
    assert bm.rank("where is the zebra", 4)[0] == 2
    assert all(s >= 0 for s in bm.scores("the sat"))


def test_bm25_prefers_the_shorter_document_at_equal_term_frequency() -> None:
    bm = BM25(["violin", "violin lessons every week with a teacher in town"])
    assert bm.rank("violin", 2) == [0, 1]


# -- data ------------------------------------------------------------------------------------------------------
def _raw_question(qid: str = "q1", qtype: str = "single-session-assistant") -> dict[str, Any]:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": "Which violin teacher did you recommend to me?",
        "question_date": "2023/06/01 (Thu) 10:00",
        "answer": "Ms Alder",
        "answer_session_ids": ["ev1"],
        "haystack_session_ids": ["noise", "ev1", "noise"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/20 (Sat) 07:47", "2023/05/01 (Mon) 09:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "How do I bake sourdough bread?"},
                {"role": "assistant", "content": "Feed the starter, then knead the dough."},
            ],
            [
                {"role": "user", "content": "I want to learn an instrument.", "has_answer": False},
                {"role": "assistant", "content": "Try the violin."},
                {"role": "user", "content": " "},
                {"role": "user", "content": "Any violin teacher?"},
                {"role": "assistant", "content": "Ms Alder teaches violin downtown.", "has_answer": True},
            ],
            [
                {"role": "user", "content": "How do I bake sourdough bread?"},
                {"role": "assistant", "content": "Feed the starter, then knead the dough."},
            ],
        ],
    }


def _write(tmp_path: Path, items: list[dict[str, Any]]) -> Path:
    path = tmp_path / "lme.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(items, f)
    return path


def test_load_skips_abstention_filters_types_and_limits(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [_raw_question("a"), _raw_question("b_abs"), _raw_question("c", "multi-session"), _raw_question("d")],
    )
    assert [q.question_id for q in data.load(path)] == ["a", "c", "d"]
    assert [q.question_id for q in data.load(path, types=["multi-session"])] == ["c"]
    assert [q.question_id for q in data.load(path, limit=2)] == ["a", "c"]
    assert [q.question_id for q in data.load(path, include_abstention=True, limit=2)] == ["a", "b_abs"]


def test_a_session_repeated_verbatim_is_kept_once_but_conflicting_repeats_are_refused(tmp_path: Path) -> None:
    (q,) = data.load(_write(tmp_path, [_raw_question()]))
    assert [s.session_id for s in q.sessions] == ["noise", "ev1"]
    bad = _raw_question()
    bad["haystack_sessions"][2] = [{"role": "user", "content": "something else"}]
    with pytest.raises(ValueError, match="noise"):
        data.load(_write(tmp_path, [bad]))


def test_session_inputs_carry_no_labels_and_drop_blank_messages(tmp_path: Path) -> None:
    (q,) = data.load(_write(tmp_path, [_raw_question()]))
    inputs = data.session_inputs(q)
    messages = [m for s in inputs for m in s["messages"]]
    assert all(set(m) == {"role", "content"} for m in messages)
    assert all(m["content"].strip() for m in messages)


def test_evidence_rounds_include_rounds_whose_evidence_is_in_the_reply(tmp_path: Path) -> None:
    (q,) = data.load(_write(tmp_path, [_raw_question()]))
    labelled = data.all_rounds(q)
    evidence = data.evidence_rounds(q, labelled)
    assert len(evidence) == 1
    (rid,) = evidence
    assert "Ms Alder" in next(r.text for r in labelled if r.id == rid)


# -- end to end on a tiny haystack -----------------------------------------------------------------------------
def test_run_question_ranks_and_scores_both_systems_and_leaves_no_scope(tmp_path: Path) -> None:
    (q,) = data.load(_write(tmp_path, [_raw_question()]))
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        r = run_question(mem, q, [1, 5])
        assert mem.scopes() == []
    stored_ids = {x.id for x in data.all_rounds(q)}
    assert set(r.ranked["ours"]) <= stored_ids and r.ranked["ours"]
    assert set(r.scores) == {"ours", "bm25"}
    assert r.scores["bm25"]["turn"]["recall_any@5"] == 1.0  # 3 rounds in all: top 5 holds everything
    summary = summarize([r], [1, 5])
    assert summary["ours"]["session"]["by_type"]["single-session-assistant"]["n"] == 1


def test_variants_are_searched_over_the_same_scope_and_scored_beside_ours(tmp_path: Path) -> None:
    (q,) = data.load(_write(tmp_path, [_raw_question()]))
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        lexical_only = {
            "weights": {"vector": 0.0, "bm25": 1.0, "bm25_user": 0.0},
            "time_boost": 0.0,
            "in_range_weight": 0.0,
        }
        variants = harness.variant_searchers(mem, RetrievalConfig(), {"lexical": lexical_only})
        r = run_question(mem, q, [1, 5], variants)
        assert mem.scopes() == []
    assert set(r.scores) == {"ours", "lexical", "bm25"}
    # Only rounds sharing a term with the question can come from a BM25-only system.
    assert r.ranked["lexical"] and len(r.ranked["lexical"]) < len(r.ranked["ours"])
    summary = summarize([r], [1, 5])
    assert summary["systems"] == ["ours", "lexical", "bm25"]
    table = render_systems(summary, {"variants": {"lexical": {"weights": {"bm25": 1.0}}}})
    assert "| lexical |" in table and "| ours | `(defaults)` |" in table


@pytest.mark.parametrize(
    "arg",
    ['ours={"rrf_k": 30}', "noname", 'x={"rrf_k": "many"}', 'x={"no_such_field": 1}', "x=[1]"],
)
def test_a_bad_variant_is_refused_with_the_offending_text(
    arg: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_path = _write(tmp_path, [])
    with pytest.raises(SystemExit):
        _parser().parse_args(["--data", str(data_path), "--variant", arg])
    assert "--variant" in capsys.readouterr().err


def test_a_missing_data_file_is_a_usage_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(["--data", str(tmp_path / "nope.json")])
    assert e.value.code == 2 and f"no data file at {tmp_path / 'nope.json'}" in capsys.readouterr().err


# -- context coverage, cache reuse, cross-validation -------------------------------------------------------------
def test_context_coverage_is_measured_per_budget_through_memory_context(tmp_path: Path) -> None:
    (q,) = data.load(_write(tmp_path, [_raw_question()]))
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        r = run_question(mem, q, [1, 5], budgets=[40, 4000])
    assert set(r.context) == {"40", "4000"}
    # 4000 tokens hold the whole 3-round haystack: the gold session and its evidence round are inside.
    assert r.scores["ours"]["context"]["sessions_all@4000"] == 1.0
    assert r.scores["ours"]["context"]["rounds_all@4000"] == 1.0
    assert r.context["40"]["tokens"] <= 40 and len(r.context["40"]["rounds"]) < 3
    summary = summarize([r], [1, 5])
    assert summary["context"]["overall"]["sessions_all@4000"] == 1.0
    assert "| ALL | 1 |" in render_context(summary)


def test_covers_all_needs_every_gold_item() -> None:
    assert harness.covers_all(["a", "b", "c"], ["a", "c"]) == 1.0
    assert harness.covers_all(["a", "b"], ["a", "c"]) == 0.0
    assert harness.covers_all(["a"], []) == 0.0


def test_a_cached_row_is_reused_only_for_the_same_settings_and_budgets(tmp_path: Path) -> None:
    (q,) = data.load(_write(tmp_path, [_raw_question()]))
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        variants = harness.variant_searchers(mem, RetrievalConfig(), {"k60": {"rrf_k": 60}})
        r = run_question(mem, q, [1, 5], variants, budgets=[2000])
    r.extra["systems"] = {"ours": {}, "k60": {"rrf_k": 60}}
    h = HashingEmbedder(64).id
    assert not reusable(r, {"ours": {}}, [2000], h)  # a row that names no embedder serves no run
    r.extra["embedder"] = h
    assert reusable(r, {"ours": {}}, [2000], h)
    assert reusable(r, {"ours": {}, "k60": {"rrf_k": 60}}, [2000], h)
    assert not reusable(r, {"ours": {}, "k60": {"rrf_k": 45}}, [2000], h)  # same name, other settings
    assert not reusable(r, {"ours": {"rrf_k": 10}}, [2000], h)
    assert not reusable(r, {"ours": {}}, [2000, 4000], h)
    assert not reusable(r, {"ours": {}}, [2000], HashingEmbedder(128).id)  # another model's rows
    narrowed = rescore(r, q, {"ours": {}}, [2000], [10])
    assert set(narrowed.ranked) == {"ours", "bm25"} and set(narrowed.scores) == {"ours", "bm25"}
    assert (
        "recall_all@10" in narrowed.scores["ours"]["session"]
        and "recall_all@5" not in narrowed.scores["ours"]["session"]
    )


def test_cross_validation_over_question_rows_reports_held_out_and_in_sample(tmp_path: Path) -> None:
    raws = [_raw_question(f"q{i}", "multi-session" if i % 2 else "single-session-user") for i in range(6)]
    questions = data.load(_write(tmp_path, raws))
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        variants = harness.variant_searchers(mem, RetrievalConfig(), {"k60": {"rrf_k": 60}})
        rows = [run_question(mem, q, [5, 10], variants) for q in questions]
    res = run_cv(rows, ["ours", "k60"], folds=3, seed=0)
    assert sum(f.n_test for f in res.folds) == 6
    assert res.in_sample["default"]["system"] == "ours"
    assert set(res.pooled_by_group) == {"multi-session", "single-session-user"}
    assert "session.ndcg_any@10" in res.held_out


def test_cached_only_scores_the_cached_questions_and_ingests_nothing(tmp_path: Path) -> None:
    from benchmarks.longmemeval.retrieval import main

    raws = [_raw_question(f"q{i}", "multi-session" if i % 2 else "single-session-user") for i in range(5)]
    path = _write(tmp_path, raws)
    questions = data.load(path)
    out = tmp_path / "out"
    out.mkdir()
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        rows = [run_question(mem, q, [5, 10], budgets=[2000]) for q in questions[:4]]
    with (out / "retrieval.jsonl").open("w") as f:
        for r in rows:
            r.extra["systems"] = {"ours": {}}
            r.extra["embedder"] = HashingEmbedder(64).id
            f.write(json.dumps(r.__dict__) + "\n")
    # rows of another model are no cache for this one
    assert main(["--data", str(path), "--out", str(out), "--cached-only", "--context-budgets", "2000"]) == 2
    assert (
        main(
            [
                "--data",
                str(path),
                "--out",
                str(out),
                "--embedder",
                "hashing",
                "--cached-only",
                "--context-budgets",
                "2000",
                "--folds",
                "2",
            ]
        )
        == 0
    )
    report = json.loads((out / "retrieval.json").read_text())
    assert report["summary"]["n_questions"] == 4  # q4 was never cached: left out, not ingested
    assert report["config"]["questions_from_cache"] == 4
    assert report["summary"]["cv"]["k"] == 2
    assert "Cross-validated (2 folds" in (out / "retrieval.md").read_text()
    # A budget the cache was not probed at makes every row unusable: nothing to score.
    argv = ["--data", str(path), "--out", str(out), "--embedder", "hashing", "--cached-only"]
    assert main([*argv, "--context-budgets", "4000"]) == 2


def test_per_type_takes_the_first_questions_of_each_type(tmp_path: Path) -> None:
    from benchmarks.longmemeval.retrieval import first_of_each_type

    types = ["a", "b", "a", "a", "c", "b", "b"]
    questions = data.load(_write(tmp_path, [_raw_question(f"q{i}", t) for i, t in enumerate(types)]))
    assert [q.question_id for q in first_of_each_type(questions, 2)] == ["q0", "q1", "q2", "q4", "q5"]


def test_the_packing_benchmark_scores_every_candidate_and_reuses_its_hits(tmp_path: Path) -> None:
    from benchmarks.longmemeval import packing

    items = [
        _raw_question(f"q{i}", qtype) for i, qtype in enumerate(["single-session-assistant"] * 3 + ["x"] * 3)
    ]
    path, out = _write(tmp_path, items), tmp_path / "out"
    argv = [
        "--data",
        str(path),
        "--out",
        str(out),
        "--embedder",
        "hashing",
        "--folds",
        "2",
        "--budgets",
        "300",
    ]
    assert packing.main([*argv, "--first-sessions", "1,0"]) == 0
    report = json.loads((out / "packing.json").read_text())
    assert set(report["systems"]) == {"evidence_first6", "evidence_first1", "evidence_first_all", "whole"}
    for figures in report["systems"].values():
        assert figures["sessions_all@300"] == 1.0  # two short sessions fit any packing
        assert 0.0 <= figures["evidence_shown@300"] <= 1.0
    assert len(report["cv"]["folds"]) == 2 and "whole" not in report["cv"]["candidates"]
    lines = (out / "hits.jsonl").read_text()
    assert packing.main(argv) == 0  # packs the cached hits again: nothing ingested, nothing appended
    assert (out / "hits.jsonl").read_text() == lines
    assert packing.main([*argv, "--budgets", "0"]) == 2


def test_the_latency_benchmark_times_every_system_on_the_same_haystacks(tmp_path: Path) -> None:
    from benchmarks.longmemeval import latency

    timed = _raw_question("t1")
    timed["question"] = "Which violin teacher did you recommend to me last week?"  # a time range
    path = _write(tmp_path, [_raw_question("plain"), timed])
    out = tmp_path / "out"
    args = ["--data", str(path), "--embedder", "hashing", "--repeats", "2", "--out", str(out)]
    assert latency.main([*args, "--time-range-only", "--variant", 'off={"in_range_weight": 0}']) == 0
    report = json.loads((out / "latency.json").read_text())
    rows = report["systems"]
    assert [r["system"] for r in rows] == ["ours", "off"]
    assert all(r["searches"] == 2 and r["p50_ms"] > 0 for r in rows)  # one question kept: the timed one
    assert "| off |" in (out / "latency.md").read_text()
    assert report["run"]["machine"]["cores"] and "Run: commit" in (out / "latency.md").read_text()
    with pytest.raises(SystemExit, match="at least 1"):
        latency.main([*args, "--repeats", "0"])
