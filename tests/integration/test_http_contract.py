"""The contract is the API: schemathesis, with every check it has, against a live server on loopback.

It generates valid and invalid requests for every operation of the committed docs/openapi.json (coverage,
fuzzing and stateful phases) and checks each answer: no server error, every status documented, every body valid
against its schema (dates with their UTC offset...), content types and headers as documented (``Allow`` on a
405), schema-valid requests accepted and schema-violating ones refused (a boolean is not an integer, a number is
not a date, an id breaking ID_PATTERN is refused), authentication not ignored. The few rules JSON Schema cannot
state are listed, with why, in schemathesis.toml beside this file.

Bounded for CI: a fixed seed (the same requests every run, so a failure reproduces with the command printed),
``GRAPHRECALL_CONTRACT_EXAMPLES`` examples per operation and phase (default 10; ~1,800 requests, about two
minutes here), no shrinking. Raise it for a deeper run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphrecall import Memory, Settings
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.testing import serve_in_thread

HERE = Path(__file__).resolve().parent
SPEC = HERE.parents[1] / "docs" / "openapi.json"
CONFIG = HERE / "schemathesis.toml"
SECRET = "gr_contract-secret"
EXAMPLES = int(os.environ.get("GRAPHRECALL_CONTRACT_EXAMPLES", "10"))
SEED = os.environ.get("GRAPHRECALL_CONTRACT_SEED", "1")


def schemathesis_cli() -> str | None:
    beside = Path(sys.executable).parent / "schemathesis"
    return str(beside) if beside.exists() else shutil.which("schemathesis")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose one key may read every organisation, over a store holding the user the config's operations
    work on (a session and a fact, so reads answer with data and ``supersede`` finds a fact)."""
    root = tmp_path_factory.mktemp("contract") / "store"
    auth = ApiKeyAuth([ApiKey("contract", hash_key(SECRET), frozenset({"*"}))])
    with (
        Memory.open(root, embedder=HashingEmbedder(64), settings=Settings(root=root)) as mem,
        serve_in_thread(create_app(mem, auth=auth, max_body_bytes=200_000)) as u,
    ):
        scope = ("acme", "fuzz")
        mem.add_session(scope, [{"role": "user", "content": "I moved to Berlin"}], session_id="seed")
        mem.add_fact(scope, "The user lives in Berlin.", kind="attribute", source="seed")
        yield u


@pytest.mark.slow
def test_every_generated_request_gets_the_answer_the_contract_promises(url: str, tmp_path: Path) -> None:
    cli = schemathesis_cli()
    if cli is None:
        pytest.skip("schemathesis is not installed (it is in the dev extra: pip install -e '.[dev]')")
    command = [
        cli, "--config-file", str(CONFIG), "run", str(SPEC), "--url", url,
        "--header", f"Authorization: Bearer {SECRET}", "--checks", "all", "--seed", SEED,
        "--max-examples", str(EXAMPLES), "--no-shrink", "--workers", "1", "--request-timeout", "60",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""}
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, env=env, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-20_000:]
    summary = output[output.rfind("Test cases:") :]
    assert " passed" in summary and "generated" in summary, output[-5000:]
    assert "failures" not in summary.splitlines()[-1], output[-20_000:]
