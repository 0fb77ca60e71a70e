"""Batch work on a real two-node Ray cluster on loopback (``ray start --head`` plus ``ray start --address``).

Shows that tasks run on both nodes through ``graphrecall.raymap``, that failed tasks are retried, that the
LongMemEval and LoCoMo retrieval harnesses write the same per-question rows with ``--ray ADDRESS`` as without it
(timings aside), that QA rows are written and resumed as locally, and that ``graphrecall extract --all-scopes``
runs each scope as a task. About 45 s, most of it starting and stopping the two nodes. Skipped, saying why, where Ray is not
installed (``pip install 'graphrecall[ray]'``; ``scripts/setup.sh`` installs it).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.ray_loopback import LoopbackCluster

from graphrecall import raymap

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'graphrecall[ray]'")

# Timing fields differ from run to run; everything else in a row must be identical.
TIMING = ("ingest_s", "search_s", "bm25_s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head node and a second node, one CPU each, on 127.0.0.1; ``ray stop --force`` whatever happens.

    Token authentication (on by default in recent Ray) is switched off: every node is this machine's loopback.
    A private temp dir keeps this cluster's sockets and logs apart from any other Ray on the machine."""
    with LoopbackCluster(cpus=1, temp_dir=tmp_path_factory.mktemp("ray"), timeout=60) as c:
        c.add_node()
        yield c.address


def _raw(qid: str, qtype: str, topic: str) -> dict[str, Any]:
    """A LongMemEval-shaped question over a three-session haystack, its evidence in the middle session."""
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": f"What did you tell me about {topic}?",
        "question_date": "2023/06/01 (Thu) 10:00",
        "answer": topic,
        "answer_session_ids": [f"{qid}-ev"],
        "haystack_session_ids": [f"{qid}-a", f"{qid}-ev", f"{qid}-b"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/20 (Sat) 07:47", "2023/05/25 (Thu) 18:00"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "How do I bake sourdough bread?"},
                {"role": "assistant", "content": "Feed the starter, then knead the dough."},
            ],
            [
                {"role": "user", "content": f"I keep thinking about {topic}.", "has_answer": True},
                {"role": "assistant", "content": f"{topic} sounds worth a weekend."},
            ],
            [
                {"role": "user", "content": "Any tips for running in the rain?"},
                {"role": "assistant", "content": "Wear a cap and a light jacket."},
            ],
        ],
    }


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "retrieval.jsonl").read_text().splitlines() if line.strip()]
    return {r["question_id"]: {k: v for k, v in r.items() if k not in TIMING} for r in rows}


def test_extract_runs_many_scopes_as_tasks_on_the_cluster(cluster: str, tmp_path: Path, capsys: Any) -> None:
    """``graphrecall extract --all-scopes --ray ADDRESS``: each scope a task; workers open the same root (one
    machine here) and reach the LLM server the driver checked."""
    from tests.fakeserver import FakeHTTPServer
    from tests.integration.test_extract_cli import handler

    from graphrecall.cli import main

    session = [{"session_id": "s1", "date": "2024-01-10T10:00:00",
                "messages": [{"role": "user", "content": "I live in Munich"}]}]  # fmt: skip
    (tmp_path / "a.json").write_text(json.dumps(session))
    base = ["--root", str(tmp_path / "store"), "--embedder", "hashing"]
    users = ["u1", "u2", "u3"]
    for user in users:
        assert main(["ingest", str(tmp_path / "a.json"), *base, "--org", "o", "--user", user]) == 0
    capsys.readouterr()
    with FakeHTTPServer(handler) as srv:
        llm = ["--llm", "openai:fake", "--llm-base-url", srv.url + "/v1"]
        assert main(["extract", *base, *llm, "--all-scopes", "--json", "--ray", cluster]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["scope"] for r in rows) == [f"o/{u}" for u in users]
    assert all(r["result"]["sessions_done"] == 1 and r["result"]["facts_added"] == 1 for r in rows)
    for user in users:
        assert main(["facts", *base, "--org", "o", "--user", user]) == 0
        assert "The user lives in Munich" in capsys.readouterr().out


@pytest.fixture(scope="module")
def driver(cluster: str) -> Iterator[str]:
    """This process connected to the cluster once for the tests below (the extract test above connects through
    the command itself, as a run does): every ``run_map`` then reuses the connection and its workers."""
    from benchmarks.locomo.retrieval import conversation_task
    from benchmarks.longmemeval.retrieval import question_task

    saved = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"  # workers must see it (forwarded through the job's runtime_env)
    try:
        raymap.connect(raymap.RayOptions(address=cluster), where_am_i, conversation_task, question_task)
    finally:
        if saved is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved
    yield cluster
    ray.shutdown()


def where_am_i(delay: float) -> tuple[str, int, str | None]:
    """A task that holds its node's only CPU for a while, so the next task must go to the other node."""
    time.sleep(delay)
    return os.uname().nodename, os.getpid(), os.environ.get("HF_HUB_OFFLINE")


