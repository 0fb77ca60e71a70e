"""The CLI through a running server (issue 29, item 7): while ``graphrecall serve`` holds a root, commands on that
root go to it over HTTP (found through ``<root>/.server.json``) and print what they would print in process; a server
configured by URL and key is used wherever the store is; an unreachable server or a refused key is one clear line.

Real ``graphrecall serve`` child processes on loopback with the hashing embedder; the CLI runs in this process
(``cli.main``), so its HTTP client is the real one.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrecall import cli
from graphrecall.remote import discovery
from graphrecall.server.auth import hash_key
from graphrecall.server.testing import ServerProcess, free_port

SECRET = "gr_cli-remote-test-0123456789abcdef"
SCOPE = ["--org", "acme", "--user", "ann"]
SESSIONS = [
    {
        "session_id": "s1",
        "date": "2024-05-01T10:00:00",
        "messages": [
            {"role": "user", "content": "I adopted a cat named Miso last week."},
            {"role": "assistant", "content": "Congratulations on Miso!"},
        ],
    }
]


class Cli:
    """``graphrecall ARGS --root ROOT`` in this process; returns (exit code, stdout, stderr)."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> None:
        self.root, self.capsys, self.extra = root, capsys, extra

    def __call__(self, *args: str | Path) -> tuple[int, str, str]:
        code = cli.main([*map(str, args), "--root", str(self.root), *self.extra])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str | Path) -> Any:
        code, out, err = self(*args, "--json")
        assert code == 0, err
        return json.loads(out)


def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"name": "ops", "sha256": hash_key(SECRET), "orgs": ["acme"]}]))
    return path


