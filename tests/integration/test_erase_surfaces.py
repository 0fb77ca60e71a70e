"""erase over HTTP (POST .../erase), MCP (memory_erase) and the CLI (erase): a dry run lists, a real run deletes,
bad input is refused naming the field, and the CLI asks for --yes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from graphrecall import Memory
from graphrecall.cli import main
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.testing import serve_in_thread

SCOPE = ("acme", "alice")
ACME_ALICE = {"org_id": "acme", "user_id": "alice"}
BASE = "/v1/scopes/acme/alice"


def _fill(m: Memory) -> None:
    m.add_session(
        SCOPE, [{"role": "user", "content": "My locker code is 4711."}], session_id="s1", date="2024-01-01"
    )
    m.add_session(
        SCOPE, [{"role": "user", "content": "I like green tea."}], session_id="s2", date="2024-03-01"
    )


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        _fill(m)
        yield m


def test_http_dry_run_then_erase(memory: Memory) -> None:
    with (
        serve_in_thread(create_app(memory, auth=None, insecure_local=True)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        dry = c.post(f"{BASE}/erase", json={"matching": "locker code", "dry_run": True})
        kept = c.get(f"{BASE}/sessions")
        done = c.post(f"{BASE}/erase", json={"matching": "locker code"})
        after = c.get(f"{BASE}/search", params={"query": "locker code 4711"})
        unknown = c.post(f"{BASE}/erase", json={"session_ids": ["nope"]})
        extra = c.post(f"{BASE}/erase", json={"sessions": ["s2"]})
        nothing = c.post(f"{BASE}/erase", json={})
    assert dry.status_code == 200 and dry.json()["sessions"] == ["s1"] and dry.json()["dry_run"] is True
    assert [s["id"] for s in kept.json()["sessions"]] == ["s1", "s2"]
    assert done.json()["sessions"] == ["s1"] and done.json()["dry_run"] is False
    assert all("4711" not in h["text"] for h in after.json()["hits"])
    assert unknown.status_code == 404 and "nope" in unknown.text
    assert extra.status_code == 422 and extra.json()["error"]["field"] == "sessions"
    assert nothing.status_code == 422 and "say what to erase" in nothing.text
    assert [s.id for s in memory.sessions(SCOPE)] == ["s2"]


async def test_mcp_erase_is_marked_destructive(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        dry = await client.call_tool(
            "memory_erase", {"before": "2024-02-01T00:00:00Z", "dry_run": True, **ACME_ALICE}
        )
        done = await client.call_tool("memory_erase", {"before": "2024-02-01T00:00:00Z", **ACME_ALICE})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert dry.structured_content is not None and dry.structured_content["sessions"] == ["s1"]
    assert done.structured_content is not None and done.structured_content["dry_run"] is False
    hints = tools["memory_erase"].annotations
    assert hints is not None and hints.destructive_hint is True
    assert [s.id for s in memory.sessions(SCOPE)] == ["s2"]


def test_cli_erase_needs_yes_unless_dry_run(tmp_path: Path, capsys: Any) -> None:
    root = tmp_path / "store"
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        _fill(m)
    scope = ["--org", "acme", "--user", "alice", "--root", str(root), "--embedder", "hashing"]
    assert main(["erase", *scope, "--session", "s2"]) == 2
    assert "--yes" in capsys.readouterr().err
    assert main(["erase", *scope, "--dry-run"]) == 2
    assert "--session-ids, --fact-ids, --before or --matching" in capsys.readouterr().err  # flags, not fields
    assert main(["erase", *scope, "--session", "s2", "--dry-run"]) == 0
    assert "would erase from acme/alice: 1 sessions" in capsys.readouterr().out
    assert main(["erase", *scope, "--session", "s2", "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions"] == ["s2"]
    assert main(["sessions", *scope, "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["sessions"]] == ["s1"]
