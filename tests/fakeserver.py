"""A loopback HTTP server that answers JSON from a Python function, for testing LLM providers.

Provider tests go through the real SDKs over real HTTP (request serialisation, status handling, retries) but
must not need a network or a model. ``FakeHTTPServer`` runs ``http.server`` in a daemon thread on
``127.0.0.1`` with an ephemeral port, records every request and lets a handler decide each response.

    def handler(req: Recorded) -> Reply:
        return 200, {"id": "x", ...}

    with FakeHTTPServer(handler) as srv:
        llm = OpenAILLM("m", base_url=srv.url + "/v1")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Reply = tuple[int, Any] | tuple[int, Any, dict[str, str]]
Handler = Callable[["Recorded"], Reply]


@dataclass(frozen=True)
class Recorded:
    """One request as received: ``body`` is the decoded JSON (or the raw text when it was not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeHTTPServer:
    """Start with ``with FakeHTTPServer(handler) as srv:``; ``srv.url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._serve, name="fake-llm-http", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def bodies(self, path_suffix: str = "") -> list[Any]:
        """JSON bodies of the requests whose path ends with ``path_suffix``."""
        with self._lock:
            return [r.body for r in self.requests if r.path.endswith(path_suffix)]

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.01)  # shutdown() waits for one poll: keep tests fast

    def __enter__(self) -> FakeHTTPServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode("utf-8") if length else ""
                try:
                    body: Any = json.loads(raw) if raw else None
                except json.JSONDecodeError:
                    body = raw
                rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with outer._lock:
                    outer.requests.append(rec)
                try:
                    reply = outer.handler(rec)
                except Exception as exc:  # a broken test handler should show up as a 599, not hang
                    reply = (599, {"error": {"message": f"fake server handler failed: {exc!r}"}})
                status, payload = reply[0], reply[1]
                headers = reply[2] if len(reply) > 2 else {}
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_POST = _handle
            do_GET = _handle

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return _Handler
