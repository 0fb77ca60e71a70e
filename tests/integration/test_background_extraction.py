"""Background extraction: add_session(extract=True) returns at once with the queued job; the queue extracts it,
retries failures and records the reason, shows each session's status, and resumes after a restart."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.extract.queue import ExtractionQueue
from graphrecall.llm import LLMRateLimited, ScriptedLLM

SCOPE = Scope(org_id="acme", user_id="ana")
TURN = [{"role": "user", "content": "My sister Ana is a nurse in Porto"}]


def _facts(text: str) -> dict[str, Any]:
    return {"facts": [{"text": text, "kind": "attribute", "message_ids": ["m1"]}]}


def _memory(root: Path, llm: ScriptedLLM | None, **cfg: Any) -> Memory:
    return Memory.open(root, embedder=HashingEmbedder(64), llm=llm, extraction=ExtractionConfig(**cfg))


def test_extract_true_returns_the_queued_job_and_the_queue_extracts_it(tmp_path: Path) -> None:
    llm = ScriptedLLM(ordered=False).add("Session id: s1\n", _facts("The user's sister Ana is a nurse"))
    with _memory(tmp_path, llm) as mem:
        r = mem.add_session(SCOPE, TURN, session_id="s1", date="2024-03-01", extract=True)
        assert r.extraction is None and r.extraction_job is not None
        assert (r.extraction_job.session_id, r.extraction_job.status) == ("s1", "pending")
        assert mem.search(SCOPE, "sister nurse")[0].session_id == "s1"  # the raw turn is there at once
        assert mem.wait_for_extraction(timeout=60)
        assert [f.text for f in mem.facts(SCOPE)] == ["The user's sister Ana is a nurse"]
        assert [(s.id, s.extract_status) for s in mem.sessions(SCOPE)] == [("s1", "done")]
        (job,) = mem.extraction_jobs(SCOPE)
        assert (job.status, job.attempts) == ("done", 1)


def test_a_session_that_keeps_failing_ends_failed_with_its_reason_and_can_be_retried(tmp_path: Path) -> None:
    llm = ScriptedLLM(ordered=False)  # no rule matches: every extraction call fails
    with _memory(tmp_path, llm, max_attempts=2, retry_backoff_s=0.0) as mem:
        mem.add_session(SCOPE, TURN, session_id="s1", date="2024-03-01", extract=True)
        assert mem.wait_for_extraction(timeout=60)
        (job,) = mem.extraction_jobs(SCOPE)
        assert (job.status, job.attempts) == ("failed", 2)
        assert job.reason
        assert [(s.id, s.extract_status) for s in mem.sessions(SCOPE)] == [("s1", "failed")]
        assert [h.session_id for h in mem.search(SCOPE, "nurse")] == ["s1"]  # the raw history stays
        llm.add("Session id: s1\n", _facts("The user's sister Ana is a nurse"))
        assert mem.retry_extraction(SCOPE) == 1
        assert mem.wait_for_extraction(timeout=60)
        assert [j.status for j in mem.extraction_jobs(SCOPE)] == ["done"]
        assert len(mem.facts(SCOPE)) == 1


def test_a_model_that_cannot_answer_now_defers_the_session_without_using_up_its_attempts(
    tmp_path: Path,
) -> None:
    """A rate limit (or timeout, or 5xx) says nothing about the session: with one attempt allowed the job would
    fail at once, but it is deferred, tried again after the backoff, and ends done on its first real attempt."""
    llm = ScriptedLLM(ordered=False)
    llm.add("Session id: s1\n", LLMRateLimited("openai local HTTP 429: slow down"), times=2)
    llm.add("Session id: s1\n", _facts("The user's sister Ana is a nurse"))
    with _memory(tmp_path, llm, max_attempts=1, retry_backoff_s=0.05) as mem:
        mem.add_session(SCOPE, TURN, session_id="s1", date="2024-03-01", extract=True)
        assert mem.wait_for_extraction(timeout=60)
        (job,) = mem.extraction_jobs(SCOPE)
        assert (job.status, job.attempts, job.reason) == ("done", 1, None)
        assert [f.text for f in mem.facts(SCOPE)] == ["The user's sister Ana is a nurse"]
    assert len(llm.calls) == 3


def test_jobs_left_queued_by_an_earlier_process_resume_at_the_next_open(tmp_path: Path) -> None:
    with _memory(tmp_path, None) as mem:
        mem.add_session(SCOPE, TURN, session_id="s1", date="2024-03-01")
    queue = ExtractionQueue(tmp_path, lambda scope, sid: None, start=False)  # what a process left behind
    queue.enqueue(SCOPE, "s1")
    queue.close()
    llm = ScriptedLLM(ordered=False).add("Session id: s1\n", _facts("The user's sister Ana is a nurse"))
    with _memory(tmp_path, llm) as mem:
        deadline = time.monotonic() + 60
        while not mem.facts(SCOPE) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [f.text for f in mem.facts(SCOPE)] == ["The user's sister Ana is a nurse"]


def test_forget_drops_the_scopes_jobs(tmp_path: Path) -> None:
    llm = ScriptedLLM(ordered=False).add("Session id: s1\n", _facts("The user's sister Ana is a nurse"))
    with _memory(tmp_path, llm) as mem:
        mem.add_session(SCOPE, TURN, session_id="s1", date="2024-03-01", extract=True)
        assert mem.wait_for_extraction(timeout=60)
        assert mem.forget(SCOPE)
        assert mem.extraction_jobs(SCOPE) == []
