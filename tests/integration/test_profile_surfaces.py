"""The profile over HTTP, MCP and the CLI: each surface returns what ``Memory.profile`` returns, and context's
``include_profile`` reaches the library from each. Facts come from a real (scripted) extraction into real Kuzu."""

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
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.server import create_app
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.testing import serve_in_thread

SCOPE = ("acme", "alice")
ACME_ALICE = {"org_id": "acme", "user_id": "alice"}
BASE = "/v1/scopes/acme/alice"
AS_OF = "2024-05-02T00:00:00"


def extracted_store(root: Path) -> None:
    """Two facts of different kinds and an event, extracted (scripted) from one session on 2024-05-01."""
    llm = ScriptedLLM(ordered=False)
    llm.add("Session id: s1\n", {
        "facts": [{"text": "The user lives in Lisbon.", "kind": "attribute", "message_ids": ["m1"]},
                  {"text": "The user loves sardines.", "kind": "preference", "message_ids": ["m1"]}],
        "events": [{"subject": "user", "verb": "move", "object": "Lisbon", "text": "The user moved to Lisbon.",
                    "time_start": "2024-04-20", "message_ids": ["m1"]}],
    })  # fmt: skip
    llm.add("New facts, each followed", {"decisions": []})
    cfg = ExtractionConfig(background=False)
    with Memory.open(root, embedder=HashingEmbedder(64), llm=llm, extraction=cfg) as m:
        r = m.add_session(SCOPE, [{"role": "user", "content": "I moved to Lisbon; sardines!"}], session_id="s1",
                          date="2024-05-01T09:00:00", extract=True)  # fmt: skip
        assert r.extraction is not None and r.extraction.facts_added == 2


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    extracted_store(tmp_path / "store")
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        yield m


def test_http_profile_is_the_library_profile(memory: Memory) -> None:
    direct = memory.profile(SCOPE, AS_OF)
    assert "The user lives in Lisbon." in direct.text and "moved to Lisbon" in direct.text
    with (
        serve_in_thread(create_app(memory, auth=None, insecure_local=True)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        got = c.get(f"{BASE}/profile", params={"as_of": AS_OF})
        small = c.get(f"{BASE}/profile", params={"as_of": AS_OF, "token_budget": 30})
        bad = c.get(f"{BASE}/profile", params={"token_budget": 0})
        ctx = c.get(f"{BASE}/context", params={"query": "sardines", "question_date": AS_OF,
                                              "include_profile": "true"})  # fmt: skip
    assert got.status_code == 200 and got.json() == direct.model_dump(mode="json")
    assert small.json()["token_count"] <= 30 and small.json()["truncated"]
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "token_budget"
    assert (
        ctx.status_code == 200
        and ctx.json()["profile"]["text"]
        and ctx.json()["text"].startswith("About the user")
    )


async def test_mcp_profile_is_the_library_profile(memory: Memory) -> None:
    direct = memory.profile(SCOPE, AS_OF, 200)
    async with Client(create_mcp_server(memory)) as client:
        got = await client.call_tool("memory_profile", {"as_of": AS_OF, "token_budget": 200, **ACME_ALICE})
        ctx = await client.call_tool(
            "memory_context",
            {"query": "sardines", "question_date": AS_OF, "include_profile": True, **ACME_ALICE},
        )
    assert not got.is_error and got.structured_content == direct.model_dump(mode="json")
    assert ctx.structured_content is not None and ctx.structured_content["profile"]["text"] == direct.text


def test_cli_profile_prints_the_text_or_the_json(tmp_path: Path, capsys: Any) -> None:
    root = tmp_path / "store"
    extracted_store(root)
    scope = ["--org", "acme", "--user", "alice", "--root", str(root), "--embedder", "hashing"]
    assert main(["profile", *scope, "--as-of", AS_OF]) == 0
    text = capsys.readouterr().out
    assert text.startswith("About the user (as of 2024-05-02") and "- The user loves sardines." in text
    assert main(["profile", *scope, "--as-of", AS_OF, "--budget", "25", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["token_count"] <= 25 and doc["token_budget"] == 25
    assert main(["context", "sardines", *scope, "--question-date", AS_OF, "--include-profile"]) == 0
    assert capsys.readouterr().out.startswith("About the user")
    assert main(["profile", *scope, "--budget", "0"]) == 2
    assert "--token-budget" in capsys.readouterr().err
