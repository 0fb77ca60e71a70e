"""Feedback: a caller says a hit or a fact was useful or wrong. A useful fact is reinforced (and confirmed if it was
disputed); a wrong one is disputed: kept in history and search, marked, and out of the profile until marked useful.
A round or an event keeps a net count that ranking reads only when ``feedback_weight`` is on (off by default).
Python, HTTP, MCP and CLI; an unknown id is refused and nothing changes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from graphrecall import Memory, NotFound, Settings
from graphrecall.cli import main
from graphrecall.config import RetrievalConfig
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.testing import serve_in_thread

SCOPE = ("acme", "dana")


def _open(root: Path, **retrieval: Any) -> Memory:
    settings = Settings(root=root, retrieval=RetrievalConfig(**retrieval))
    return Memory.open(root, embedder=HashingEmbedder(64), settings=settings)


@pytest.fixture
def m(tmp_path: Path) -> Iterator[Memory]:
    with _open(tmp_path / "s") as mem:
        yield mem


def test_useful_reinforces_a_fact_and_wrong_disputes_it_until_confirmed(m: Memory) -> None:
    tea = m.add_fact(SCOPE, "The user prefers green tea.", kind="preference").fact
    assert tea.reinforcement == 1
    useful = m.feedback(SCOPE, tea.id, useful=True)
    assert (useful.kind, useful.reinforcement, useful.disputed) == ("fact", 2, False)
    [stored] = m.facts(SCOPE)
    assert stored.reinforcement == 2 and stored.last_seen is not None and stored.last_seen >= tea.recorded_at  # type: ignore[operator]

    wrong = m.feedback(SCOPE, tea.id, useful=False, note="the user drinks coffee now")
    assert (wrong.disputed, wrong.reinforcement) == (True, 2)
    [disputed] = m.facts(SCOPE)  # still current, still in history, marked
    assert disputed.disputed_at is not None and disputed.dispute_note == "the user drinks coffee now"
    assert "green tea" not in m.profile(SCOPE).text  # not told to the assistant as true
    assert [h.id for h in m.search(SCOPE, "green tea", kinds=("fact",))] == [tea.id]

    confirmed = m.feedback(SCOPE, tea.id, useful=True)
    assert (confirmed.disputed, confirmed.reinforcement) == (False, 3)
    assert m.facts(SCOPE)[0].disputed_at is None and "green tea" in m.profile(SCOPE).text


def test_a_round_keeps_a_net_count(m: Memory) -> None:
    m.add_session(SCOPE, [{"role": "user", "content": "I walked the dog in the park."},
                          {"role": "assistant", "content": "Lovely."}], session_id="s1")  # fmt: skip
    [hit] = m.search(SCOPE, "dog park", 1)
    assert m.feedback(SCOPE, hit.id, useful=True).feedback == 1
    assert m.feedback(SCOPE, hit.id, useful=True).feedback == 2
    r = m.feedback(SCOPE, hit.id, useful=False)
    assert (r.kind, r.feedback) == ("round", 1)


def test_an_unknown_id_or_scope_is_refused_and_nothing_changes(m: Memory) -> None:
    fact = m.add_fact(SCOPE, "The user is left-handed.", kind="attribute").fact
    with pytest.raises(NotFound, match="no fact, round or event 'f_nothing'"):
        m.feedback(SCOPE, "f_nothing", useful=False)
    with pytest.raises(NotFound):
        m.feedback(("acme", "nobody"), fact.id, useful=False)  # another scope's id is not found either
    assert m.facts(SCOPE)[0].disputed_at is None


def test_ranking_moves_only_with_the_weight_on(tmp_path: Path) -> None:
    sessions = [
        {"session_id": f"s{i}", "date": f"2024-03-{i + 1:02d}",
         "messages": [{"role": "user", "content": f"My bike is a {colour} road bike."},
                      {"role": "assistant", "content": "Nice."}]}
        for i, colour in enumerate(["red", "blue", "green", "black"])
    ]  # fmt: skip
    for weight, moves in ((0.0, False), (2.0, True)):
        with _open(tmp_path / f"w{weight}", feedback_weight=weight) as mem:
            mem.add_sessions(SCOPE, sessions)
            before = [h.id for h in mem.search(SCOPE, "what is my bike like?", 4)]
            mem.feedback(SCOPE, before[-1], useful=True)
            mem.feedback(SCOPE, before[0], useful=False)
            after = [h.id for h in mem.search(SCOPE, "what is my bike like?", 4)]
            assert (after[0] == before[-1]) is moves and (after == before) is not moves


def test_http_mcp_and_cli(tmp_path: Path, capsys: Any) -> None:
    base = "/v1/scopes/acme/dana"
    with _open(tmp_path / "http") as mem:
        fact = mem.add_fact(SCOPE, "The user is vegan.", kind="preference").fact
        with (
            serve_in_thread(create_app(mem, auth=None, insecure_local=True)) as url,
            httpx.Client(base_url=url, timeout=60) as c,
        ):
            ok = c.post(
                f"{base}/feedback", json={"item_id": fact.id, "useful": False, "note": "not any more"}
            )
            missing = c.post(f"{base}/feedback", json={"item_id": "f_zzz", "useful": True})
            no_flag = c.post(f"{base}/feedback", json={"item_id": fact.id})
        assert ok.status_code == 200, ok.text
        assert ok.json() == {"id": fact.id, "kind": "fact", "useful": False, "reinforcement": 1, "disputed": True,
                             "feedback": None}  # fmt: skip
        assert missing.status_code == 404 and no_flag.status_code == 422
        assert no_flag.json()["error"]["field"] == "useful"

    async def mcp() -> tuple[Any, str]:
        with _open(tmp_path / "mcp") as mem:
            fid = mem.add_fact(SCOPE, "The user is vegan.", kind="preference").fact.id
            async with Client(create_mcp_server(mem)) as client:
                r = await client.call_tool(
                    "memory_feedback", {"item_id": fid, "useful": True, "org_id": "acme", "user_id": "dana"}
                )
                tools = {t.name: t for t in (await client.list_tools()).tools}
                return r.structured_content, tools["memory_feedback"].description or ""

    out, description = asyncio.run(mcp())
    assert out["reinforcement"] == 2 and "useful=false when the user corrects it" in description

    scope = [
        "--org",
        "acme",
        "--user",
        "dana",
        "--root",
        str(tmp_path / "cli"),
        "--embedder",
        "hashing",
        "--local",
    ]
    assert main(["add-fact", "The user is vegan.", *scope, "--kind", "preference", "--json"]) == 0
    fid = json.loads(capsys.readouterr().out)["fact"]["id"]
    assert main(["feedback", fid, "false", *scope, "--note", "eats fish"]) == 0
    assert "fact disputed" in capsys.readouterr().out
    assert main(["facts", *scope]) == 0
    assert "[disputed]" in capsys.readouterr().out
    assert main(["feedback", "f_zzz", "true", *scope]) != 0
    assert "f_zzz" in capsys.readouterr().err
