"""Webhooks: memory events (``graphrecall.events``) POSTed to the URLs an organisation registered, signed, retried,
and delivered from a durable outbox so that a restart loses none.

Registration is a server setting: ``graphrecall serve --webhooks FILE`` (or ``$GRAPHRECALL_WEBHOOKS``), a JSON or
TOML file with one entry per endpoint::

    {"webhooks": [{"org": "acme", "url": "https://hooks.acme.example/memory",
                   "secret_env": "ACME_WEBHOOK_SECRET", "events": ["fact.superseded", "scope.erased"]}]}

``secret`` (or ``secret_env``, the name of an environment variable that holds it, so the file holds no secret) is a
Standard Webhooks secret (``whsec_`` and base64); ``events`` defaults to every type.

Signing follows the Standard Webhooks specification (https://www.standardwebhooks.com), through its maintained
``standardwebhooks`` package, so a receiver verifies with any of that project's libraries: headers
``webhook-id`` (the event's id, the same on every retry: receivers deduplicate by it), ``webhook-timestamp`` (when
this attempt was sent: receivers refuse old ones, which stops replays) and ``webhook-signature`` (``v1,`` and the
base64 HMAC-SHA256 of ``id.timestamp.body``). The body is the event's JSON (``MemoryEvent.to_json``): ids and
counts, never the user's text.

Delivery. The sink only appends to the outbox (SQLite in WAL mode, ``<root>/webhooks-outbox.sqlite``), so the request
that changed memory waits for one local insert and never for a receiver. One thread sends what is due, oldest
first: a 2xx answer is delivered (the row is deleted); anything else, or no answer within ``timeout_s``, is retried
after ``backoff_s * 2**(attempts-1)`` seconds (at most ``max_backoff_s``) until ``max_attempts``, then kept as
``dead`` with the last error (the newest ``KEEP_DEAD`` are kept). A ``410 Gone`` stops at once. Events
for an endpoint no longer configured are dead. On start the outbox is read again, so what a stopped server had
not delivered is sent by the next one (at least once: a receiver that answered just before a crash may see an
event twice, with the same ``webhook-id``).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from graphrecall.events import EVENT_TYPES, MemoryEvent
from graphrecall.models import validate_identifier
from graphrecall.server.auth import ServerConfigError

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

WEBHOOKS_ENV = "GRAPHRECALL_WEBHOOKS"
OUTBOX_FILE = "webhooks-outbox.sqlite"
KEEP_DEAD = 1000


@dataclass(frozen=True)
class Endpoint:
    """One registered URL: events of ``org`` whose type is in ``events`` go to ``url``, signed with ``secret``."""

    org: str
    url: str
    secret: str
    events: frozenset[str]

    def wants(self, event: MemoryEvent) -> bool:
        return event.scope.org_id == self.org and event.type in self.events


def load_endpoints(path: str | Path) -> list[Endpoint]:
    """The endpoints of a JSON (``.json``) or TOML (``.toml``) file; every problem names the file and the entry."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ServerConfigError(f"webhooks file {p}: cannot be read ({e.strerror or e})") from None
    try:
        data: Any = tomllib.loads(raw.decode()) if p.suffix == ".toml" else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ServerConfigError(
            f"webhooks file {p}: not valid {'TOML' if p.suffix == '.toml' else 'JSON'} ({e})"
        ) from None
    entries = data.get("webhooks") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ServerConfigError(f'webhooks file {p}: expected {{"webhooks": [...]}}')
    return [_endpoint(e, f"webhooks file {p}: webhooks[{i}]") for i, e in enumerate(entries)]


