"""Opt-in end-to-end fixtures: a real local OpenAI-compatible LLM server (llama.cpp, see /work/shared/llm).

Run with ``pytest -m e2e tests/e2e``. The server is started if nothing answers on its port (and stopped again
afterwards); the tests are skipped with the reason when the model directory is missing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

LLM_HOME = Path(os.environ.get("LLM_HOME", Path.home() / ".cache" / "local-llm"))
SERVE = Path(os.environ.get("GRAPHRECALL_E2E_SERVE", "/work/shared/llm/serve.sh"))
PORT = int(os.environ.get("LLM_PORT", "8181"))
BASE_URL = f"http://127.0.0.1:{PORT}/v1"
START_TIMEOUT_S = 300
BUSY_TIMEOUT_S = 1800


def _model_id(timeout: float = 3.0) -> str | None:
    try:
        with urllib.request.urlopen(f"{BASE_URL}/models", timeout=timeout) as r:
            data = json.load(r)
        return str(data["data"][0]["id"])
    except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError):
        return None


def _port_open() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=3):
            return True
    except OSError:
        return False


def _wait_for_busy_server() -> None:
    """A server that is generating for someone else answers nothing until it is done: wait, don't start another
    one (it could not bind the port)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while _model_id(timeout=30) is None:
        if time.monotonic() > deadline:
            pytest.skip(
                f"something listens on port {PORT} but did not answer /models within {BUSY_TIMEOUT_S} s"
            )
        time.sleep(5)


@pytest.fixture(scope="session")
def local_llm_url() -> Iterator[str]:
    """The base URL of a running local model server, starting one if needed."""
    if _port_open():
        _wait_for_busy_server()
        yield BASE_URL
        return
    if not LLM_HOME.is_dir() or not any(LLM_HOME.glob("*.gguf")):
        pytest.skip(f"no local model in {LLM_HOME}: run /work/shared/llm/setup.sh first (about 11 minutes)")
    if not SERVE.is_file():
        pytest.skip(f"{SERVE} not found: cannot start the local model server")
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / "graphrecall-e2e-llm.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(["bash", str(SERVE)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while _model_id() is None:
            if proc.poll() is not None:
                pytest.skip(f"the local model server exited with {proc.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                pytest.skip(
                    f"the local model server did not answer within {START_TIMEOUT_S} s; see {log.name}"
                )
            time.sleep(2)
        yield BASE_URL
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def local_llm(url: str) -> Any:
    """The local server as an OpenAI-compatible LLM, patient enough for a 1.5B model on 2 cores."""
    from graphrecall.llm import llm_from_settings

    return llm_from_settings("openai:local", base_url=url, timeout=900.0, max_retries=1)


def exchange(user: str, assistant: str) -> list[dict[str, str]]:
    """One user turn and the assistant's reply, as a session's messages."""
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def local_memory(root: Path, llm: Any) -> Any:
    """A store that extracts in the foreground with the local model, with its patience (a 1.5B model on 2 cores)."""
    from graphrecall import Memory
    from graphrecall.extract import ExtractionConfig

    cfg = ExtractionConfig(llm_timeout_s=1200.0, max_tokens=1024, background=False)
    return Memory.open(root, llm=llm, extraction=cfg)
