"""Shared memory: a user's memory read together with its organisation's shared scopes (user ids starting with
'_'), in Python, over HTTP with the key rules, and through MCP's policy; erasing a user never touches them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from graphrecall import Memory, Scope
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import InvalidInput
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.mcp import ScopePolicy
from graphrecall.server.testing import serve_in_thread

ANN = Scope(org_id="acme", user_id="ann")
TEAM = Scope(org_id="acme", user_id="_team")
OTHER = Scope(org_id="globex", user_id="_team")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(256)) as mem:
        mem.add_session(ANN, [{"role": "user", "content": "My laptop is a ThinkPad and I deploy on Fridays."}],
                        session_id="s1", date="2024-05-01")  # fmt: skip
        mem.add_session(TEAM, [{"role": "user", "content": "Team rule: never deploy on Fridays; deploy windows "
                                "are Tuesday mornings."}], session_id="s1", date="2024-04-01")  # fmt: skip
        mem.add_session(OTHER, [{"role": "user", "content": "Globex deploys on Fridays."}], session_id="g1")
        yield mem


def test_search_with_also_fuses_both_scopes_and_says_where_each_hit_came_from(memory: Memory) -> None:
    own = memory.search(ANN, "when do we deploy", k=5)
    assert {h.scope for h in own} == {ANN}
    both = memory.search(ANN, "when do we deploy", k=5, also=["_team"])
    assert {h.scope for h in both} == {ANN, TEAM}
    assert [h.rank for h in both] == list(range(1, len(both) + 1))
    assert [h.score for h in both] == sorted((h.score for h in both), reverse=True)
    assert (
        memory.search(ANN, "when do we deploy", also=[TEAM]) == both
    )  # a Scope works as well as its user id
    assert all("Globex" not in h.text for h in both)


def test_context_heads_a_shared_session_with_its_scope(memory: Memory) -> None:
    ctx = memory.context(ANN, "when do we deploy", also=["_team"])
    assert "Session _team/s1" in ctx.text and "Session s1" in ctx.text  # the same session id, kept apart


def test_profile_with_also_marks_the_shared_facts(memory: Memory) -> None:
    memory.add_fact(ANN, "The user uses a ThinkPad.", kind="attribute")
    memory.add_fact(TEAM, "Deployments happen on Tuesday mornings.", kind="other")
    profile = memory.profile(ANN, also=["_team"])
    items = [i for s in profile.sections for i in s.items]
    assert {(i.text, i.scope) for i in items} == {
        ("The user uses a ThinkPad.", None),
        ("Deployments happen on Tuesday mornings.", TEAM),
    }
    assert [i.text for s in memory.profile(ANN).sections for i in s.items] == ["The user uses a ThinkPad."]


def test_the_readers_view_finds_a_shared_round_by_id(memory: Memory) -> None:
    view = memory.recall(ANN, also=["_team"])
    team_hit = next(
        h for h in memory.search(ANN, "deploy windows Tuesday", also=["_team"]) if h.scope == TEAM
    )
    [found] = view.rounds([team_hit.id])
    assert "Tuesday" in found.text


@pytest.mark.parametrize(
    ("also", "says"),
    [
        (["bob"], "not a shared scope"),
        (["globex/_team"], "forbidden character '/'"),
        ([OTHER], "another organisation"),
        ([f"_s{i}" for i in range(9)], "at most 8"),
    ],
)
def test_also_is_refused_naming_what_is_wrong(memory: Memory, also: list[object], says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        memory.search(ANN, "deploy", also=also)  # type: ignore[arg-type]


def test_erasing_a_user_leaves_the_shared_memory(memory: Memory) -> None:
    memory.forget(ANN)
    assert memory.search(TEAM, "deploy windows", k=1)[0].scope == TEAM
    assert memory.search(ANN, "deploy", also=["_team"])[0].scope == TEAM


def test_over_http_any_key_of_the_org_reads_shared_memory_and_only_some_write_it(memory: Memory) -> None:
    keys = ApiKeyAuth([
        ApiKey("ann-app", hash_key("k-ann"), frozenset({"acme"})),
        ApiKey("acme-admin", hash_key("k-admin"), frozenset({"acme"}), shared_write=True),
        ApiKey("globex-app", hash_key("k-globex"), frozenset({"globex"})),
    ])  # fmt: skip
    with serve_in_thread(create_app(memory, auth=keys, warm=False)) as url:

        def call(method: str, path: str, key: str, **kw: object) -> httpx.Response:
            return httpx.request(
                method, f"{url}/v1/scopes/{path}", headers={"Authorization": f"Bearer {key}"}, **kw
            )  # type: ignore[arg-type]

        r = call("GET", "acme/ann/search", "k-ann", params={"query": "when do we deploy", "also": ["_team"]})
        assert r.status_code == 200, r.text
        assert {h["scope"]["user_id"] for h in r.json()["hits"]} == {"ann", "_team"}
        assert call("GET", "acme/_team/search", "k-ann", params={"query": "deploy"}).status_code == 200
        session = {"session_id": "s2", "messages": [{"role": "user", "content": "New rule."}]}
        refused = call("POST", "acme/_team/sessions", "k-ann", json=session)
        assert refused.status_code == 403 and "shared_write" in refused.json()["error"]["message"]
        assert call("POST", "acme/_team/sessions", "k-admin", json=session).status_code == 200
        assert (
            call("POST", "acme/ann/sessions", "k-ann", json=session).status_code == 200
        )  # own memory: as before
        r = call("GET", "acme/ann/search", "k-ann", params={"query": "deploy", "also": ["globex/_team"]})
        assert r.status_code == 422 and r.json()["error"]["field"] == "also[0]"
        assert call("GET", "acme/ann/search", "k-globex", params={"query": "deploy"}).status_code == 403


def test_mcp_refuses_a_shared_write_to_a_key_without_it() -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    keys = ApiKeyAuth([ApiKey("ann-app", hash_key("k-ann"), frozenset({"acme"}))])
    policy = ScopePolicy(auth=keys)
    headers = {"authorization": "Bearer k-ann"}
    assert policy.resolve("acme", "_team", headers) == TEAM  # reading
    with pytest.raises(ToolError, match="may read the shared scope acme/_team but not change it"):
        policy.resolve("acme", "_team", headers, writes=True)
    assert policy.resolve("acme", "ann", headers, writes=True) == ANN