def _endpoint(entry: Any, where: str) -> Endpoint:
    if not isinstance(entry, dict):
        raise ServerConfigError(f"{where}: expected an object with org, url and secret")
    unknown = set(entry) - {"org", "url", "secret", "secret_env", "events"}
    if unknown:
        raise ServerConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    try:
        org = validate_identifier(entry.get("org", ""), "org")
    except ValueError as e:
        raise ServerConfigError(f"{where}.org: {e}") from None
    url = entry.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if not isinstance(url, str) or parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ServerConfigError(f"{where}.url: expected an http(s) URL, got {url!r}")
    secret = entry.get("secret")
    if "secret_env" in entry:
        name = entry["secret_env"]
        secret = os.environ.get(name) if isinstance(name, str) else None
        if not secret:
            raise ServerConfigError(f"{where}.secret_env: the environment variable {name!r} is not set")
    if not isinstance(secret, str) or not secret:
        raise ServerConfigError(f"{where}: give the signing secret as secret or secret_env")
    try:
        _signer(secret)
    except Exception:
        raise ServerConfigError(
            f"{where}: the secret is not a Standard Webhooks secret (whsec_ and base64)"
        ) from None
    events = entry.get("events", list(EVENT_TYPES))
    if not isinstance(events, list) or not events or not all(e in EVENT_TYPES for e in events):
        raise ServerConfigError(
            f"{where}.events: expected a list of {', '.join(EVENT_TYPES)}, got {events!r}"
        )
    return Endpoint(org=org, url=url, secret=secret, events=frozenset(events))


def _signer(secret: str) -> Any:
    from standardwebhooks.webhooks import Webhook

    return Webhook(secret)


