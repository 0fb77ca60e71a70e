"""Hostile requests: other tenants, path traversal, oversized and malformed bodies. Every one is a 4xx, and the
store is exactly as it was afterwards (same databases, same contents, no file created anywhere)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from graphrecall import Memory, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.testing import serve_in_thread

SECRET = "gr_acme-only-secret"
LIMIT = 20_000
MESSAGES = [{"role": "user", "content": "my locker code is 4312"}, {"role": "assistant", "content": "noted"}]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("isolation")


@pytest.fixture(scope="module")
def seeded(store: Path) -> Iterator[Memory]:
    """One store and server for the whole module (opening databases is the slow part): two tenants, one session
    each. Every test compares the store before and after its own requests."""
    with Memory.open(
        store / "root", embedder=HashingEmbedder(64), settings=Settings(root=store / "root")
    ) as mem:
        mem.add_session(("acme", "alice"), MESSAGES, session_id="a1", date="2024-01-01")
        mem.add_session(("globex", "bob"), MESSAGES, session_id="b1", date="2024-01-01")
        yield mem


@pytest.fixture(scope="module")
def url(seeded: Memory) -> Iterator[str]:
    auth = ApiKeyAuth([ApiKey("acme-app", hash_key(SECRET), frozenset({"acme"}))])
    with serve_in_thread(create_app(seeded, auth=auth, max_body_bytes=LIMIT)) as u:
        yield u


def snapshot(mem: Memory, store: Path) -> dict[str, Any]:
    """Which databases exist, what each holds, and every file (but Kuzu's transient WAL/lock files)."""
    transient = (".wal", ".lock", ".shadow")
    return {
        "scopes": [str(s) for s in mem.scopes()],
        "stats": {str(s): mem.stats(s).model_dump(exclude={"disk_bytes"}) for s in mem.scopes()},
        "files": sorted(
            str(p.relative_to(store)) for p in store.rglob("*") if not p.name.endswith(transient)
        ),
    }


def raw_request(url: str, method: str, target: str, body: bytes = b"", extra: str = "") -> int:
    """Send ``target`` byte for byte (no client-side normalisation of '..' or percent escapes); return the status."""
    parts = urlsplit(url)
    head = (
        f"{method} {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {SECRET}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        s.sendall(head.encode() + body)
        status_line = s.makefile("rb").readline().decode()
    return int(status_line.split()[1])


TRAVERSALS = [
    "/v1/scopes/acme/../globex/bob/export",
    "/v1/scopes/acme/%2e%2e/globex/export",
    "/v1/scopes/acme/%2E%2E/export",
    "/v1/scopes/acme/..%2Fglobex%2Fbob/export",
    "/v1/scopes/acme/..%5Cglobex/export",
    "/v1/scopes/%2e%2e/globex/bob/export",
    "/v1/scopes/acme%2F..%2Fglobex/bob/export",
    "/v1/scopes/acme/.alice/export",
    "/v1/scopes/acme/alice%00/export",
    "/v1/scopes/acme/%20alice/export",
    "/v1/scopes/acme/" + "u" * 129 + "/export",
    "/v1/scopes/acme/alice/sessions/..%2F..%2Fglobex",
    "/v1/scopes/acme/alice/facts/%2e%2e/history",
]


def test_other_orgs_are_forbidden_and_untouched(url: str, seeded: Memory, store: Path) -> None:
    before = snapshot(seeded, store)
    headers = {"Authorization": f"Bearer {SECRET}"}
    body = {"session_id": "evil", "messages": MESSAGES}
    responses = [
        httpx.post(f"{url}/v1/scopes/globex/bob/sessions", json=body, headers=headers),
        httpx.post(f"{url}/v1/scopes/globex/bob/messages", json=body, headers=headers),
        httpx.post(f"{url}/v1/scopes/globex/bob/import", json={"sessions": []}, headers=headers),
        httpx.get(f"{url}/v1/scopes/globex/bob/search", params={"query": "locker code"}, headers=headers),
        httpx.get(f"{url}/v1/scopes/globex/bob/export", headers=headers),
        httpx.delete(f"{url}/v1/scopes/globex/bob", headers=headers),
        httpx.get(f"{url}/v1/scopes/GLOBEX/bob/export", headers=headers),
    ]
    assert [r.status_code for r in responses] == [403] * 6 + [403]
    assert all("4312" not in r.text for r in responses)
    assert snapshot(seeded, store) == before


@pytest.mark.parametrize("target", TRAVERSALS)
def test_path_traversal_in_ids_is_rejected_and_touches_nothing(
    url: str, seeded: Memory, store: Path, target: str
) -> None:
    before = snapshot(seeded, store)
    assert 400 <= raw_request(url, "GET", target) < 500
    write = target.rsplit("/", 1)[0] + "/sessions"
    assert (
        400
        <= raw_request(
            url, "POST", write, b'{"session_id": "x", "messages": [{"role": "user", "content": "hi"}]}'
        )
        < 500
    )
    assert 400 <= raw_request(url, "DELETE", target.rsplit("/", 1)[0]) < 500
    assert snapshot(seeded, store) == before


def test_oversized_bodies_are_413_whether_declared_or_streamed(url: str, seeded: Memory, store: Path) -> None:
    before = snapshot(seeded, store)
    big = {"session_id": "big", "messages": [{"role": "user", "content": "x" * (LIMIT + 10)}]}
    headers = {"Authorization": f"Bearer {SECRET}"}
    declared = httpx.post(f"{url}/v1/scopes/acme/alice/sessions", json=big, headers=headers)
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer encoding
        yield b'{"session_id": "big", "messages": [{"role": "user", "content": "'
        for _ in range(LIMIT // 1000 + 5):
            yield b"y" * 1000
        yield b'"}]}'

    streamed = httpx.post(f"{url}/v1/scopes/acme/alice/sessions", content=chunks(), headers=headers)
    assert streamed.status_code == 413
    assert snapshot(seeded, store) == before
    # just under the limit is fine
    small = {"session_id": "ok", "messages": [{"role": "user", "content": "z" * (LIMIT - 200)}]}
    assert (
        httpx.post(
            f"{url}/v1/scopes/acme/alice/sessions", json=small, headers=headers, timeout=60
        ).status_code
        == 200
    )


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"",
        b"null",
        b"[]",
        b'"text"',
        b'{"session_id": "s", "messages": "hello"}',
        b'{"session_id": "s", "messages": [{"role": "user"}]}',
        b'{"session_id": "s", "messages": [{"role": "user", "content": "   "}]}',
        b'{"session_id": 5, "messages": [{"role": "user", "content": "hi"}]}',
        b'{"session_id": "s", "date": "not a date", "messages": [{"role": "user", "content": "hi"}]}',
        b'{"session_id": "s", "messages": [{"role": "user", "content": "hi", "id": "../x"}]}',
        b"\xff\xfe\x00garbage",
    ],
)
def test_malformed_bodies_are_4xx_and_store_nothing(
    url: str, seeded: Memory, store: Path, body: bytes
) -> None:
    before = snapshot(seeded, store)
    for path in (
        "/v1/scopes/acme/alice/sessions",
        "/v1/scopes/acme/carol/messages",
        "/v1/scopes/acme/alice/import",
    ):
        status = raw_request(url, "POST", path, body)
        assert status in {400, 422}, (path, body, status)
    assert snapshot(seeded, store) == before