@pytest.fixture
def sessions_file(tmp_path: Path) -> Path:
    path = tmp_path / "two.json"
    path.write_text(json.dumps(SESSIONS))
    return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server with an API key file, holding tmp_path/store."""
    with ServerProcess(
        tmp_path / "store", cli=True, extra_args=["--keys", str(keys_file(tmp_path))]
    ) as server:
        yield server


def wait_for_file(root: Path) -> discovery.ServerFile:
    found = discovery.read(root)
    assert found is not None, "the server wrote no server file"
    return found


def test_commands_on_a_held_root_go_through_the_server_and_print_what_they_print_in_process(
    tmp_path: Path, served: ServerProcess, sessions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = served.root
    run = Cli(root, capsys)
    code, out, err = run("ingest", sessions_file, *SCOPE)
    assert code == 0, err
    assert "1 sessions, 2 messages added" in out
    remote = {
        "search": run.json("search", "cat", *SCOPE),
        "context": run.json("context", "what is my cat called?", *SCOPE),
        "sessions": run.json("sessions", *SCOPE),
        "session": run.json("session", "s1", *SCOPE),
        "stats": run.json("stats", *SCOPE),
        "profile": run.json("profile", *SCOPE),
    }
    code, search_text, _ = run("search", "cat", *SCOPE)
    assert code == 0 and "Miso" in search_text
    export = tmp_path / "export.json"
    assert run("export", *SCOPE, "-o", export)[0] == 0
    served.stop()
    assert discovery.read(root) is None  # removed on a clean stop
    run = Cli(root, capsys, "--embedder", "hashing")
    local = {
        "search": run.json("search", "cat", *SCOPE),
        "context": run.json("context", "what is my cat called?", *SCOPE),
        "sessions": run.json("sessions", *SCOPE),
        "session": run.json("session", "s1", *SCOPE),
        "stats": run.json("stats", *SCOPE),
        "profile": run.json("profile", *SCOPE),
    }
    for doc in (remote, local):  # the moments differ: "now" at each call
        doc["context"]["text"] = doc["context"]["text"].split("\n", 1)[1]
        doc["profile"].pop("as_of")
        doc["stats"].pop("disk_bytes")  # the server flushed its log on stop
    assert remote == local
    assert run("search", "cat", *SCOPE)[1] == search_text
    local_export = tmp_path / "local.json"
    assert run("export", *SCOPE, "-o", local_export)[0] == 0
    assert export.read_text() == local_export.read_text()


def test_the_server_file_is_private_and_its_key_opens_every_org_under_its_own_name(
    served: ServerProcess,
) -> None:
    import httpx

    found = wait_for_file(served.root)
    mode = stat.S_IMODE(os.stat(found.path).st_mode)
    assert mode == 0o600, oct(mode)
    assert found.pid == served.proc.pid if served.proc else False
    assert found.key is not None and found.key != SECRET and SECRET not in found.path.read_text()
    url = f"{found.url}/v1/scopes/other-org/bob/search"
    ok = httpx.get(url, params={"query": "x"}, headers={"Authorization": f"Bearer {found.key}"}, timeout=30)
    assert ok.status_code == 200  # every organisation: whoever reads the file can read the root anyway
    deadline = time.monotonic() + 10
    # The access log names the key of each request; its lines follow the responses.
    while "key=server-file" not in (log := served.log()):
        assert time.monotonic() < deadline, log[-2000:]
        time.sleep(0.05)
    assert "authentication: 1 API key(s)" in log  # what the operator configured


def test_not_found_and_routes_that_do_not_exist_say_so_through_the_server(
    served: ServerProcess, sessions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Cli(served.root, capsys)
    assert run("ingest", sessions_file, *SCOPE)[0] == 0
    code, out, err = run("search", "cat", "--org", "acme", "--user", "anne")
    assert code == 1 and out == ""
    assert "did you mean acme/ann" in err
    code, _, err = run("stats", "--org", "acme")
    assert code == 2 and "not served over HTTP" in err and "--local" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = run("erase", *SCOPE, "--session", "s1", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["sessions"] == ["s1"]
    forget = run.json("forget", *SCOPE, "--yes")
    assert forget == {"scope": "acme/ann", "erased": True, "sessions": 0, "messages": 0}


def test_a_configured_server_is_used_with_its_key_and_a_wrong_key_or_no_server_is_one_clear_line(
    tmp_path: Path,
    served: ServerProcess,
    sessions_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    elsewhere = Cli(tmp_path / "no-store-here", capsys)  # no server file there: the URL decides
    monkeypatch.setenv("GRAPHRECALL_URL", served.url)
    monkeypatch.setenv("GRAPHRECALL_API_KEY", SECRET)
    code, out, err = elsewhere("ingest", sessions_file, *SCOPE)
    assert code == 0, err
    assert elsewhere.json("search", "cat", *SCOPE)["hits"][0]["session_id"] == "s1"
    assert not (tmp_path / "no-store-here").exists()

    monkeypatch.setenv("GRAPHRECALL_API_KEY", "gr_wrong")
    code, out, err = elsewhere("search", "cat", *SCOPE)
    assert code == 2 and out == ""
    assert "refused" in err and "GRAPHRECALL_API_KEY" in err
    code, out, _ = elsewhere("search", "cat", *SCOPE, "--json")
    assert json.loads(out)["error"]["code"] == "invalid_config"

    key_file = tmp_path / "key"
    key_file.write_text(SECRET + "\n")
    code, out, err = elsewhere("search", "cat", "--org", "globex", "--user", "x", "--api-key-file", key_file)
    assert code == 2 and "refused the key" in err and "globex" in err  # the key may not access that org

    monkeypatch.delenv("GRAPHRECALL_API_KEY")
    code, _, err = elsewhere("search", "cat", *SCOPE)
    assert code == 2 and "needs an API key" in err

    nobody = f"http://127.0.0.1:{free_port()}"
    code, out, err = elsewhere("search", "cat", *SCOPE, "--url", nobody, "--json")
    assert code == 1
    error = json.loads(out)["error"]
    assert error["code"] == "unreachable" and nobody in error["message"] and "--url" in error["message"]


def test_a_server_file_left_by_a_killed_server_is_ignored(
    tmp_path: Path, sessions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    server = ServerProcess(root, cli=True, extra_args=["--insecure-local"]).start()
    wait_for_file(root)
    server.kill()
    assert discovery.read(root) is not None  # SIGKILL: no chance to remove it
    run = Cli(root, capsys, "--embedder", "hashing")
    code, _, err = run("ingest", sessions_file, *SCOPE)
    assert code == 0, err
    assert "ignored" not in err  # nothing went to a server
    assert run.json("stats", *SCOPE)["messages"] == 2


def test_local_opens_the_store_even_when_a_server_holds_it(
    served: ServerProcess, sessions_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Cli(served.root, capsys)
    assert run("ingest", sessions_file, *SCOPE)[0] == 0
    code, _, err = run("search", "cat", *SCOPE, "--local", "--embedder", "hashing")
    assert code == 3 and "store busy" in err


def test_a_second_server_on_a_served_root_stops_before_it_binds(served: ServerProcess) -> None:
    import subprocess
    import sys

    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "graphrecall", "serve", "--root", str(served.root), "--port", str(port),
         "--insecure-local", "--embedder", "hashing"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert served.proc is not None
    assert f"already serves {served.root}" in done.stderr and f"pid {served.proc.pid}" in done.stderr, (
        done.stderr
    )
    found = discovery.read(served.root)
    assert found is not None and found.pid == served.proc.pid  # the first server's file is untouched
