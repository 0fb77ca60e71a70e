"""Background extraction: add_session(extract=True) returns at once with the queued job; the queue extracts it,
retries failures and records the reason, defers what the model cannot answer now, shows each session's status, and
resumes after a restart and after a kill -9 in the middle of an extraction."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.fakeserver import FakeHTTPServer, Recorded

from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import StorageFull
from graphrecall.extract import ExtractionConfig
from graphrecall.extract.queue import ExtractionQueue
from graphrecall.llm import LLMRateLimited, ScriptedLLM
from graphrecall.params import ExtractParams
from graphrecall.services.knowledge import KnowledgeService

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


def test_a_full_disk_during_an_extraction_defers_the_session_too(tmp_path: Path, monkeypatch: Any) -> None:
    """An extraction whose write found no room is not the session's fault: deferred, not an attempt used up."""
    llm = ScriptedLLM(ordered=False).add("Session id: s1\n", _facts("The user's sister Ana is a nurse"))
    real_extract, calls = KnowledgeService.extract, []

    def extract(self: KnowledgeService, scope: Any, p: ExtractParams, *args: Any) -> Any:
        calls.append(p.session_id)
        if len(calls) == 1:
            raise StorageFull("scope acme/ana: the store has no room for the write: the file system is full")
        return real_extract(self, scope, p, *args)

    monkeypatch.setattr(KnowledgeService, "extract", extract)
    with _memory(tmp_path, llm, max_attempts=1, retry_backoff_s=0.05) as mem:
        mem.add_session(SCOPE, TURN, session_id="s1", date="2024-03-01", extract=True)
        assert mem.wait_for_extraction(timeout=60)
        (job,) = mem.extraction_jobs(SCOPE)
        assert (job.status, job.attempts) == ("done", 1) and calls == ["s1", "s1"]


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


EXTRACTING_CHILD = textwrap.dedent(
    """
    import sys, time
    from graphrecall import Memory, Scope
    from graphrecall.embed import HashingEmbedder
    from graphrecall.extract import ExtractionConfig
    from graphrecall.llm.openai import OpenAILLM

    llm = OpenAILLM("local", base_url=sys.argv[2], structured="json_object_schema")
    mem = Memory.open(sys.argv[1], embedder=HashingEmbedder(64), llm=llm, extraction=ExtractionConfig())
    mem.add_session(Scope(org_id="acme", user_id="ana"), [{"role": "user", "content": "My sister Ana is a nurse in Porto"}],
                    session_id="s1", date="2024-03-01", extract=True)
    print("QUEUED", flush=True)
    time.sleep(600)  # the worker thread is waiting for the model when the parent kills us
    """
)


def test_kill_9_during_an_extraction_counts_the_attempt_and_the_next_memory_resumes_it(
    tmp_path: Path,
) -> None:
    """A real ``Memory`` in a child process is killed with SIGKILL while its extraction waits for the model (a
    loopback OpenAI-compatible server). The next ``Memory`` opened with an LLM finds the job cut off, counts that
    attempt, extracts the session again and stores its facts once."""
    pytest.importorskip("openai")
    from graphrecall.llm.openai import OpenAILLM

    asked, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def model(req: Recorded) -> tuple[int, dict[str, Any]]:
        calls.append("extract")
        if len(calls) == 1:  # the child's request: hold it until the child is dead
            asked.set()
            release.wait(60)
        content = json.dumps(_facts("The user's sister Ana is a nurse"))
        return 200, {
            "id": "c", "object": "chat.completion", "created": 0, "model": "local",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }  # fmt: skip

    script = tmp_path / "child.py"
    script.write_text(EXTRACTING_CHILD)
    root = tmp_path / "store"
    with FakeHTTPServer(model) as srv:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(root), srv.url + "/v1"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "QUEUED"
            assert asked.wait(120), "the child's extraction never reached the model"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            release.set()
        assert proc.returncode == -signal.SIGKILL
        left = ExtractionQueue(
            root, lambda scope, sid: None, start=False
        )  # what the dead process left behind
        (job,) = left.jobs()
        assert (job.status, job.attempts) == ("pending", 1)  # it was running; the cut attempt counts
        assert job.reason is not None and job.reason.startswith("interrupted")
        left.close()
        llm = OpenAILLM("local", base_url=srv.url + "/v1", structured="json_object_schema")
        with Memory.open(root, embedder=HashingEmbedder(64), llm=llm, extraction=ExtractionConfig()) as mem:
            assert mem.wait_for_extraction(timeout=120)
            (job,) = mem.extraction_jobs(SCOPE)
            assert (job.status, job.attempts, job.reason) == ("done", 2, None)
            assert [f.text for f in mem.facts(SCOPE)] == ["The user's sister Ana is a nurse"]
            assert [s.extract_status for s in mem.sessions(SCOPE)] == ["done"]
    assert calls == ["extract", "extract"]