def test_tasks_run_on_both_nodes_and_results_arrive_as_they_finish(driver: str) -> None:
    opts = raymap.RayOptions(address=driver, num_cpus=1, max_retries=1)
    outs = list(raymap.run_map(where_am_i, [1.0] * 4, ray=opts, progress=False))
    assert all(o.ok for o in outs), [o.error for o in outs]
    assert len({o.node_id for o in outs}) == 2, "every task ran on one node"
    assert len({o.value[1] for o in outs if o.value}) >= 2  # distinct worker processes
    assert {o.value[2] for o in outs if o.value} == {"1"}  # HF_HUB_OFFLINE reached every worker


def flaky(marker: str) -> str:
    """Fails on its first run (leaving a marker file), succeeds on the retry."""
    path = Path(marker)
    if not path.exists():
        path.write_text("tried")
        raise RuntimeError("first try fails")
    return "second try"


def test_a_failed_task_is_retried_and_a_task_that_keeps_failing_is_reported(
    cluster: str, tmp_path: Path
) -> None:
    opts = raymap.RayOptions(address=driver, max_retries=1)
    (ok,) = raymap.run_map(flaky, [str(tmp_path / "marker")], ray=opts, progress=False)
    assert ok.value == "second try"
    no_retry = raymap.RayOptions(address=driver, max_retries=0)
    (bad,) = raymap.run_map(flaky, [str(tmp_path / "other")], ray=no_retry, progress=False)
    assert not bad.ok and bad.error is not None and "first try fails" in bad.error


def echo_row(item: str) -> dict[str, Any]:
    if item == "bad":
        raise ValueError("bad item")
    return {"id": item, "answer": item.upper()}


def test_qa_rows_are_written_as_they_arrive_and_failures_run_again_on_resume(
    cluster: str, tmp_path: Path
) -> None:
    from benchmarks.longmemeval.qa import run_all

    jsonl = tmp_path / "qa.jsonl"
    opts = raymap.RayOptions(address=driver, max_retries=0)
    rows = run_all(["a", "bad", "c"], str, echo_row, jsonl, progress=False, ray=opts)
    assert [r["id"] for r in rows] == ["a", "bad", "c"] and rows[1]["error"] == "ValueError: bad item"
    assert len(jsonl.read_text().splitlines()) == 3
    # The rerun skips the finished rows and runs only the failed one again (locally here: same file format).
    again = run_all(["a", "bad", "c"], str, lambda it: {"id": it, "answer": "fixed"}, jsonl, progress=False)
    assert [r.get("answer") for r in again] == ["A", "fixed", "C"]


def test_locomo_retrieval_gives_the_same_rows_with_ray_as_without(driver: str, tmp_path: Path) -> None:
    """Two conversations, each a task, against the same run here (the search timing aside)."""
    from benchmarks.locomo.retrieval import main
    from tests.integration.test_locomo_retrieval import _raw as locomo_raw

    second = locomo_raw() | {"sample_id": "conv-y"}
    second["qa"] = [qa | {"question": qa["question"].replace("?", " again?")} for qa in second["qa"]]
    data = tmp_path / "locomo.json.gz"
    with gzip.open(data, "wt") as f:
        json.dump([locomo_raw(), second], f)
    base = ["--data", str(data), "--embedder", "hashing", "--folds", "0", "--context-budgets", "2000"]
    assert main([*base, "--out", str(tmp_path / "local")]) == 0
    assert main([*base, "--out", str(tmp_path / "ray"), "--ray", driver]) == 0

    def rows(out: Path) -> dict[str, dict[str, Any]]:
        lines = (out / "retrieval.jsonl").read_text().splitlines()
        return {
            r["question_id"]: {k: v for k, v in r.items() if k != "search_s"} for r in map(json.loads, lines)
        }

    local = rows(tmp_path / "local")
    assert len(local) == 6 and rows(tmp_path / "ray") == local


def test_the_retrieval_harness_gives_the_same_rows_with_ray_as_without(driver: str, tmp_path: Path) -> None:
    from benchmarks.longmemeval.retrieval import main

    raws = [
        _raw("q1", "single-session-user", "the violin teacher"),
        _raw("q2", "multi-session", "the trip to Porto"),
        _raw("q3", "single-session-user", "the new espresso machine"),
    ]
    data = tmp_path / "lme.json.gz"
    with gzip.open(data, "wt") as f:
        json.dump(raws, f)
    base = ["--data", str(data), "--embedder", "hashing", "--folds", "0", "--context-budgets", "2000"]
    assert main([*base, "--out", str(tmp_path / "local")]) == 0
    assert main([*base, "--out", str(tmp_path / "ray"), "--ray", driver, "--ray-cpus", "1"]) == 0
    local, on_ray = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert sorted(local) == ["q1", "q2", "q3"]
    assert on_ray == local
    summary = json.loads((tmp_path / "ray" / "retrieval.json").read_text())
    assert summary["config"]["ray"] == {"address": driver, "num_cpus": 1.0}
    # Resumable as a local run: a rerun with --resume finds every row and runs nothing.
    assert main([*base, "--out", str(tmp_path / "ray"), "--ray", driver, "--resume"]) == 0
    assert _rows(tmp_path / "ray") == local
