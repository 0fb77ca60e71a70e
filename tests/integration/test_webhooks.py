"""Webhooks (server/webhooks.py): memory events reach the organisation's receiver over real HTTP on loopback, signed
by the Standard Webhooks scheme, retried while the receiver is down, and kept across a restart."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from graphrecall import Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.auth import ServerConfigError
from graphrecall.server.testing import serve_in_thread
from graphrecall.server.webhooks import Endpoint, WebhookDispatcher, load_endpoints

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OTHER_SECRET = "whsec_c2VjcmV0LW9mLWFub3RoZXItb3JnYW5pc2F0aW9u"


class Receiver:
    """An HTTP receiver on a fixed loopback port that can be down (nothing listens), failing (503) or up."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/hooks"
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.status = 204
        self._server: ThreadingHTTPServer | None = None

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.received]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(_free_port())
    r.up()
    yield r
    r.down()


class Clock:
    def __init__(self) -> None:
        self.now = time.time()  # moved by hand from here; starts at the real time so receivers accept it

    def __call__(self) -> float:
        return self.now


def _dispatcher(tmp_path: Path, endpoints: list[Endpoint], clock: Clock, **kw: Any) -> WebhookDispatcher:
    return WebhookDispatcher(endpoints, tmp_path / "outbox.sqlite", clock=clock, timeout_s=5, **kw)


def _acme(url: str, **kw: Any) -> Endpoint:
    events = frozenset(kw.pop("events", ["session.stored", "fact.superseded", "scope.erased"]))
    return Endpoint(org="acme", url=url, secret=SECRET, events=events)


def test_an_event_reaches_its_organisation_signed_and_without_the_users_text(
    tmp_path: Path, receiver: Receiver
) -> None:
    clock = Clock()
    hooks = _dispatcher(
        tmp_path,
        [_acme(receiver.url), Endpoint(org="beta", url=receiver.url + "/beta", secret=OTHER_SECRET,
                                       events=frozenset({"scope.erased"}))],
        clock,
    )  # fmt: skip
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        mem.subscribe(hooks.sink)
        mem.add_session(
            ("acme", "ann"), [{"role": "user", "content": "my password is hunter2"}], session_id="s1"
        )
        mem.add_session(
            ("beta", "bob"), [{"role": "user", "content": "hello"}], session_id="s1"
        )  # not wanted
        assert hooks.send_due() == 1
    hooks.close()

    [(headers, body)] = receiver.received
    event = Webhook(SECRET).verify(body, headers)  # raises unless the signature and timestamp check out
    assert event["type"] == "session.stored" and event["org_id"] == "acme" and event["user_id"] == "ann"
    assert event["data"] == {"session_ids": ["s1"], "sessions_added": 1, "messages_added": 1}
    assert headers["webhook-id"] == event["id"]
    assert b"hunter2" not in body
    with pytest.raises(WebhookVerificationError):
        Webhook(OTHER_SECRET).verify(body, headers)  # another organisation's secret does not verify it
    tampered = body.replace(b'"ann"', b'"eve"')
    with pytest.raises(WebhookVerificationError):
        Webhook(SECRET).verify(tampered, headers)


def test_a_receiver_that_is_down_for_a_while_gets_the_event_later_with_the_same_id(tmp_path: Path) -> None:
    receiver, clock = Receiver(_free_port()), Clock()  # nothing listens on its port yet
    hooks = _dispatcher(tmp_path, [_acme(receiver.url)], clock, backoff_s=10)
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        mem.subscribe(hooks.sink)
        mem.add_session(("acme", "ann"), [{"role": "user", "content": "hi"}], session_id="s1")
    hooks.send_due()  # connection refused: attempt 1
    assert hooks.outbox.counts()["pending"] == 1
    clock.now += 5
    assert hooks.send_due() == 0  # not due before its backoff
    receiver.up()
    receiver.status = 503
    clock.now += 5
    assert hooks.send_due() == 1  # attempt 2: answered 503
    clock.now += 19
    assert hooks.send_due() == 0  # the next wait doubled to 20 s
    receiver.status = 200
    clock.now += 1
    assert hooks.send_due() == 1
    assert hooks.outbox.counts() == {"pending": 0, "dead": 0}
    hooks.close()
    receiver.down()
    ids = {h["webhook-id"] for h, _ in receiver.received}
    assert len(receiver.received) == 2 and len(ids) == 1  # the 503 and the delivery: one event, one id


