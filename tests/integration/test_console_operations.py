"""The reads the console needs, as operations on every surface: ``list_scopes`` (an organisation's users with
sizes, last write and backlog), ``graph`` (entities, facts and events with their edges), ``extraction_queue`` and
``retry_extraction``; over Python, HTTP (with a key's organisation grants) and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.console_store import ALICE, build

from graphrecall import Memory
from graphrecall.cli import main
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.testing import serve_in_thread

KEYS = ApiKeyAuth([ApiKey("acme-ops", hash_key("acme-secret"), frozenset({"acme"}))])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console") / "store"
    build(path)
    return path


@pytest.fixture
def memory(root: Path) -> Iterator[Memory]:
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        yield m


def test_list_scopes_pages_and_filters_an_organisation(memory: Memory) -> None:
    page = memory.list_scopes("acme")
    assert [s.scope.user_id for s in page.scopes] == ["alice", "bob"] and page.total == 2
    alice = page.scopes[0]
    assert (alice.sessions, alice.rounds, alice.facts) == (3, 3, 3) and alice.entities >= 2
    assert alice.disk_bytes > 0 and alice.last_write is not None and alice.backlog == 0
    second = memory.list_scopes("acme", limit=1, offset=1)
    assert [s.scope.user_id for s in second.scopes] == ["bob"] and second.total == 2
    assert [s.scope.user_id for s in memory.list_scopes("acme", contains="ob").scopes] == ["bob"]
    assert memory.list_scopes("nobody").total == 0


def test_graph_links_facts_events_and_entities(memory: Memory) -> None:
    g = memory.graph(ALICE, include_superseded=True)
    by_label = {n.label: n for n in g.nodes}
    munich, berlin = by_label["The user lives in Munich"], by_label["The user lives in Berlin"]
    anna = by_label["Anna"]
    assert not munich.current and berlin.current and anna.kind == "entity"
    kinds = {(e.source, e.target, e.kind) for e in g.edges}
    assert (berlin.id, munich.id, "supersedes") in kinds and (berlin.id, anna.id, "about") in kinds
    assert any(e.kind == "related" and e.label == "lives_in" for e in g.edges)
    event = by_label["The user visited Anna in Munich."]
    assert event.kind == "event" and event.session_id == "s1" and event.message_ids == ["s1#0"]
    current = memory.graph(ALICE)
    assert "The user lives in Munich" not in {n.label for n in current.nodes}
    around = memory.graph(ALICE, entity=anna.id, include_superseded=True)
    assert {n.label for n in around.nodes if n.kind == "fact"} == {munich.label, berlin.label}
    assert memory.graph(ALICE, limit=1).more
    assert memory.graph(ALICE, offset=2**31).nodes == []  # past the end: empty, not a crash in Kuzu


def test_http_serves_them_within_the_key_s_organisations(memory: Memory) -> None:
    app = create_app(memory, auth=KEYS, warm=False)
    headers = {"Authorization": "Bearer acme-secret"}
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=60, headers=headers) as c:
        users = c.get("/v1/scopes/acme", params={"limit": 1})
        other = c.get("/v1/scopes/globex")
        anonymous = httpx.get(f"{url}/v1/scopes/acme", timeout=60)
        bad = c.get("/v1/scopes/acme", params={"limit": 0})
        graph = c.get("/v1/scopes/acme/alice/graph", params={"include_superseded": "true"})
        jobs = c.get("/v1/scopes/acme/alice/extraction-jobs", params={"status": "failed"})
        retry = c.post("/v1/scopes/acme/alice/extraction-jobs/retry")
        missing = c.get("/v1/scopes/acme/alise/graph")
    assert users.status_code == 200 and [s["scope"]["user_id"] for s in users.json()["scopes"]] == ["alice"]
    assert users.json()["total"] == 2
    assert other.status_code == 403 and anonymous.status_code == 401
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
    assert graph.status_code == 200 and any(e["kind"] == "supersedes" for e in graph.json()["edges"])
    assert jobs.status_code == 200 and jobs.json()["jobs"] == []
    assert retry.status_code == 409 and retry.json()["error"]["code"] == "not_available"  # no LLM here
    assert missing.status_code == 404 and "alice" in missing.text


def test_cli_lists_scopes_graph_and_jobs(root: Path, capsys: Any) -> None:
    store = ["--root", str(root), "--embedder", "hashing:64"]
    assert main(["scopes", "acme", *store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 2
    assert main(["scopes", "acme", "--contains", "ali", *store]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("alice") and "3 sessions" in out and "1-1 of 1 users in acme" in err
    assert main(["graph", "--org", "acme", "--user", "alice", "--include-superseded", *store]) == 0
    assert "The user lives in Berlin -supersedes (" in capsys.readouterr().out
    assert main(["jobs", "--org", "acme", "--user", "alice", *store]) == 0
    assert "0 pending, 0 running, 0 done, 0 failed" in capsys.readouterr().err


def test_the_local_console_answers_loopback_names_only(memory: Memory) -> None:
    """``graphrecall ui`` (no keys, loopback): a page elsewhere that resolves its own name to 127.0.0.1 (DNS
    rebinding) is refused by the Host check; the console itself needs no key there."""
    app = create_app(memory, auth=None, insecure_local=True, warm=False, loopback_only=True)
    with serve_in_thread(app) as url:
        page = httpx.get(f"{url}/ui/", timeout=60)
        rebound = httpx.get(f"{url}/v1/orgs", headers={"Host": "evil.example"}, timeout=60)
        orgs = httpx.get(f"{url}/v1/orgs", timeout=60).json()
    assert page.status_code == 200 and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert rebound.status_code == 400
    assert orgs == {"orgs": ["acme", "globex"], "key": "insecure-local", "authenticated": False}