class Outbox:
    """The durable queue of deliveries (one row per event and endpoint), in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # an acknowledged event survives a power cut
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS deliveries (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL,"
                " org TEXT NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',"
                " attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL, last_error TEXT, created_at REAL NOT NULL)"
            )
            self._db.execute("CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_at)")

    def add(self, rows: Sequence[tuple[str, str, str, str]], now: float) -> None:
        """``(event_id, org, url, body)`` rows, due now, in one transaction."""
        with self._lock:
            self._db.executemany(
                "INSERT INTO deliveries (event_id, org, url, body, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [(*r, now, now) for r in rows],
            )

    def due(self, now: float, limit: int = 32) -> list[tuple[int, str, str, str, str, int]]:
        with self._lock:
            return self._db.execute(
                "SELECT id, event_id, org, url, body, attempts FROM deliveries WHERE status = 'pending'"
                " AND next_at <= ? ORDER BY next_at, id LIMIT ?",
                (now, limit),
            ).fetchall()

    def next_due(self) -> float | None:
        with self._lock:
            row = self._db.execute("SELECT min(next_at) FROM deliveries WHERE status = 'pending'").fetchone()
        return None if row[0] is None else float(row[0])

    def delivered(self, row_id: int) -> None:
        with self._lock:
            self._db.execute("DELETE FROM deliveries WHERE id = ?", (row_id,))

    def failed(self, row_id: int, error: str, *, retry_at: float | None) -> None:
        """Another attempt at ``retry_at``, or dead (``None``); the oldest dead rows past ``KEEP_DEAD`` go."""
        with self._lock:
            if retry_at is None:
                self._db.execute(
                    "UPDATE deliveries SET status = 'dead', attempts = attempts + 1, last_error = ? WHERE id = ?",
                    (error[:500], row_id),
                )
                self._db.execute(
                    "DELETE FROM deliveries WHERE status = 'dead' AND id NOT IN (SELECT id FROM deliveries"
                    " WHERE status = 'dead' ORDER BY id DESC LIMIT ?)",
                    (KEEP_DEAD,),
                )
            else:
                self._db.execute(
                    "UPDATE deliveries SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE id = ?",
                    (retry_at, error[:500], row_id),
                )

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT status, count(*) FROM deliveries GROUP BY status").fetchall()
        return {"pending": 0, "dead": 0, **{str(s): int(n) for s, n in rows}}

    def dead(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT event_id, url, attempts, last_error FROM deliveries WHERE status = 'dead' ORDER BY id"
            ).fetchall()
        return [{"event_id": e, "url": u, "attempts": a, "last_error": err} for e, u, a, err in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class WebhookDispatcher:
    """Subscribe ``sink`` to a ``Memory``; ``start`` the sending thread; ``close`` stops it (what is pending stays in
    the outbox for the next start)."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        outbox: Path,
        *,
        max_attempts: int = 12,
        backoff_s: float = 2.0,
        max_backoff_s: float = 3600.0,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if max_attempts < 1 or backoff_s <= 0 or timeout_s <= 0:
            raise ServerConfigError("webhooks: max_attempts, backoff_s and timeout_s must be positive")
        self.endpoints = list(endpoints)
        self.outbox = Outbox(outbox)
        self.max_attempts, self.backoff_s, self.max_backoff_s = max_attempts, backoff_s, max_backoff_s
        self._clock = clock
        import httpx  # only a server with webhooks pays for it

        self._http_error = httpx.HTTPError
        self._client = httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=False)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._signers = {e.secret: _signer(e.secret) for e in self.endpoints}

    # -- the sink: called on the thread that changed memory ----------------------------------------------------
    def sink(self, event: MemoryEvent) -> None:
        targets = [e for e in self.endpoints if e.wants(event)]
        if not targets:
            return
        body = json.dumps(event.to_json(), separators=(",", ":"), ensure_ascii=False)
        self.outbox.add([(event.id, e.org, e.url, body) for e in targets], self._clock())
        self._wake.set()

    # -- the sending thread ------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="graphrecall-webhooks", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._client.close()
        self.outbox.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.send_due()
            except Exception:  # a bug here must not end deliveries for the life of the server
                log.exception("webhook delivery loop failed; retrying")
            nxt = self.outbox.next_due() if not self._stop.is_set() else None
            wait = 60.0 if nxt is None else min(60.0, max(0.0, nxt - self._clock()))
            self._wake.wait(wait)
            self._wake.clear()

    def send_due(self) -> int:
        """Send every delivery due now (the thread's loop; tests call it directly); returns how many were sent."""
        sent = 0
        while not self._stop.is_set():
            rows = self.outbox.due(self._clock())
            if not rows:
                return sent
            for row_id, event_id, org, url, body, attempts in rows:
                self._send(row_id, event_id, org, url, body, attempts)
                sent += 1
        return sent

    def _send(self, row_id: int, event_id: str, org: str, url: str, body: str, attempts: int) -> None:
        endpoint = next((e for e in self.endpoints if e.url == url and e.org == org), None)
        if endpoint is None:
            self.outbox.failed(row_id, "the endpoint is no longer configured", retry_at=None)
            return
        now = self._clock()
        headers = {
            "content-type": "application/json",
            "user-agent": "graphrecall-webhooks",
            "webhook-id": event_id,
            "webhook-timestamp": str(int(now)),
            "webhook-signature": self._signers[endpoint.secret].sign(
                event_id, datetime.fromtimestamp(int(now), tz=UTC), body
            ),
        }
        try:
            response = self._client.post(url, content=body.encode(), headers=headers)
        except self._http_error as e:
            error = f"{type(e).__name__}: {e}"
        else:
            if 200 <= response.status_code < 300:
                self.outbox.delivered(row_id)
                return
            error = f"HTTP {response.status_code}"
            if response.status_code == 410:  # the receiver says this endpoint is gone for good
                self.outbox.failed(row_id, error, retry_at=None)
                return
        done = attempts + 1
        retry_at = (
            None
            if done >= self.max_attempts
            else now + min(self.max_backoff_s, self.backoff_s * 2 ** (done - 1))
        )
        log.warning("webhook %s to %s failed (attempt %d): %s", event_id, url, done, error)
        self.outbox.failed(row_id, error, retry_at=retry_at)


def dispatcher_from_settings(path: str | None, root: Path) -> WebhookDispatcher | None:
    """The dispatcher ``--webhooks`` (else ``$GRAPHRECALL_WEBHOOKS``) asks for, with its outbox under ``root``."""
    source = path or os.environ.get(WEBHOOKS_ENV) or None
    if source is None:
        return None
    endpoints = load_endpoints(source)
    root.mkdir(parents=True, exist_ok=True)
    return WebhookDispatcher(endpoints, root / OUTBOX_FILE)