def test_what_a_stopped_server_had_not_delivered_is_sent_by_the_next_one(
    tmp_path: Path, receiver: Receiver
) -> None:
    clock = Clock()
    first = _dispatcher(tmp_path, [_acme(receiver.url)], clock)
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        mem.subscribe(first.sink)
        mem.add_session(("acme", "ann"), [{"role": "user", "content": "hi"}], session_id="s1")
        mem.forget(("acme", "ann"))
    first.close()  # stopped before sending anything
    assert receiver.received == []

    second = _dispatcher(tmp_path, [_acme(receiver.url)], clock)
    second.start()  # the real sending thread
    try:
        for _ in range(200):
            if len(receiver.received) == 2:
                break
            threading.Event().wait(0.05)
    finally:
        second.close()
    assert [e["type"] for e in receiver.events()] == ["session.stored", "scope.erased"]


def test_delivery_gives_up_after_its_attempts_and_at_once_on_410(tmp_path: Path, receiver: Receiver) -> None:
    clock = Clock()
    hooks = _dispatcher(tmp_path, [_acme(receiver.url)], clock, max_attempts=2, backoff_s=1)
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        mem.subscribe(hooks.sink)
        receiver.status = 500
        mem.add_session(("acme", "ann"), [{"role": "user", "content": "hi"}], session_id="s1")
        hooks.send_due()
        clock.now += 1
        hooks.send_due()
        assert hooks.outbox.counts() == {"pending": 0, "dead": 1}
        receiver.status = 410
        mem.add_session(("acme", "ann"), [{"role": "user", "content": "again"}], session_id="s2")
        hooks.send_due()
    dead = hooks.outbox.dead()
    hooks.close()
    assert [(d["attempts"], d["last_error"]) for d in dead] == [(2, "HTTP 500"), (1, "HTTP 410")]


def test_webhooks_through_the_http_api(tmp_path: Path, receiver: Receiver) -> None:
    hooks = WebhookDispatcher([_acme(receiver.url)], tmp_path / "outbox.sqlite", backoff_s=0.1)
    with (
        Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem,
        serve_in_thread(create_app(mem, auth=None, insecure_local=True, warm=False)) as url,
    ):
        mem.subscribe(hooks.sink)
        hooks.start()
        r = httpx.post(
            f"{url}/v1/scopes/acme/ann/sessions",
            json={"session_id": "s1", "messages": [{"role": "user", "content": "I moved to Oslo"}]},
        )
        assert r.status_code == 200, r.text
        for _ in range(200):
            if receiver.received:
                break
            threading.Event().wait(0.05)
        hooks.close()
    assert [e["type"] for e in receiver.events()] == ["session.stored"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (
            {"org": "acme", "url": "ftp://x", "secret": SECRET},
            r"webhooks\[0\]\.url: expected an http\(s\) URL",
        ),
        (
            {"org": "acme", "url": "http://x", "secret": SECRET, "events": ["fact.changed"]},
            r"\.events: expected",
        ),
        (
            {"org": "acme", "url": "http://x", "secret_env": "NO_SUCH_VARIABLE_X"},
            "'NO_SUCH_VARIABLE_X' is not set",
        ),
        ({"org": "acme", "url": "http://x", "secret": "not base64!"}, "not a Standard Webhooks secret"),
        ({"org": "../etc", "url": "http://x", "secret": SECRET}, r"webhooks\[0\]\.org"),
        ({"org": "acme", "url": "http://x", "secret": SECRET, "retries": 3}, "unknown field"),
    ],
)
def test_a_bad_webhooks_file_is_refused_naming_the_entry(
    tmp_path: Path, entry: dict[str, Any], says: str
) -> None:
    path = tmp_path / "hooks.json"
    path.write_text(json.dumps({"webhooks": [entry]}))
    with pytest.raises(ServerConfigError, match=says):
        load_endpoints(path)


def test_a_toml_file_with_the_secret_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_HOOK_SECRET", SECRET)
    path = tmp_path / "hooks.toml"
    path.write_text(
        '[[webhooks]]\norg = "acme"\nurl = "https://hooks.acme.example/memory"\nsecret_env = "ACME_HOOK_SECRET"\n'
        'events = ["fact.superseded"]\n'
    )
    [endpoint] = load_endpoints(path)
    assert endpoint.secret == SECRET and endpoint.events == frozenset({"fact.superseded"})
