"""Rerankers behind a server (``retrieve/rerank_api.py``), over real HTTP to a loopback fake: the Cohere/Jina and TEI
answer shapes, batching, retries with Retry-After, and every wrong answer named; then a search whose order the
server's scores change."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.fakeserver import FakeHTTPServer, Recorded

from graphrecall import Memory, cli
from graphrecall.config import RetrievalConfig
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import ConfigurationError, RerankFailed, Unreachable
from graphrecall.retrieve.rerank import CrossEncoderReranker, load_reranker
from graphrecall.retrieve.rerank_api import ApiReranker, RerankSettings
from graphrecall.retry import RetryPolicy


def by_length(req: Recorded, shape: str = "cohere") -> tuple[int, Any]:
    """Scores each document by its length, best first, the way rerank servers sort their answers."""
    docs = req.body["texts"] if "texts" in req.body else req.body["documents"]
    order = sorted(range(len(docs)), key=lambda i: -len(docs[i]))
    if shape == "tei":
        return 200, [{"index": i, "score": float(len(docs[i]))} for i in order]
    return 200, {"results": [{"index": i, "relevance_score": len(docs[i]) / 100} for i in order]}


def reranker(
    url: str, *, batch: int = 64, retries: int = 2, timeout: float = 5.0, provider: str = "api"
) -> ApiReranker:
    policy = RetryPolicy(max_retries=retries, timeout=timeout, base_delay=0.01, retry_timeouts=True)
    return ApiReranker(
        provider, "bge-reranker", RerankSettings(base_url=url, api_key="k", batch=batch, retry=policy)
    )


@pytest.mark.parametrize("shape", ["cohere", "tei"])
def test_scores_come_back_in_input_order_whatever_order_the_server_answers_in(shape: str) -> None:
    with FakeHTTPServer(lambda req: by_length(req, shape)) as srv:
        scores = reranker(srv.url).score("q", ["aa", "a", "aaaa"])
        [req] = srv.requests
    assert scores[2] > scores[0] > scores[1]
    assert req.path == "/rerank" and req.headers.get("authorization") == "Bearer k"
    assert req.body == {"model": "bge-reranker", "query": "q", "documents": ["aa", "a", "aaaa"], "top_n": 3}


def test_long_lists_are_sent_in_batches() -> None:
    with FakeHTTPServer(by_length) as srv:
        scores = reranker(srv.url, batch=2).score("q", ["a", "aaa", "aa", "aaaa", "aaaaa"])
    assert [len(b["documents"]) for b in srv.bodies("/rerank")] == [2, 2, 1]
    assert len(scores) == 5 and scores[0] < scores[1]


def test_documents_left_out_of_the_answer_rank_below_the_scored_ones() -> None:
    def top_one(req: Recorded) -> tuple[int, Any]:
        return 200, {"results": [{"index": 1, "relevance_score": 0.2}]}

    with FakeHTTPServer(top_one) as srv:
        scores = reranker(srv.url).score("q", ["x", "y", "z"])
    assert scores[1] == 0.2 and scores[0] < 0.2 and scores[2] < 0.2


def test_a_429_is_retried_after_the_servers_hint_then_succeeds() -> None:
    calls: list[float] = []

    def busy_once(req: Recorded) -> Any:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return 429, {"error": "slow down"}, {"Retry-After": "0.3"}
        return by_length(req)

    with FakeHTTPServer(busy_once) as srv:
        scores = reranker(srv.url).score("q", ["a", "aa"])
    assert scores[1] > scores[0] and len(calls) == 2 and calls[1] - calls[0] >= 0.29


def test_a_server_that_keeps_failing_is_named_after_its_retries() -> None:
    with FakeHTTPServer(lambda req: (500, {"error": "down"})) as srv, pytest.raises(RerankFailed) as e:
        reranker(srv.url, retries=2).score("q", ["a"])
    assert len(srv.requests) == 3 and srv.url in str(e.value) and "HTTP 500" in str(e.value)


def test_a_slow_server_times_out_and_is_named() -> None:
    def slow(req: Recorded) -> Any:
        time.sleep(0.5)
        return by_length(req)

    with FakeHTTPServer(slow) as srv, pytest.raises(RerankFailed) as e:
        reranker(srv.url, retries=1, timeout=0.1).score("q", ["a"])
    assert "no answer within" in str(e.value)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("not json", "something else than JSON"),
        ({"results": [{"index": 5, "relevance_score": 0.1}]}, "index 5 for 2 documents"),
        ({"results": [{"index": 0}]}, "without a whole-number index and a finite"),
        ({"results": [{"index": "0", "relevance_score": 0.1}]}, "without a whole-number index"),
        ({"results": [{"index": True, "relevance_score": 0.1}]}, "without a whole-number index"),
        ({"results": [{"index": 0, "relevance_score": "0.5"}]}, "a finite relevance_score or score"),
        ({"results": [{"index": 0, "relevance_score": float("nan")}]}, "a finite relevance_score or score"),
        ([{"index": 0, "score": 1e999}], "a finite relevance_score or score"),  # json: Infinity
        ({"results": [{"index": 1, "relevance_score": 0.1}, {"index": 1, "score": 0.2}]}, "index 1 twice"),
        ({"results": [{"index": -1, "relevance_score": 0.1}]}, "index -1 for 2 documents"),
        ({"data": []}, "an object with keys ['data'], not a list of results"),
        ("null", "NoneType, not a list of results"),
        ({"results": []}, "scored none of 2"),
    ],
)
def test_a_wrong_answer_is_an_error_that_says_what_was_wrong(answer: Any, problem: str) -> None:
    with FakeHTTPServer(lambda req: (200, answer)) as srv, pytest.raises(RerankFailed) as e:
        reranker(srv.url).score("q", ["a", "b"])
    assert problem in str(e.value) and srv.url in str(e.value)
    assert len(srv.requests) == 1  # a wrong answer is not retried: it would be wrong again


def test_specs_choose_the_provider_and_leave_model_names_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRECALL_RERANK_BASE_URL", "http://127.0.0.1:9/v1/")
    got = load_reranker("api:bge-reranker-base")
    assert isinstance(got, ApiReranker) and got.url == "http://127.0.0.1:9/v1/rerank"
    assert isinstance(load_reranker("BAAI/bge-reranker-base"), CrossEncoderReranker)
    monkeypatch.delenv("GRAPHRECALL_RERANK_BASE_URL")
    assert isinstance(load_reranker("cohere:rerank-v3.5"), ApiReranker)
    with pytest.raises(ConfigurationError) as e:
        load_reranker("api:bge-reranker-base")
    assert e.value.where == "GRAPHRECALL_RERANK_BASE_URL"
    with pytest.raises(ConfigurationError):
        load_reranker("jina:")


def test_tei_gets_its_own_request_shape_and_32_texts_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeHTTPServer(
        lambda req: by_length(req, "tei") if "texts" in req.body else (422, "no texts")
    ) as srv:
        monkeypatch.setenv("GRAPHRECALL_RERANK_BASE_URL", srv.url)
        got = load_reranker("tei")
        docs = ["a" * (1 + i % 7) for i in range(40)]
        scores = got.score("q", docs) if got is not None else []
    first = srv.bodies("/rerank")[0]
    assert first == {"query": "q", "texts": docs[:32], "truncate": True}  # TEI takes no model and no top_n
    assert [len(b["texts"]) for b in srv.bodies("/rerank")] == [32, 8]
    assert [s for _, s in sorted(zip(docs, scores, strict=True))] == sorted(scores)  # longer scores higher


def test_a_document_left_out_ranks_below_every_batchs_scores() -> None:
    def answer(req: Recorded) -> tuple[int, Any]:
        if req.body["documents"][0] == "x":  # first batch: scores only "y", high
            return 200, {"results": [{"index": 1, "relevance_score": 9.0}]}
        return 200, {
            "results": [{"index": 0, "relevance_score": -50.0}, {"index": 1, "relevance_score": -40.0}]
        }

    with FakeHTTPServer(answer) as srv:
        scores = reranker(srv.url, batch=2).score("q", ["x", "y", "z", "w"])
    assert scores[1:] == [9.0, -50.0, -40.0] and scores[0] < -50.0


def test_the_address_may_carry_the_version_or_the_whole_endpoint() -> None:
    assert reranker("http://h:8000/v1").url == "http://h:8000/v1/rerank"
    assert reranker("http://h:8000/v2/rerank").url == "http://h:8000/v2/rerank"
    assert (
        RerankSettings.from_env("tei", {"GRAPHRECALL_RERANK_BASE_URL": "h:8080/"}).base_url == "http://h:8080"
    )


def test_a_batch_too_large_names_the_setting_and_a_refused_key_is_final() -> None:
    with FakeHTTPServer(lambda req: (413, {"error": "batch size 64 > maximum allowed 32"})) as srv:
        with pytest.raises(RerankFailed) as e:
            reranker(srv.url).score("q", ["a"])
        assert "GRAPHRECALL_RERANK_BATCH" in str(e.value) and len(srv.requests) == 1
        srv.handler = lambda req: (401, {"error": "bad key"})
        with pytest.raises(ConfigurationError) as c:
            reranker(srv.url).score("q", ["a"])
        assert c.value.where == "GRAPHRECALL_RERANK_API_KEY" and len(srv.requests) == 2


def test_nothing_listening_is_unreachable_naming_the_url() -> None:
    with FakeHTTPServer(by_length) as srv:
        url = srv.url
    with pytest.raises(Unreachable) as e:
        reranker(url, retries=1).score("q", ["a"])
    assert url in str(e.value)


def test_settings_are_read_and_checked() -> None:
    s = RerankSettings.from_env("cohere", {"COHERE_API_KEY": "ck", "GRAPHRECALL_RERANK_TIMEOUT_S": "2.5"})
    assert (s.base_url, s.api_key, s.batch, s.retry.timeout) == ("https://api.cohere.com/v2", "ck", 64, 2.5)
    s = RerankSettings.from_env("jina", {"JINA_API_KEY": "jk", "GRAPHRECALL_RERANK_API_KEY": "mine"})
    assert s.api_key == "mine" and s.base_url == "https://api.jina.ai/v1"
    for name, raw in (("GRAPHRECALL_RERANK_BATCH", "0"), ("GRAPHRECALL_RERANK_MAX_RETRIES", "two")):
        with pytest.raises(ConfigurationError) as e:
            RerankSettings.from_env("jina", {name: raw})
        assert e.value.where == name


def test_a_local_directory_named_like_a_provider_is_a_local_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "api:my-reranker").mkdir()
    assert isinstance(load_reranker("api:my-reranker"), CrossEncoderReranker)
    assert isinstance(load_reranker(" ./api:my-reranker "), CrossEncoderReranker)
    monkeypatch.setenv("GRAPHRECALL_RERANK_BASE_URL", "http://127.0.0.1:9")
    assert isinstance(load_reranker("api:another"), ApiReranker)  # no such directory


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "store"
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        for i, text in enumerate(["my bike is red", "my bike is blue and very fast indeed, a long sentence"]):
            m.add_session(("acme", "ana"), [{"role": "user", "content": text}], session_id=f"s{i}")
    yield root


def test_a_search_is_reordered_by_the_servers_scores(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def shortest_first(req: Recorded) -> tuple[int, Any]:
        docs = req.body["documents"]
        return 200, {"results": [{"index": i, "relevance_score": 1 / len(d)} for i, d in enumerate(docs)]}

    orders = {}
    with FakeHTTPServer(shortest_first) as srv:
        monkeypatch.setenv("GRAPHRECALL_RERANK_BASE_URL", srv.url)
        for name, server_scores in (("longest first", by_length), ("shortest first", shortest_first)):
            srv.handler = server_scores
            cfg = RetrievalConfig(rerank_weight=10.0)
            with Memory.open(store, embedder=HashingEmbedder(64), reranker="api:m", retrieval=cfg) as m:
                orders[name] = [h.session_id for h in m.search(("acme", "ana"), "my bike", 2)]
        assert srv.bodies("/rerank")[0]["query"] == "my bike"
    assert orders["longest first"] == ["s1", "s0"] and orders["shortest first"] == ["s0", "s1"]


BIKES = ["my bike is red", "my bike is blue and fast", "my old bike had a basket and a bell"]


@pytest.fixture
def three(tmp_path: Path) -> Path:
    root = tmp_path / "three"
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        for i, text in enumerate(BIKES):
            m.add_session(("acme", "ana"), [{"role": "user", "content": text}], session_id=f"s{i}")
    return root


def second_first(fused: list[str]) -> Any:
    """A server that puts the fused second first and the fused first last: with the default weight that lifts the
    second above the first (rank blending), whatever the scores' scale."""
    wanted = {BIKES[int(fused[1][1:])]: 3.0, BIKES[int(fused[2][1:])]: 2.0, BIKES[int(fused[0][1:])]: 1.0}

    def answer(req: Recorded) -> tuple[int, Any]:
        docs = req.body["documents"]
        scores = [next(v for text, v in wanted.items() if text in d) for d in docs]
        return 200, {"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]}

    return answer


def cli_search(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    argv = ["search", "my bike", "--org", "acme", "--user", "ana", "-k", "3", "--json"]
    code = cli.main([*argv, "--root", str(root), "--embedder", "hashing", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [h["session_id"] for h in json.loads(out)["hits"]]


def test_graphrecall_search_takes_reranker(
    three: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRECALL_RERANKER", raising=False)
    fused = cli_search(three, capsys)
    assert len(fused) == 3
    with FakeHTTPServer(second_first(fused)) as srv:
        monkeypatch.setenv("GRAPHRECALL_RERANK_BASE_URL", srv.url)
        reranked = cli_search(three, capsys, "--reranker", "api:m")
        assert srv.bodies("/rerank")[0]["model"] == "m"
    assert reranked[0] == fused[1] and reranked != fused


def test_graphrecall_serve_takes_reranker_and_a_failing_one_is_a_503(three: Path, tmp_path: Path) -> None:
    import httpx

    from graphrecall.server.testing import ServerProcess

    with Memory.open(three, embedder=HashingEmbedder(64)) as m:
        fused = [h.session_id for h in m.search(("acme", "ana"), "my bike", 3)]
    search = "/v1/scopes/acme/ana/search"
    with FakeHTTPServer(second_first(fused)) as srv:
        env = {"GRAPHRECALL_RERANK_BASE_URL": srv.url, "GRAPHRECALL_RERANK_MAX_RETRIES": "0"}
        extra = ["--insecure-local", "--reranker", "api:m"]
        with ServerProcess(
            three, cli=True, extra_args=extra, env=env, log_path=tmp_path / "serve.log"
        ) as server:
            r = httpx.get(server.url + search, params={"query": "my bike", "k": 3}, timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["hits"][0]["session_id"] == fused[1]
            srv.handler = lambda req: (200, {"results": [{"index": 99, "relevance_score": 1.0}]})
            r = httpx.get(server.url + search, params={"query": "my bike", "k": 3}, timeout=30)
    assert r.status_code == 503 and r.headers["retry-after"] == "5"
    assert r.json()["error"]["code"] == "rerank_failed" and srv.url not in r.text  # no server address leaks


def test_mcp_takes_reranker() -> None:
    assert cli.build_parser().parse_args(["mcp", "--reranker", "tei"]).reranker == "tei"
