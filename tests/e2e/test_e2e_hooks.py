"""End to end with a real (small, local) model: a coding session stored by the ``stop`` hook with an LLM configured
is queued for extraction, ``graphrecall extract`` extracts it with the model, and the next session's start shows
what was extracted about the project (its profile) beside what was said.

Slow (minutes on 2 cores) and opt-in: ``pytest -m e2e``. It proves the path works (hook, queue, extraction over the
stored transcript, the profile at session start), not that a 1.5B model extracts well.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from tests.transcripts import Transcript, hook_input

from graphrecall import Memory, Scope, cli
from graphrecall.extract.queue import ExtractionQueue

pytestmark = pytest.mark.e2e

PROJECT = Scope(org_id="acme", user_id="_project-tidewater")


def test_a_stored_coding_session_is_extracted_and_the_next_session_starts_with_its_facts(
    local_llm_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    repo = tmp_path / "tidewater"
    (repo / ".git").mkdir(parents=True)
    common = ["--root", str(root), "--embedder", "hashing", "--org", "acme", "--user", "ann"]
    monkeypatch.setenv("GRAPHRECALL_LLM", "openai:local")
    monkeypatch.setenv("GRAPHRECALL_LLM_BASE_URL", local_llm_url)
    t = Transcript(tmp_path / "one.jsonl", "e2e-hooks-first", repo)
    t.user("Our project tidewater uses PostgreSQL 16 for its database. The CI tests hang before it is ready.")
    t.tool("Bash", {"command": "pytest tests/integration"}, "E OperationalError: connection refused")
    t.say(
        "I added wait_for_postgres() to tests/conftest.py; the CI job now waits for PostgreSQL 16 to be ready."
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(hook_input("stop", t)))
    assert cli.main(["hook", "stop", *common]) == 0
    assert capsys.readouterr().err == ""

    queue = ExtractionQueue(root, lambda scope, sid: None, workers=0, start=False)
    try:
        assert [(j.scope, j.session_id, j.status) for j in queue.jobs()] == [
            (PROJECT, "e2e-hooks-first", "pending")
        ]
    finally:
        queue.close()

    scope = ["--org", PROJECT.org_id, "--user", PROJECT.user_id]
    code = cli.main(
        ["extract", *scope, "--root", str(root), "--embedder", "hashing", "--llm-base-url", local_llm_url]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    with Memory.open(root, embedder="hashing") as mem:
        (session,) = mem.sessions(PROJECT)
        facts = mem.facts(PROJECT)
    assert session.extract_status == "done", (out, err)

    second = Transcript(tmp_path / "two.jsonl", "e2e-hooks-second", repo)
    monkeypatch.setattr(sys, "stdin", io.StringIO(hook_input("session-start", second, source="startup")))
    assert cli.main(["hook", "session-start", *common]) == 0
    start = capsys.readouterr()
    assert start.err == ""
    context = json.loads(start.out)["hookSpecificOutput"]["additionalContext"]
    assert "wait_for_postgres" in context
    if facts:  # what the model extracted is the project's profile, shown before the sessions
        assert facts[0].text.split()[0] in context.split("Latest sessions")[0], (facts, context)
