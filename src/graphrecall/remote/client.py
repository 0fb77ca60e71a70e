"""``RemoteMemory``: the operations of the table run by a graphrecall HTTP server instead of in this process.

One synchronous client (httpx) for every command that can go through a server: the CLI, the hooks. Each call
builds its request from the operation's row (``remote.requests``), reads the answer back into the operation's wire
model and hands back the Python result inside it (``Operation.unwire``), so the caller renders exactly what it
would render for a ``Memory`` in this process. A refusal comes back as the library's own exception for its code
(``invalid_input`` -> ``InvalidInput`` naming the field, ``not_found`` -> ``NotFound``, ...), so the caller's
error handling does not care where the operation ran; a server that cannot be reached, or that refuses the key,
is named together with where its address or key came from (``Server.source``, ``Server.key_source``).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from graphrecall.errors import (
    ConfigurationError,
    GraphRecallError,
    InvalidInput,
    NotAvailable,
    NotFound,
    StorageFull,
    StoreBusy,
    Unreachable,
)
from graphrecall.models import Scope
from graphrecall.operations import Operation
from graphrecall.params import Params
from graphrecall.remote.requests import request_of

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 600.0  # an answer with a slow LLM, a large import: the server's work, not a hang


@dataclass(frozen=True)
class Server:
    """A server to send operations to: its base URL, the API key (``None``: none), and where each came from, for
    the errors that name them ("--url", "GRAPHRECALL_URL", "<root>/.server.json")."""

    url: str
    key: str | None
    source: str
    key_source: str = ""
    discovered: bool = False  # from a server file: nothing answering there means "no server", not an error


class ServerError(GraphRecallError):
    """A failure the server reported with a code the library has no exception of its own for (``write_log``,
    ``internal``...): ``code`` is the server's."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NotReached(Unreachable):
    """Nothing accepted the connection: no request reached the server, so nothing of it was done (a caller may
    run the operation somewhere else)."""


class RemoteMemory:
    """The table's HTTP operations against one server. Use as a context manager (it holds a connection pool)."""

    def __init__(self, server: Server, *, timeout: float = READ_TIMEOUT_S) -> None:
        self.server = server
        headers = {"Authorization": f"Bearer {server.key}"} if server.key else {}
        self._http = httpx.Client(
            base_url=server.url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT_S, timeout)),
        )

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def wire(self, op: Operation[Any], scope: Scope, p: Params) -> BaseModel:
        """Run ``op`` on the server; its answer as the operation's wire model (what ``--json`` prints)."""
        req = request_of(op, scope, p)
        try:
            response = self._http.request(req.method, req.path, params=req.query, json=req.body)
        except httpx.ConnectError as e:
            raise NotReached(
                f"no graphrecall server answers at {self.server.url} (from {self.server.source}): {_reason(e)}"
            ) from None
        except httpx.TimeoutException:
            raise Unreachable(
                f"the graphrecall server at {self.server.url} (from {self.server.source}) did not answer {op.name} "
                "in time"
            ) from None
        except httpx.HTTPError as e:
            raise Unreachable(
                f"the graphrecall server at {self.server.url} (from {self.server.source}) failed: {_reason(e)}"
            ) from None
        if response.status_code >= 400:
            raise self._refusal(response)
        model = op.response_model()
        if model is None:
            raise ValueError(f"{op.name} declares no wire model")
        try:
            return model.model_validate(response.json())
        except (ValueError, ValidationError) as e:
            raise ServerError(
                "bad_response", f"the server at {self.server.url} answered {op.name} with something else: {e}"
            ) from None

    def call(self, op: Operation[Any], scope: Scope, p: Params) -> Any:
        """Run ``op`` on the server; the Python result, as ``Memory`` returns it."""
        return op.unwire(self.wire(op, scope, p))

    def _refusal(self, response: httpx.Response) -> GraphRecallError:
        code, message, field = _error_of(response)
        where = self.server.key_source or "no API key"
        if response.status_code == 401:
            hint = (
                f"the key from {self.server.key_source} is not one of its keys"
                if self.server.key
                else "it needs an API key: set GRAPHRECALL_API_KEY or pass --api-key-file"
            )
            return ConfigurationError(
                f"the graphrecall server at {self.server.url} refused the request: {hint}", where=where
            )
        if response.status_code == 403:
            return ConfigurationError(
                f"the graphrecall server at {self.server.url} refused the key from {where}: {message}",
                where=where,
            )
        if code == "invalid_input":
            prefix = f"{field}: "
            return InvalidInput(message.removeprefix(prefix), where=field or "")
        if code == "not_found":
            return NotFound(message)
        if code == "store_busy":
            return StoreBusy(f"the server's store is busy: {message}")
        if code == "storage_full":
            return StorageFull(message)
        if code == "not_available":
            return NotAvailable(f"{message} (the server at {self.server.url})")
        return ServerError(
            code, f"the server at {self.server.url} answered {response.status_code}: {message}"
        )


def _error_of(response: httpx.Response) -> tuple[str, str, str | None]:
    """(code, message, field) of the API's error shape, or what can be said of a body that is not it."""
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            field = error.get("field")
            return error["code"], str(error.get("message") or ""), field if isinstance(field, str) else None
    except (ValueError, AttributeError):
        pass
    return f"http_{response.status_code}", response.text[:200] or response.reason_phrase, None


def _reason(e: Exception) -> str:
    text = str(e) or type(e).__name__
    return text.split("] ", 1)[-1]  # "[Errno 111] Connection refused" -> "Connection refused"
