"""Starting the HTTP server: ``graphrecall serve`` and ``python -m graphrecall.server`` say how callers are
authenticated, log requests at ``--log-level info``, and refuse contradictory security flags.

Real child processes on loopback with the model-free hashing embedder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from graphrecall.server.auth import hash_key
from graphrecall.server.testing import ServerProcess

SECRET = "gr_serve-test-0123456789abcdef"
SESSION = {"session_id": "s1", "messages": [{"role": "user", "content": "I like green tea"}]}


def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"name": "ops", "sha256": hash_key(SECRET), "orgs": ["*"]}]))
    return path


def wait_for(server: ServerProcess, text: str, timeout: float = 10.0) -> str:
    """The server log once it holds ``text`` (lines are flushed just after a response is sent)."""
    deadline = time.monotonic() + timeout
    while text not in (log := server.log()):
        assert time.monotonic() < deadline, f"{text!r} never appeared in the server log:\n{log[-3000:]}"
        time.sleep(0.05)
    return log


def test_graphrecall_serve_without_keys_warns_loudly_and_logs_each_request(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "store", cli=True, extra_args=["--insecure-local"]) as server:
        base = f"{server.url}/v1/scopes/acme/alice"
        assert httpx.post(f"{base}/sessions", json=SESSION, timeout=30).status_code == 200
        assert httpx.get(f"{base}/search", params={"query": "green tea"}, timeout=30).status_code == 200
        log = wait_for(server, '"GET /v1/scopes/acme/alice/search" 200')
    assert "WARNING: AUTHENTICATION IS OFF" in log
    assert '"POST /v1/scopes/acme/alice/sessions" 200' in log
    assert "green tea" not in log  # the access log holds paths, never the users' query text


@pytest.mark.parametrize("cli", [True, False], ids=["graphrecall serve", "python -m graphrecall.server"])
def test_with_keys_the_server_names_its_auth_mode_and_log_level_quiets_the_access_log(
    tmp_path: Path, cli: bool
) -> None:
    args = ["--keys", str(keys_file(tmp_path)), "--log-level", "warning"]
    with ServerProcess(tmp_path / "store", cli=cli, extra_args=args) as server:
        r = httpx.get(
            f"{server.url}/v1/scopes/acme/alice/search",
            params={"query": "tea"},
            headers={"Authorization": f"Bearer {SECRET}"},
            timeout=30,
        )
        assert r.status_code == 200  # the key was accepted (a new user has an empty memory)
        log = wait_for(server, "authentication: 1 API key(s)")
    assert "AUTHENTICATION IS OFF" not in log
    assert "/v1/scopes/acme/alice/search" not in log  # access lines are INFO


@pytest.mark.parametrize(
    "command", [["graphrecall", "serve"], ["graphrecall.server"]], ids=["graphrecall serve", "python -m"]
)
def test_insecure_local_together_with_keys_is_refused_with_exit_2(tmp_path: Path, command: list[str]) -> None:
    root = tmp_path / "store"
    embedder = "hashing" if command[0] == "graphrecall" else "hashing:64"
    done = subprocess.run(
        [sys.executable, "-m", *command, "--root", str(root), "--embedder", embedder, "--keys",
         str(keys_file(tmp_path)), "--insecure-local"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "--insecure-local" in said and "API keys are configured" in said
    assert "Traceback" not in said
    assert not root.exists()  # refused before anything was opened
