"""Opt-in end to end: the LongMemEval QA harness on 5 dev questions with the local llama.cpp model as both
reader and judge (``bash ../shared/llm/serve.sh &``; port 8181). A path check (real HTTP, real structured
output, real tool/text-protocol handling, judge, report), not a quality measurement: the model is a 1.5B coder.

    pytest -m e2e tests/e2e/test_e2e_qa.py -s

``GRAPHRECALL_E2E_LLM_BASE_URL`` overrides the server URL; ``GRAPHRECALL_E2E_QA_OUT`` keeps the report in a
directory of your choice (default: a temporary one).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmarks package lives at the repo root

pytestmark = pytest.mark.e2e

BASE_URL = os.environ.get("GRAPHRECALL_E2E_LLM_BASE_URL", "http://127.0.0.1:8181/v1")
DEV = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "data"
    / "longmemeval"
    / "longmemeval_s_dev.json.gz"
)


@pytest.fixture(scope="module")
def base_url() -> str:
    try:
        urllib.request.urlopen(
            f"{BASE_URL}/models", timeout=180
        ).close()  # a busy single-slot server answers late
    except OSError:
        pytest.skip(f"no local LLM server at {BASE_URL} (start ../shared/llm/serve.sh)")
    return BASE_URL


@pytest.mark.skipif(not DEV.exists(), reason=f"LongMemEval dev split not found at {DEV}")
def test_qa_harness_on_five_dev_questions_with_the_local_model(base_url: str, tmp_path: Path) -> None:
    pytest.importorskip("openai")
    from benchmarks.longmemeval import qa

    out = Path(os.environ.get("GRAPHRECALL_E2E_QA_OUT", str(tmp_path / "qa")))
    argv = [
        "--data", str(DEV), "--llm", "openai:local", "--base-url", base_url, "--judge", "openai:local",
        "--judge-base-url", base_url, "--limit", "5", "--concurrency", "1", "--token-budget", "1500",
        "--max-tool-steps", "2", "--timeout", "900", "--out", str(out), "--no-progress",
    ]  # fmt: skip
    started = time.perf_counter()
    code = qa.main(argv)
    elapsed = time.perf_counter() - started
    rows = [json.loads(line) for line in (out / "qa.jsonl").read_text().splitlines() if line.strip()]
    print(f"\nQA e2e: {elapsed:.0f} s, exit {code}, report {out / 'report.md'}")
    finished = [r for r in rows if not r.get("error")]
    assert len({r["id"] for r in finished}) == 5, [r.get("error") for r in rows]
    for r in finished:
        assert r["hypothesis"].strip()
        assert isinstance(r["correct"], bool) and r["judge_reply"]
        assert r["reader_input_tokens"] > 0 and r["judge_input_tokens"] > 0
    summary = json.loads((out / "summary.json").read_text())["summary"]
    assert summary["n"] == 5 and 0.0 <= summary["accuracy"] <= 1.0
    assert (out / "report.md").read_text().startswith("# LongMemEval QA")
    assert (out / "accuracy.png").stat().st_size > 0
    assert qa.main(argv) == 0  # resume: nothing left to do, same report
    assert len((out / "qa.jsonl").read_text().splitlines()) == len(rows)
