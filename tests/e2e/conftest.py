"""Opt-in end-to-end fixtures: a real local OpenAI-compatible LLM server (llama.cpp, see /work/shared/llm).

Run with ``pytest -m e2e tests/e2e``. The server is started if nothing answers on its port (and stopped again
afterwards); the tests are skipped with the reason when the model directory is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

LLM_HOME = Path(os.environ.get("LLM_HOME", Path.home() / ".cache" / "local-llm"))
SERVE = Path(os.environ.get("GRAPHRECALL_E2E_SERVE", "/work/shared/llm/serve.sh"))
PORT = int(os.environ.get("LLM_PORT", "8181"))
BASE_URL = f"http://127.0.0.1:{PORT}/v1"
START_TIMEOUT_S = 300


def _model_id() -> str | None:
    try:
        with urllib.request.urlopen(f"{BASE_URL}/models", timeout=3) as r:
            data = json.load(r)
        return str(data["data"][0]["id"])
    except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError):
        return None


@pytest.fixture(scope="session")
def local_llm_url() -> Iterator[str]:
    """The base URL of a running local model server, starting one if needed."""
    if _model_id() is not None:
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
