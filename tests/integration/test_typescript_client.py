"""The TypeScript client (clients/typescript) against a live server on loopback, and its generated code current.

The client's own test (clients/typescript/test/live.test.ts, run by ``npm test``: compile with tsc, then node's test
runner) stores a session, searches and finds it, reads its date back with the offset, and gets a wrong key and a
bad parameter as typed ``GraphRecallError``s. The generated code is committed (readable and reviewable where the
API changes) and must be what the pinned generator makes of docs/openapi.json now.

Needs node and the client's dependencies (``npm ci`` in clients/typescript; scripts/setup.sh --dev runs it):
skipped, saying which, when either is missing.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphrecall import Memory
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.testing import serve_in_thread

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
SECRET = "gr_typescript-client-secret"

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None,
                       reason="node/npm (Node.js 20.19+) not on PATH: the TypeScript client cannot be run here"),
    pytest.mark.skipif(not (CLIENT / "node_modules" / ".bin" / "tsc").exists(),
                       reason="clients/typescript has no node_modules: run `npm ci` there (scripts/setup.sh --dev)"),
]  # fmt: skip


@pytest.fixture
def url(mem: Memory) -> Iterator[str]:
    auth = ApiKeyAuth([ApiKey("ts-client", hash_key(SECRET), frozenset({"acme"}))])
    with serve_in_thread(create_app(mem, auth=auth)) as u:
        yield u


def test_the_typescript_client_drives_a_live_server(url: str, mem: Memory) -> None:
    env = {**os.environ, "GRAPHRECALL_URL": url, "GRAPHRECALL_KEY": SECRET, "GRAPHRECALL_ORG": "acme"}
    run = subprocess.run(["npm", "test"], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert "# pass 3" in run.stdout and "# fail 0" in run.stdout, run.stdout[-4000:]
    stored = mem.get_session(("acme", "ts-client"), "move-1")  # what the client sent arrived as sent
    assert stored.messages[0].content.startswith("We're moving to Zürich")
    assert stored.started_at.isoformat() == "2024-03-02T17:30:00"  # +01:00 in, naive UTC stored


def test_the_committed_generated_code_is_current(tmp_path: Path) -> None:
    copy = tmp_path / "typescript"
    shutil.copytree(
        CLIENT, copy, ignore=shutil.ignore_patterns("node_modules", "dist", "generated"), symlinks=True
    )
    (copy / "node_modules").symlink_to(CLIENT / "node_modules")
    (tmp_path / "docs").mkdir()  # the config reads ../../docs/openapi.json
    shutil.copy(CLIENT.parents[1] / "docs" / "openapi.json", tmp_path / "docs" / "openapi.json")
    nested = tmp_path / "clients"
    nested.mkdir()
    copy.rename(nested / "typescript")
    made = subprocess.run(["npm", "run", "generate"], cwd=nested / "typescript", capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    fresh, committed = nested / "typescript" / "src" / "generated", CLIENT / "src" / "generated"
    stale = _differences(filecmp.dircmp(committed, fresh))
    assert not stale, f"regenerate: (cd clients/typescript && npm run generate); differs: {stale}"


def _differences(cmp: filecmp.dircmp[str]) -> list[str]:
    out = [*cmp.left_only, *cmp.right_only, *cmp.diff_files, *cmp.funny_files]
    for sub in cmp.subdirs.values():
        out += _differences(sub)
    return out
