"""consolidate over HTTP (POST .../consolidate), MCP (memory_consolidate), the CLI (consolidate) and AsyncMemory:
a dry run plans, a real run merges, a second run changes nothing; summaries without an LLM are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from graphrecall import AsyncMemory, Memory
from graphrecall.cli import main
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.testing import serve_in_thread

SCOPE = ("acme", "alice")
ACME_ALICE = {"org_id": "acme", "user_id": "alice"}
BASE = "/v1/scopes/acme/alice"


def _fill(m: Memory) -> tuple[str, str]:
    """The same fact twice: add_fact keeps both (their entity sets differ), consolidation merges them."""
    kept = m.add_fact(SCOPE, "The user lives in Berlin.", kind="attribute", entities=["Berlin"]).fact
    dup = m.add_fact(
        SCOPE, "The user lives in Berlin.", kind="attribute", entities=["Berlin", "Germany"]
    ).fact
    return kept.id, dup.id


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        yield m


def test_http_dry_run_then_consolidate(memory: Memory) -> None:
    kept, dup = _fill(memory)
    with (
        serve_in_thread(create_app(memory, auth=None, insecure_local=True)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        dry = c.post(f"{BASE}/consolidate", json={"dry_run": True})
        before = c.get(f"{BASE}/facts").json()
        done = c.post(f"{BASE}/consolidate", json={})
        again = c.post(f"{BASE}/consolidate", json={})
        summaries = c.post(f"{BASE}/consolidate", json={"summaries": True})
        extra = c.post(f"{BASE}/consolidate", json={"dryrun": True})
    assert dry.status_code == 200 and dry.json()["dry_run"] is True
    assert [(x["kept_id"], x["superseded"]) for x in dry.json()["merges"]] == [(kept, [dup])]
    assert len(before["facts"]) == 2  # the dry run wrote nothing
    assert done.json()["merges"] == dry.json()["merges"] and done.json()["llm_calls"] == 0
    assert again.json()["merges"] == [] and again.json()["event_links"] == []
    assert summaries.status_code == 409 and "summaries need an LLM" in summaries.text
    assert extra.status_code == 422 and extra.json()["error"]["field"] == "dryrun"
    assert [f.id for f in memory.facts(SCOPE)] == [kept]


async def test_mcp_consolidate(memory: Memory) -> None:
    kept, dup = _fill(memory)
    async with Client(create_mcp_server(memory)) as client:
        dry = await client.call_tool("memory_consolidate", {"dry_run": True, **ACME_ALICE})
        done = await client.call_tool("memory_consolidate", {**ACME_ALICE})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert dry.structured_content is not None and dry.structured_content["dry_run"] is True
    assert done.structured_content is not None and done.structured_content["merges"][0]["superseded"] == [dup]
    hints = tools["memory_consolidate"].annotations
    assert hints is not None and hints.destructive_hint is False and hints.idempotent_hint is True
    assert [f.id for f in memory.facts(SCOPE)] == [kept]


async def test_async_memory_consolidate(memory: Memory) -> None:
    _, dup = _fill(memory)
    am = AsyncMemory(memory)
    r = await am.consolidate(SCOPE, dry_run=True)
    assert r.dry_run and r.merges[0].superseded == [dup]
    assert len(memory.facts(SCOPE)) == 2


def test_cli_consolidate(tmp_path: Path, capsys: Any) -> None:
    root = tmp_path / "store"
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        kept, dup = _fill(m)
    scope = ["--org", "acme", "--user", "alice", "--root", str(root), "--embedder", "hashing"]
    assert main(["consolidate", *scope, "--dry-run"]) == 0
    out = capsys.readouterr()
    assert f"would merge {dup} into {kept} (rule): The user lives in Berlin." in out.out
    assert "planned, nothing written" in out.err
    assert main(["consolidate", *scope, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["dry_run"] is False and r["merges"][0]["kept_id"] == kept
    assert main(["consolidate", *scope]) == 0
    assert "0 merges, 0 event links, 0 summaries" in capsys.readouterr().err
    assert main(["facts", *scope, "--json"]) == 0
    assert [f["id"] for f in json.loads(capsys.readouterr().out)["facts"]] == [kept]
