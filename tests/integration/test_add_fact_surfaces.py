"""add_fact over HTTP (POST .../facts), MCP (memory_add_fact) and the CLI (add-fact): each stores through
``Memory.add_fact``, reports its versioning decision, and rejects bad input naming the field."""

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


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        yield m


def test_http_adds_a_fact_and_reports_the_decision(memory: Memory) -> None:
    fact = {"text": "The user is allergic to peanuts.", "kind": "attribute", "entities": ["peanuts"]}
    with (
        serve_in_thread(create_app(memory, auth=None, insecure_local=True)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        first = c.post(f"{BASE}/facts", json={**fact, "valid_from": "2020-01-01T00:00:00Z"})
        again = c.post(f"{BASE}/facts", json=fact)
        bad_kind = c.post(f"{BASE}/facts", json={"text": "x", "kind": "mood"})
        extra = c.post(f"{BASE}/facts", json={"text": "x", "confidence": 0.5})
        empty = c.post(f"{BASE}/facts", json={"text": ""})
        listed = c.get(f"{BASE}/facts")
        profile = c.get(f"{BASE}/profile")
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["decision"], body["decided_by"]) == ("NEW", "rule")
    assert body["fact"]["valid_from"] == "2020-01-01T00:00:00Z" and body["fact"]["session_id"] == "app"
    assert again.json()["decision"] == "DUPLICATE" and again.json()["fact"]["id"] == body["fact"]["id"]
    for bad, field in ((bad_kind, "kind"), (extra, "confidence"), (empty, "text")):
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, bad.text
    assert [f["id"] for f in listed.json()["facts"]] == [body["fact"]["id"]]
    assert "- The user is allergic to peanuts." in profile.json()["text"]
    assert [e.name for e in memory.entities(SCOPE)] == ["peanuts"]


async def test_mcp_adds_a_fact_that_facts_and_profile_then_show(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        added = await client.call_tool(
            "memory_add_fact", {"text": "The user prefers tea.", "kind": "preference", **ACME_ALICE}
        )
        facts = await client.call_tool("memory_facts", ACME_ALICE)
        bad = await client.call_tool("memory_add_fact", {"text": "x", "kind": "mood", **ACME_ALICE})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert not added.is_error and added.structured_content is not None
    assert added.structured_content["decision"] == "NEW"
    assert facts.structured_content == {"facts": [added.structured_content["fact"]]}
    assert bad.is_error
    hints = tools["memory_add_fact"].annotations
    assert hints is not None and hints.read_only_hint is False and hints.destructive_hint is False
    assert "Preferences:\n- The user prefers tea." in memory.profile(SCOPE).text


def test_cli_add_fact_then_profile(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)  # the rule decides: no model is contacted
    scope = ["--org", "acme", "--user", "alice", "--root", str(tmp_path / "store"), "--embedder", "hashing"]
    assert main(["add-fact", "Ana is the user's sister.", *scope, "--kind", "relationship", "--entity", "Ana",
                 "--source", "crm", "--json"]) == 0  # fmt: skip
    added = json.loads(capsys.readouterr().out)
    assert (added["decision"], added["fact"]["session_id"]) == ("NEW", "crm")
    assert (
        main(["add-fact", "Ana is the user's sister", *scope, "--kind", "relationship", "--entity", "Ana"])
        == 0
    )
    out, err = capsys.readouterr()
    assert added["fact"]["id"] in out and "DUPLICATE by rule" in err
    assert main(["profile", *scope]) == 0
    assert "Relationships:\n- Ana is the user's sister. [crm, " in capsys.readouterr().out
    assert main(["add-fact", "x", *scope, "--kind", "mood"]) == 2
    assert "--kind" in capsys.readouterr().err
