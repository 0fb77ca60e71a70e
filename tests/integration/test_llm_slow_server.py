"""A slow one-slot model server behind the OpenAI-compatible provider: every request reaches it once at a time.

``OneSlotServer`` behaves like the local server of the e2e tier (llama-cpp-python's, one model behind one lock)
where it matters here: every chat request and every ``GET /v1/models`` waits for the one slot, and a chat request
is computed to its end even when the client has given up, so a copy sent after a client timeout queues behind the
original and the model does the same work twice. The tests count the copies of each prompt the server received and
check that no copy arrived before the previous one was finished.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import LLMError, LLMTimeout

pytest.importorskip("openai")

from graphrecall.llm.openai import OpenAILLM

SCOPE = Scope(org_id="acme", user_id="ana")


@dataclass
class Post:
    """One chat request as the server saw it: when it arrived, got the slot and was finished."""

    prompt: str
    arrived: float
    started: float = 0.0
    finished: float = 0.0


class OneSlotServer:
    """``work_s(n)`` is how long the n-th chat request (0-based) keeps the slot; ``answer(prompt)`` its content."""

    def __init__(
        self, work_s: Callable[[int], float], answer: Callable[[str], dict[str, Any]], port: int = 0
    ) -> None:
        self.work_s = work_s
        self.answer = answer
        self.posts: list[Post] = []
        self.models_probes = 0
        self.waiting_or_working = 0  # chat requests that arrived and are not finished
        self.peak = 0
        self._slot = threading.Lock()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01})

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def copies(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for p in self.posts:
                out[p.prompt] = out.get(p.prompt, 0) + 1
            return out

    def overlaps(self) -> list[tuple[int, int]]:
        """Pairs (i, i+1) of chat requests where the later one arrived before the earlier one was finished."""
        with self._lock:
            posts = sorted(self.posts, key=lambda p: p.arrived)
            return [(i, i + 1) for i in range(len(posts) - 1) if posts[i + 1].arrived < posts[i].finished]

    def idle(self) -> bool:
        with self._lock:
            return self.waiting_or_working == 0

    def __enter__(self) -> OneSlotServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        prompt = body["messages"][-1]["content"]
        post = Post(prompt=prompt, arrived=time.monotonic())
        with self._lock:
            n = len(self.posts)
            self.posts.append(post)
            self.waiting_or_working += 1
            self.peak = max(self.peak, self.waiting_or_working)
        with self._slot:
            post.started = time.monotonic()
            time.sleep(self.work_s(n))  # generating; a client that left does not stop it
            post.finished = time.monotonic()
            with self._lock:
                self.waiting_or_working -= 1
        content = json.dumps(self.answer(prompt))
        return 200, {
            "id": f"c{n}", "object": "chat.completion", "created": 0, "model": "slow-1.5b",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }  # fmt: skip

    def _models(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.models_probes += 1
        with (
            self._slot
        ):  # llama-cpp-python takes the model lock for this too: it answers when the model is free
            return 200, {"object": "list", "data": [{"id": "slow-1.5b", "object": "model", "owned_by": "me"}]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up meanwhile
                    pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                self._reply(*outer._chat(body))

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._reply(*outer._models())
                else:
                    self._reply(404, {"error": {"message": "not found"}})

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def city(prompt: str) -> dict[str, Any]:
    return {"name": "Lisbon", "country": "Portugal"}


def slow_first(first_s: float, then_s: float = 0.02) -> Callable[[int], float]:
    return lambda n: first_s if n == 0 else then_s


def until(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.fixture
def slow() -> Iterator[OneSlotServer]:
    with OneSlotServer(slow_first(2.0), city) as srv:
        yield srv


async def test_a_timed_out_request_is_not_sent_again_while_the_server_still_works_on_it(
    slow: OneSlotServer,
) -> None:
    llm = OpenAILLM("slow-1.5b", base_url=slow.url, timeout=0.3, max_retries=3, retry_base_delay=0.01)
    with pytest.raises(LLMTimeout):
        await llm.complete("Where do I live?")
    until(lambda: slow.copies() == {"Where do I live?": 1}, timeout=10)  # (a loaded machine reads it late)
    with pytest.raises(LLMTimeout, match="still busy"):  # asked again at once: the server is not idle yet
        await llm.complete("Where do I live?")
    assert slow.copies() == {
        "Where do I live?": 1
    }  # no resend of a request the server may still be computing
    until(slow.idle)
    resp = await llm.complete("Where do I live?")
    assert json.loads(resp.text) == {"name": "Lisbon", "country": "Portugal"}
    assert slow.copies() == {"Where do I live?": 2}
    assert slow.overlaps() == [] and slow.peak == 1
    probes = slow.models_probes
    await llm.complete("And my sister?")  # the server answered: no probe before the next request
    assert slow.models_probes == probes


async def test_a_server_that_answers_slowly_within_the_timeout_gets_each_request_once(tmp_path: Path) -> None:
    with OneSlotServer(lambda n: 0.4, city) as srv:
        llm = OpenAILLM("slow-1.5b", base_url=srv.url, timeout=5.0, concurrency=1)
        for q in ("a", "b", "c"):
            await llm.complete(q)
        assert srv.copies() == {"a": 1, "b": 1, "c": 1} and srv.peak == 1 and srv.models_probes == 0


def test_a_self_hosted_server_gets_a_generous_default_timeout() -> None:
    local = OpenAILLM("slow-1.5b", base_url="http://127.0.0.1:1/v1")
    hosted = OpenAILLM("gpt-4o-mini", api_key="sk-test")
    assert local.policy.timeout >= 600 and hosted.policy.timeout == 60
    assert not local.policy.retry_timeouts and not hosted.policy.retry_timeouts


def _facts(prompt: str) -> dict[str, Any]:
    return {"facts": [{"text": "The user lives in Lisbon", "kind": "attribute", "message_ids": ["m1"]}]}


def _memory(root: Path, llm: OpenAILLM, **cfg: Any) -> Memory:
    return Memory.open(root, embedder=HashingEmbedder(64), llm=llm, extraction=ExtractionConfig(**cfg))


def test_a_background_extraction_cut_by_a_timeout_is_retried_later_once_the_server_is_idle(
    tmp_path: Path,
) -> None:
    """The first extraction request takes longer than the client waits: the job goes back to the queue (pending,
    the attempt not counted), is tried again only once the server is done with the abandoned copy, and ends done;
    the server computed the session twice, never at the same time, instead of queueing copies behind each other."""
    with OneSlotServer(slow_first(1.5), _facts) as srv:
        llm = OpenAILLM("slow-1.5b", base_url=srv.url, timeout=0.4, structured="json_object_schema")
        with _memory(tmp_path, llm, retry_backoff_s=0.1) as mem:
            mem.add_session(SCOPE, [{"role": "user", "content": "I live in Lisbon"}], session_id="s1",
                            date="2024-03-01", extract=True)  # fmt: skip
            until(lambda: (j := mem.extraction_jobs(SCOPE)[0]).status == "pending" and j.reason is not None)
            (waiting,) = mem.extraction_jobs(SCOPE)
            assert waiting.attempts == 0 and "timed out" in str(waiting.reason)
            assert [s.extract_status for s in mem.sessions(SCOPE)] == ["pending"]
            assert mem.wait_for_extraction(timeout=60)
            (job,) = mem.extraction_jobs(SCOPE)
            assert (job.status, job.attempts, job.reason) == ("done", 1, None)
            assert [f.text for f in mem.facts(SCOPE)] == ["The user lives in Lisbon"]
        assert list(srv.copies().values()) == [2]  # the abandoned copy and the one that was answered
        assert srv.overlaps() == [] and srv.peak == 1


def test_a_server_too_slow_for_every_attempt_leaves_the_job_pending_not_failed(tmp_path: Path) -> None:
    """A server that never answers in time: the job is deferred again and again (pending, for later), each copy
    sent only after the previous one was finished, and it is not failed after three tries."""
    with OneSlotServer(lambda n: 0.6, _facts) as srv:
        llm = OpenAILLM("slow-1.5b", base_url=srv.url, timeout=0.2, structured="json_object_schema")
        with _memory(tmp_path, llm, retry_backoff_s=0.05, max_attempts=3) as mem:
            mem.add_session(SCOPE, [{"role": "user", "content": "I live in Lisbon"}], session_id="s1",
                            date="2024-03-01", extract=True)  # fmt: skip
            until(lambda: len(srv.posts) >= 4, timeout=60)
            (job,) = mem.extraction_jobs(SCOPE)
            assert job.status in ("pending", "running") and job.attempts <= 1
        assert srv.overlaps() == [] and srv.peak == 1


async def test_a_refused_connection_sent_nothing_so_the_next_request_goes_straight_out() -> None:
    """Only a request the server may still be computing makes the next one wait for an idle server: a refused
    connection never reached it, so the next request is sent at once, with no ``GET /models`` first."""
    with OneSlotServer(lambda n: 0.0, city) as srv:
        port = int(srv.url.split(":")[2].split("/")[0])
    llm = OpenAILLM("slow-1.5b", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(LLMError, match="connection failed"):
        await llm.complete("anyone there?")
    again = OneSlotServer(lambda n: 0.0, city, port=port)
    with again:
        await llm.complete("anyone there?")
        assert again.copies() == {"anyone there?": 1} and again.models_probes == 0
