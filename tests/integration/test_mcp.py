"""The MCP server, driven through the official SDK client: in-process, over stdio, and over streamable HTTP.

Real Kuzu stores and the model-free ``HashingEmbedder(64)``; expected results come from the library itself
(``Memory.search``) or from what the test stored, never from constants the server could merely echo.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from graphrecall import Answer
from graphrecall.embed import HashingEmbedder
from graphrecall.memory import Memory, ScopeLike
from graphrecall.models import Fact, Scope
from graphrecall.server.auth import ServerConfigError, hash_key
from graphrecall.server.mcp import create_mcp_server, run_server
from graphrecall.server.testing import free_port

ACME_ALICE = {"org_id": "acme", "user_id": "alice"}
CAT_SESSION = [
    {"role": "user", "content": "We adopted a grey kitten last week and named her Miso."},
    {"role": "assistant", "content": "Miso is a lovely name for a kitten!"},
]
JOB_SESSION = [
    {"role": "user", "content": "I start my new job as a data engineer at Globex on Monday."},
    {"role": "assistant", "content": "Good luck with the new role at Globex."},
]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        yield m


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def add(
    client: Client, session_id: str, messages: list[dict[str, str]], **scope: str
) -> CallToolResult:
    return await client.call_tool(
        "memory_add", {"messages": messages, "session_id": session_id, "date": "2024-05-01T10:00:00", **scope}
    )


# -- tools, in process -----------------------------------------------------------------------------------------
async def test_lists_the_memory_tools_with_validated_argument_schemas(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        "memory_add", "memory_search", "memory_context", "memory_answer", "memory_facts", "memory_profile",
        "memory_add_fact", "memory_erase", "memory_consolidate", "memory_maintain", "memory_report", "memory_dataset",
        "memory_graph", "memory_feedback", "memory_learn",
    }  # fmt: skip
    assert set(tools["memory_add"].input_schema["required"]) == {"messages", "session_id"}
    k = tools["memory_search"].input_schema["properties"]["k"]
    assert (k["minimum"], k["maximum"]) == (1, 100)
    assert tools["memory_search"].output_schema is not None
    assert (
        tools["memory_search"].annotations is not None and tools["memory_search"].annotations.read_only_hint
    )


async def test_added_sessions_are_recalled_by_search_and_context(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        added = await add(client, "cat", CAT_SESSION, **ACME_ALICE)
        await add(client, "job", JOB_SESSION, **ACME_ALICE)
        again = await add(client, "cat", CAT_SESSION, **ACME_ALICE)
        search = await client.call_tool(
            "memory_search", {"query": "what is my kitten called?", "k": 2, **ACME_ALICE}
        )
        context = await client.call_tool(
            "memory_context", {"query": "what is my kitten called?", "token_budget": 200, **ACME_ALICE}
        )

    assert not added.is_error and added.structured_content is not None
    assert added.structured_content["sessions_added"] == 1
    assert added.structured_content["messages_added"] == len(CAT_SESSION)
    assert again.structured_content is not None and again.structured_content["messages_skipped"] == len(
        CAT_SESSION
    )

    assert not search.is_error and search.structured_content is not None
    direct = memory.search(Scope(org_id="acme", user_id="alice"), "what is my kitten called?", 2)
    assert [h["id"] for h in search.structured_content["hits"]] == [h.id for h in direct]
    assert search.structured_content["hits"][0]["session_id"] == "cat"
    assert (
        search.structured_content["hits"][0]["date"] == "2024-05-01T10:00:00Z"
    )  # sent without an offset: read as UTC, sent back with it

    assert not context.is_error and context.structured_content is not None
    assert "Miso" in context.structured_content["text"]
    assert context.structured_content["token_count"] <= 200
    assert json.loads(text_of(context))["text"] == context.structured_content["text"]


async def test_bad_messages_are_rejected_naming_the_field_and_nothing_is_stored(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        blank = await add(client, "s1", [{"role": "user", "content": "   "}], **ACME_ALICE)
        bad_role = await add(client, "s1", [{"role": "narrator", "content": "hi"}], **ACME_ALICE)
        bad_session = await add(client, "a/b", CAT_SESSION, **ACME_ALICE)
    assert blank.is_error and "messages[0].content" in text_of(blank)
    assert bad_role.is_error and "role" in text_of(bad_role)
    assert bad_session.is_error and "session_id" in text_of(bad_session)
    assert memory.stats(Scope(org_id="acme", user_id="alice")).messages == 0


async def test_answer_without_an_llm_says_not_available_instead_of_inventing_a_result(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    async with Client(create_mcp_server(memory)) as client:
        added = await add(client, "cat", CAT_SESSION, **ACME_ALICE)
        answer = await client.call_tool(
            "memory_answer", {"question": "What is my kitten called?", **ACME_ALICE}
        )
        facts = await client.call_tool("memory_facts", ACME_ALICE)
    assert not added.is_error
    assert answer.is_error and answer.structured_content is None
    assert "not_available" in text_of(answer) and "GRAPHRECALL_LLM" in text_of(answer)
    assert "Memory(" not in text_of(answer) and "llm=" not in text_of(answer)  # what an MCP user cannot do
    assert not facts.is_error and facts.structured_content == {"facts": []}  # nothing extracted yet


async def test_facts_come_from_memory_and_a_bad_as_of_is_named(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        await add(client, "cat", CAT_SESSION, **ACME_ALICE)
        listed = await client.call_tool("memory_facts", ACME_ALICE)
        bad = await client.call_tool("memory_facts", {"as_of": "next tuesday-ish", **ACME_ALICE})
    direct = memory.facts(Scope(org_id="acme", user_id="alice"))
    assert listed.structured_content == {"facts": [f.model_dump(mode="json") for f in direct]}
    assert bad.is_error and "as_of" in text_of(bad)


class MemoryWithReader(Memory):
    """Stands in for the reader (which needs an LLM) and for facts after extraction: results computed from
    stored data, and a record of what the tools passed."""

    calls: list[dict[str, Any]]

    def answer(  # type: ignore[override]
        self,
        scope: ScopeLike,
        question: str,
        question_date: Any = None,
        mode: Any = "auto",
        llm: Any = None,
        *,
        max_tool_steps: int = 4,
        tools: Any = "auto",
        token_budget: int | None = None,
        also: Any = (),
    ) -> Answer:
        assert list(also) == [], also  # shared scopes: tests/integration/test_shared_scopes.py
        self.calls.append(
            {"mode": mode, "tools": tools, "token_budget": token_budget, "steps": max_tool_steps}
        )
        best = self.search(scope, question, 1)
        return Answer(question=question, text=best[0].text, mode="recall", question_date=question_date)

    def facts(
        self,
        scope: ScopeLike,
        *,
        as_of: datetime | str | None = None,
        include_superseded: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Fact]:
        seen = datetime.fromisoformat(as_of) if isinstance(as_of, str) else as_of
        sessions = self.sessions(scope)[offset : offset + limit]
        return [Fact(id=s.id, text=f"talked in {s.id}", last_seen=seen, confidence=0.5) for s in sessions]


async def test_answer_and_facts_pass_memory_results_through(tmp_path: Path) -> None:
    with MemoryWithReader(tmp_path, embedder=HashingEmbedder(64)) as memory:
        memory.calls = []
        async with Client(create_mcp_server(memory)) as client:
            await add(client, "cat", CAT_SESSION, **ACME_ALICE)
            await add(client, "job", JOB_SESSION, **ACME_ALICE)
            answer = await client.call_tool(
                "memory_answer",
                {
                    "question": "kitten name?",
                    "question_date": "2024-06-01T00:00:00",
                    "mode": "synthesis",
                    "tools": "none",
                    "token_budget": 800,
                    **ACME_ALICE,
                },
            )
            bad_mode = await client.call_tool(
                "memory_answer", {"question": "q?", "mode": "cot", **ACME_ALICE}
            )
            facts = await client.call_tool(
                "memory_facts", {"as_of": "2024-05-02", "limit": 1, "offset": 1, **ACME_ALICE}
            )
    assert not answer.is_error and answer.structured_content is not None
    assert answer.structured_content["question_date"] == "2024-06-01T00:00:00Z"
    assert "Miso" in answer.structured_content["text"]
    assert memory.calls == [{"mode": "synthesis", "tools": "none", "token_budget": 800, "steps": 4}]
    assert bad_mode.is_error and "mode" in text_of(bad_mode)
    assert not facts.is_error and facts.structured_content is not None
    [fact] = facts.structured_content["facts"]
    second = memory.sessions(Scope(org_id="acme", user_id="alice"))[1].id
    assert (fact["id"], fact["last_seen"], fact["confidence"]) == (second, "2024-05-02T00:00:00Z", 0.5)


# -- scope enforcement -----------------------------------------------------------------------------------------
async def test_without_a_configured_scope_each_call_must_name_a_valid_one(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        missing = await client.call_tool("memory_search", {"query": "kitten", "user_id": "alice"})
        bad_user = await client.call_tool(
            "memory_search", {"query": "kitten", "org_id": "acme", "user_id": "a/b"}
        )
        bad_org = await add(client, "cat", CAT_SESSION, org_id="..", user_id="alice")
    assert missing.is_error and "org_id" in text_of(missing)
    assert bad_user.is_error and "user_id" in text_of(bad_user)
    assert bad_org.is_error and "org_id" in text_of(bad_org)
    assert memory.scopes() == []


async def test_orgs_outside_allowed_orgs_are_refused_and_untouched(memory: Memory) -> None:
    async with Client(create_mcp_server(memory, allowed_orgs={"acme"})) as client:
        ok = await add(client, "cat", CAT_SESSION, **ACME_ALICE)
        other = await add(client, "cat", CAT_SESSION, org_id="globex", user_id="alice")
        peek = await client.call_tool(
            "memory_search", {"query": "kitten", "org_id": "globex", "user_id": "alice"}
        )
    assert not ok.is_error
    assert other.is_error and "globex" in text_of(other) and "org_id" in text_of(other)
    assert peek.is_error
    assert memory.scopes() == [Scope(org_id="acme", user_id="alice")]


async def test_a_bound_server_uses_its_scope_and_refuses_any_other(memory: Memory) -> None:
    bound = Scope(org_id="acme", user_id="alice")
    async with Client(create_mcp_server(memory, default_scope=bound)) as client:
        implicit = await add(client, "cat", CAT_SESSION)
        explicit_same = await client.call_tool("memory_search", {"query": "kitten", **ACME_ALICE})
        other_user = await client.call_tool(
            "memory_search", {"query": "kitten", "org_id": "acme", "user_id": "bob"}
        )
        other_org = await add(client, "job", JOB_SESSION, org_id="globex")
    assert not implicit.is_error and memory.stats(bound).sessions == 1
    assert explicit_same.structured_content is not None and explicit_same.structured_content["hits"]
    assert other_user.is_error and "user_id" in text_of(other_user)
    assert other_org.is_error and "org_id" in text_of(other_org)
    assert memory.scopes() == [bound]


async def test_users_do_not_see_each_others_memory(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        await add(client, "cat", CAT_SESSION, **ACME_ALICE)
        bob = await client.call_tool(
            "memory_search", {"query": "kitten Miso", "org_id": "acme", "user_id": "bob"}
        )
    assert bob.structured_content == {"query": "kitten Miso", "hits": []}


# -- run_server: configuration, stdio, streamable HTTP ---------------------------------------------------------
def server_args(root: Path, **overrides: Any) -> argparse.Namespace:
    base: dict[str, Any] = {
        "root": str(root),
        "transport": "http",
        "host": "127.0.0.1",
        "port": 0,
        "org": None,
        "user": None,
        "keys": None,
        "insecure_local": False,
        "embedder": "hashing",
    }
    return argparse.Namespace(**{**base, **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({}, "no API keys"),
        ({"host": "0.0.0.0", "insecure_local": True}, "loopback"),
        ({"user": "alice"}, "--org"),
        ({"org": "a/b"}, "--org"),
    ],
)
def test_run_server_refuses_unsafe_or_invalid_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any], message: str
) -> None:
    monkeypatch.delenv("GRAPHRECALL_API_KEYS_FILE", raising=False)
    with pytest.raises(ServerConfigError, match=message):
        run_server(server_args(tmp_path / "store", **overrides))
    assert not (tmp_path / "store").exists()


def test_http_with_keys_and_insecure_local_is_refused(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"name": "k", "sha256": hash_key("gr_secret-0123456789"), "orgs": ["*"]}]))
    with pytest.raises(ServerConfigError, match="API keys are configured"):
        run_server(server_args(tmp_path / "store", keys=str(keys), insecure_local=True))
    assert not (tmp_path / "store").exists()


def module_command(root: Path, *extra: str) -> list[str]:
    return ["-m", "graphrecall.server.mcp", "--root", str(root), "--embedder", "hashing", *extra]


async def test_stdio_transport_serves_a_bound_scope(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=module_command(tmp_path / "store", "--org", "acme", "--user", "alice")
    )
    async with Client(params) as client:
        assert len((await client.list_tools()).tools) == 15  # every memory_* tool, bound to one scope
        await add(client, "cat", CAT_SESSION)
        search = await client.call_tool("memory_search", {"query": "kitten", "k": 1})
    assert search.structured_content is not None
    assert [h["session_id"] for h in search.structured_content["hits"]] == ["cat"]


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A subprocess serving streamable HTTP with one key limited to org acme: yields (url, secret)."""
    secret = "gr_test_secret_for_mcp"
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps([{"name": "acme-client", "sha256": hash_key(secret), "orgs": ["acme"]}]))
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    command = module_command(
        tmp_path / "store", "--transport", "http", "--port", str(port), "--keys", str(keys)
    )
    proc = subprocess.Popen(
        [sys.executable, *command],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "server.log").read_text()) from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", secret
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


async def test_streamable_http_requires_a_bearer_key_and_limits_it_to_its_orgs(
    http_server: tuple[str, str],
) -> None:
    url, secret = http_server
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    anonymous = httpx.post(url, json=init, headers=accept, timeout=5)
    wrong = httpx.post(url, json=init, headers={**accept, "Authorization": "Bearer not-the-key"}, timeout=5)
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        added = await add(client, "cat", CAT_SESSION, **ACME_ALICE)
        search = await client.call_tool("memory_search", {"query": "kitten", "k": 1, **ACME_ALICE})
        foreign = await client.call_tool(
            "memory_search", {"query": "kitten", "org_id": "globex", "user_id": "x"}
        )
    assert not added.is_error
    assert search.structured_content is not None
    assert [h["session_id"] for h in search.structured_content["hits"]] == ["cat"]
    assert foreign.is_error and "acme-client" in text_of(foreign) and "globex" in text_of(foreign)
