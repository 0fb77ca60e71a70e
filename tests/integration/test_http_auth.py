"""API-key auth: who may call, which orgs each key reaches, that secrets never reach logs, and when the server
refuses to start at all."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from graphrecall import Memory
from graphrecall.server import create_app, run_server
from graphrecall.server.auth import (
    ApiKey,
    ApiKeyAuth,
    ServerConfigError,
    check_startup,
    hash_key,
    is_loopback,
)
from graphrecall.server.serve import KEYS_ENV, load_auth
from graphrecall.server.testing import serve_in_thread

ACME_SECRET = "gr_acme-secret-0123456789abcdef"
ADMIN_SECRET = "gr_admin-secret-fedcba9876543210"
SESSION = {"session_id": "s1", "messages": [{"role": "user", "content": "I like green tea"}]}


@pytest.fixture
def auth() -> ApiKeyAuth:
    return ApiKeyAuth(
        [
            ApiKey("spring-acme", hash_key(ACME_SECRET), frozenset({"acme"})),
            ApiKey("ops", hash_key(ADMIN_SECRET), frozenset({"*"})),
        ]
    )


@pytest.fixture
def url(mem: Memory, auth: ApiKeyAuth) -> Iterator[str]:
    with serve_in_thread(create_app(mem, auth=auth)) as u:
        yield u


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_hash_key_is_the_sha256_hex_of_the_secret() -> None:
    assert hash_key("abc") == hashlib.sha256(b"abc").hexdigest()


def test_requests_without_a_valid_key_are_401_with_a_bearer_challenge(url: str, mem: Memory) -> None:
    attempts = [
        {},
        bearer("wrong"),
        {"Authorization": ACME_SECRET},  # no scheme
        {"Authorization": f"Basic {ACME_SECRET}"},
        {"Authorization": "Bearer"},
        bearer(ACME_SECRET + "x"),
    ]
    for headers in attempts:
        r = httpx.post(f"{url}/v1/scopes/acme/alice/sessions", json=SESSION, headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
    assert mem.scopes() == []


def test_auth_is_checked_before_the_body_is_parsed(url: str) -> None:
    r = httpx.post(
        f"{url}/v1/scopes/acme/alice/sessions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 401


def test_a_key_reaches_only_its_orgs(url: str, mem: Memory) -> None:
    ok = httpx.post(f"{url}/v1/scopes/acme/alice/sessions", json=SESSION, headers=bearer(ACME_SECRET))
    assert ok.status_code == 200, ok.text
    for method, path in [
        ("POST", "/v1/scopes/globex/alice/sessions"),
        ("GET", "/v1/scopes/globex/alice/search?query=tea"),
        ("GET", "/v1/scopes/globex/alice/export"),
        ("DELETE", "/v1/scopes/globex/alice"),
    ]:
        r = httpx.request(
            method, f"{url}{path}", json=SESSION if method == "POST" else None, headers=bearer(ACME_SECRET)
        )
        assert r.status_code == 403, (method, path)
        assert r.json()["error"]["code"] == "forbidden"
        assert "globex" in r.json()["error"]["message"]
    assert [str(s) for s in mem.scopes()] == ["acme/alice"]


def test_a_wildcard_key_reaches_every_org(url: str) -> None:
    for org in ("acme", "globex"):
        r = httpx.get(
            f"{url}/v1/scopes/{org}/alice/search", params={"query": "tea"}, headers=bearer(ADMIN_SECRET)
        )
        assert r.status_code == 200


def test_health_is_open_but_metrics_need_a_key(url: str) -> None:
    assert httpx.get(f"{url}/healthz").status_code == 200
    assert httpx.get(f"{url}/readyz").status_code == 200
    assert httpx.get(f"{url}/metrics").status_code == 401
    assert httpx.get(f"{url}/metrics", headers=bearer(ACME_SECRET)).status_code == 200


def test_refused_requests_are_counted_under_their_route_template(url: str) -> None:
    assert httpx.get(f"{url}/v1/scopes/acme/alice/stats").status_code == 401
    assert httpx.get(f"{url}/v1/scopes/globex/alice/stats", headers=bearer(ACME_SECRET)).status_code == 403
    text = httpx.get(f"{url}/metrics", headers=bearer(ADMIN_SECRET)).text
    route = "/v1/scopes/{org}/{user}/stats"
    for status in ("401", "403"):
        assert (
            f'graphrecall_http_requests_total{{method="GET",route="{route}",status="{status}"}} 1' in text
        ), text
    assert "<unmatched>" not in text


def test_secrets_never_appear_in_logs_or_responses(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    responses = [
        httpx.post(f"{url}/v1/scopes/acme/alice/sessions", json=SESSION, headers=bearer(ACME_SECRET)),
        httpx.get(f"{url}/v1/scopes/globex/alice/export", headers=bearer(ACME_SECRET)),
        httpx.get(
            f"{url}/v1/scopes/acme/alice/search", params={"query": "tea"}, headers=bearer(ACME_SECRET + "x")
        ),
        httpx.get(
            f"{url}/v1/scopes/acme/alice/search",
            params={"query": "tea", "k": -1},
            headers=bearer(ADMIN_SECRET),
        ),
    ]
    assert [r.status_code for r in responses] == [200, 403, 401, 422]
    deadline = time.monotonic() + 5  # the log line is written just after the response is sent
    while len(access := [r for r in caplog.records if r.name == "graphrecall.server.access"]) < 4:
        assert time.monotonic() < deadline, "the request log is missing"
        time.sleep(0.01)
    assert any("key=spring-acme" in r.getMessage() for r in access)  # the request log names the key...
    for secret in (ACME_SECRET, ADMIN_SECRET):  # ...and never holds a secret
        assert secret not in caplog.text
        assert all(secret not in r.text for r in responses)
    assert "tea" not in "".join(r.getMessage() for r in access)  # nor the users' search text


def test_keys_file_json_and_toml(tmp_path: Path) -> None:
    entry = {"name": "spring-prod", "sha256": hash_key("s3cret"), "orgs": ["acme"]}
    as_list = tmp_path / "keys.json"
    as_list.write_text(json.dumps([entry]))
    as_object = tmp_path / "keys2.json"
    as_object.write_text(json.dumps({"keys": [entry]}))
    as_toml = tmp_path / "keys.toml"
    as_toml.write_text(f'[[keys]]\nname = "spring-prod"\nsha256 = "{entry["sha256"]}"\norgs = ["acme"]\n')
    for path in (as_list, as_object, as_toml):
        principal = ApiKeyAuth.from_file(path).verify("s3cret")
        assert principal is not None
        assert principal.name == "spring-prod"
        assert principal.allows("acme")
        assert not principal.allows("globex")
        assert ApiKeyAuth.from_file(path).verify("s3cret ") is None


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("[]", "non-empty list"),
        ("{oops", "not valid JSON"),
        ('[{"name": "a", "sha256": "s3cret", "orgs": ["acme"]}]', "keys[0].sha256"),
        ('[{"name": "a", "sha256": "' + "0" * 64 + '", "orgs": []}]', "keys[0].orgs"),
        ('[{"sha256": "' + "0" * 64 + '", "orgs": ["*"]}]', "keys[0].name"),
        (
            '[{"name": "a", "sha256": "'
            + "0" * 64
            + '", "orgs": ["*"]}, {"name": "a", "sha256": "'
            + "1" * 64
            + '", "orgs": ["*"]}]',
            "appears twice",
        ),
    ],
)
def test_bad_keys_files_are_rejected_with_the_reason(tmp_path: Path, content: str, complaint: str) -> None:
    path = tmp_path / "keys.json"
    path.write_text(content)
    with pytest.raises(ServerConfigError, match=re.escape(complaint)):
        ApiKeyAuth.from_file(path)


def test_missing_keys_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ServerConfigError, match=r"nope\.json"):
        ApiKeyAuth.from_file(tmp_path / "nope.json")


def test_keys_file_comes_from_the_flag_or_else_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"name": "env-key", "sha256": hash_key("x"), "orgs": ["*"]}]))
    monkeypatch.delenv(KEYS_ENV, raising=False)
    assert load_auth(None) is None
    monkeypatch.setenv(KEYS_ENV, str(path))
    from_env = load_auth(None)
    assert from_env is not None
    assert from_env.keys[0].name == "env-key"


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "[::1]", "127.0.0.2"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com", ""])
def test_non_loopback_hosts(host: str) -> None:
    assert not is_loopback(host)


def test_without_keys_the_server_starts_only_on_loopback_with_insecure_local(auth: ApiKeyAuth) -> None:
    check_startup(None, host="127.0.0.1", insecure_local=True)
    check_startup(auth, host="0.0.0.0", insecure_local=False)
    with pytest.raises(ServerConfigError, match="no API keys configured"):
        check_startup(None, host="127.0.0.1", insecure_local=False)
    with pytest.raises(ServerConfigError, match="only binds to loopback"):
        check_startup(None, host="0.0.0.0", insecure_local=True)


def test_insecure_local_beside_keys_is_refused_rather_than_ignored(auth: ApiKeyAuth) -> None:
    for host in ("127.0.0.1", "0.0.0.0"):
        with pytest.raises(ServerConfigError, match="API keys are configured"):
            check_startup(auth, host=host, insecure_local=True)


def test_run_server_refuses_before_opening_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)
    root = tmp_path / "store"
    for host, insecure in (("0.0.0.0", True), ("127.0.0.1", False), ("10.1.2.3", False)):
        args = argparse.Namespace(root=str(root), host=host, port=0, keys=None, insecure_local=insecure)
        with pytest.raises(ServerConfigError):
            run_server(args)
    assert not root.exists()


def test_create_app_without_auth_must_be_asked_for(mem: Memory) -> None:
    with pytest.raises(ServerConfigError, match="insecure_local"):
        create_app(mem, auth=None)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_work_offline_and_without_a_key(mem: Memory, auth: ApiKeyAuth, page: str) -> None:
    """The docs pages load their scripts and styles from this server (the fastapi-offline wheel), never from a
    CDN that a server's network may not reach; like the pages, those files need no key."""
    with serve_in_thread(create_app(mem, auth=auth)) as url, httpx.Client(base_url=url, timeout=60) as c:
        html = c.get(page)
        assert html.status_code == 200
        assets = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        assert assets and all(a.startswith("/") for a in assets), assets  # nothing from another host
        for asset in assets:
            got = c.get(asset)
            assert got.status_code == 200 and len(got.content) > 100, asset