def test_an_extraction_renews_the_adjacency_of_a_scope_being_searched_not_of_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph lists read a scope's adjacency, which a write of extracted memory makes stale: the extraction run
    rebuilds it before it reports the session done, so the next search does not; a scope nobody searched is left
    alone."""
    from graphrecall.store import adjacency

    builds: list[str] = []
    real = adjacency.build

    def counted(db: Any) -> Any:
        builds.append(threading.current_thread().name)
        return real(db)

    monkeypatch.setattr(adjacency, "build", counted)
    other = Scope(org_id="acme", user_id="bo")
    llm = (
        ScriptedLLM(ordered=False)
        .add("Session id: s1\n", _facts("The user's sister Ana is a nurse"))
        .add("Session id: s2\n", _facts("The user's sister Ana moved to Lisbon"))
        .add(
            "New facts, each followed", {"decisions": [{"fact": "n1", "decision": "UPDATE", "target": "c1"}]}
        )
    )
    with _memory(tmp_path, llm) as mem:
        mem.add_session(SCOPE, TURN, session_id="s1", date="2024-03-01", extract=True)
        mem.add_session(other, TURN, session_id="s1", date="2024-03-01", extract=True)
        assert mem.wait_for_extraction(timeout=60)
        assert builds == []  # nobody searched yet: nothing built ahead of time
        mem.search(SCOPE, "where does my sister live")  # builds the scope's adjacency
        assert len(builds) == 1
        builds.clear()
        moved = [{"role": "user", "content": "My sister Ana moved to Lisbon"}]
        mem.add_session(SCOPE, moved, session_id="s2", date="2024-04-01", extract=True)
        mem.add_session(other, moved, session_id="s2", date="2024-04-01", extract=True)
        assert mem.wait_for_extraction(timeout=60)
        assert len(builds) == 1 and builds[0] != threading.current_thread().name  # the run's, for Ana's scope
        hits = mem.search(SCOPE, "where does my sister live", kinds=("fact",))
        assert len(builds) == 1  # the search found it current
        assert [h.text for h in hits] == [
            "The user's sister Ana moved to Lisbon"
        ]  # the nurse fact is replaced


@pytest.mark.parametrize(
    ("error", "goes_up"),
    [
        # Kuzu's I/O exception: the pool must retire the bucket
        (RuntimeError("IO exception: Cannot read from file"), True),
        (RuntimeError("Binder exception: something else"), False),
        (MemoryError("no room for the adjacency"), False),
    ],
)
def test_a_failed_renewal_is_left_to_the_next_search_unless_kuzu_failed_to_read(
    error: BaseException, goes_up: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Renewing the adjacency after an extraction only saves the next search its build: a failure is logged, except
    Kuzu's I/O exception, after which the bucket must not be used again (``DatabasePool.acquire`` retires it
    only when that exception reaches it)."""
    from graphrecall.services.knowledge import KnowledgeService
    from graphrecall.store import adjacency

    def fail(db: Any) -> bool:
        raise error

    monkeypatch.setattr(adjacency, "renew", fail)
    if goes_up:
        with pytest.raises(RuntimeError, match="IO exception"):
            KnowledgeService._renew_adjacency(SCOPE, object())  # type: ignore[arg-type]
    else:
        KnowledgeService._renew_adjacency(SCOPE, object())  # type: ignore[arg-type]
        assert "renewing the adjacency after extraction failed" in caplog.text
