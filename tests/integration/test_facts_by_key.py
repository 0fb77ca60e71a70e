"""Facts by key: an application that knows which field a fact fills (a settings page, a CRM column) adds it with a
key, and the next fact of the same kind and key replaces it by that rule alone: no LLM is asked, similarity does not
matter, the old value stays in history and ``as_of``; the same text again reinforces. Keyed facts version only
against keyed facts, consolidation leaves them alone, and an export keeps their keys. Python, HTTP, MCP and CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from graphrecall import InvalidInput, Memory
from graphrecall.cli import main
from graphrecall.embed import HashingEmbedder
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import ScriptedLLM
from graphrecall.models import utcnow
from graphrecall.server import create_app
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.testing import serve_in_thread

SCOPE = ("acme", "dana")
PT = "The user's preferred language is Portuguese."
ES = "The user's preferred language is Spanish."


@pytest.fixture
def m(tmp_path: Path) -> Iterator[Memory]:
    # An LLM with no scripted step: any call fails the test (a keyed fact must not ask it).
    llm = ScriptedLLM([])
    with Memory.open(
        tmp_path / "s", embedder=HashingEmbedder(64), llm=llm, extraction=ExtractionConfig(background=False)
    ) as mem:
        yield mem
    assert llm.usage.records == []  # never asked


def test_a_new_value_for_a_key_replaces_the_current_one_and_keeps_history(m: Memory) -> None:
    first = m.add_fact(SCOPE, PT, kind="preference", key="preferred_language")
    assert (first.decision, first.decided_by, first.fact.key) == ("NEW", "key", "preferred_language")
    between = utcnow()
    second = m.add_fact(SCOPE, ES, kind="preference", key="preferred_language")
    assert (second.decision, second.decided_by, second.superseded) == ("UPDATE", "key", first.fact.id)
    assert [f.text for f in m.facts(SCOPE)] == [ES]  # only the new value is current
    profile = m.profile(SCOPE).text
    assert "Spanish" in profile and "Portuguese" not in profile
    history = m.history(SCOPE, second.fact.id)
    assert [f.text for f in history] == [PT, ES]
    assert history[0].superseded_by == second.fact.id and history[0].valid_to is not None
    assert [f.text for f in m.facts(SCOPE, as_of=between)] == [PT]  # what was true then


def test_the_key_decides_even_when_the_texts_have_nothing_in_common(m: Memory) -> None:
    a = m.add_fact(SCOPE, "Theme: dark.", kind="preference", key="ui.theme")
    b = m.add_fact(
        SCOPE, "The user switched everything to the light colour scheme.", kind="preference", key="ui.theme"
    )
    assert b.superseded == a.fact.id
    again = m.add_fact(SCOPE, "  the user switched everything to the light colour scheme ", kind="preference",
                       key="ui.theme")  # fmt: skip
    assert (again.decision, again.decided_by, again.fact.id) == ("DUPLICATE", "key", b.fact.id)
    assert again.fact.reinforcement == 2
    assert [f.id for f in m.facts(SCOPE)] == [b.fact.id]


def test_keys_are_per_kind_and_unkeyed_facts_are_never_replaced_by_a_keyed_one(m: Memory) -> None:
    plain = m.add_fact(SCOPE, PT, kind="preference")  # no key: the rule versions it
    keyed = m.add_fact(SCOPE, ES, kind="preference", key="preferred_language")
    other_kind = m.add_fact(
        SCOPE, "The user speaks Spanish at work.", kind="attribute", key="preferred_language"
    )
    assert keyed.decision == "NEW" and other_kind.decision == "NEW"
    assert {f.id for f in m.facts(SCOPE)} == {plain.fact.id, keyed.fact.id, other_kind.fact.id}
    # the same text said without a key reinforces the keyed fact (the rule, no LLM); it does not fork it
    dup = m.add_fact(SCOPE, ES, kind="preference")
    assert (dup.decision, dup.fact.id, dup.fact.key) == ("DUPLICATE", keyed.fact.id, "preferred_language")
    # consolidation never merges a keyed fact away (its key would lose its current value)
    m.add_fact(SCOPE, "The user's preferred language is Spanish!", kind="preference", key="second_language")
    result = m.consolidate(SCOPE)
    assert all(keyed.fact.id not in merge.superseded for merge in result.merges)
    assert keyed.fact.id in {f.id for f in m.facts(SCOPE)}


def test_a_blank_or_overlong_key_is_refused_and_nothing_is_stored(m: Memory) -> None:
    m.add_fact(SCOPE, PT, kind="preference", key="preferred_language")
    for bad in ("", "   ", "k" * 201):
        with pytest.raises(InvalidInput) as e:
            m.add_fact(SCOPE, ES, kind="preference", key=bad)
        assert e.value.where == "key"
    assert [f.text for f in m.facts(SCOPE)] == [PT]


def test_export_and_import_keep_the_key_so_the_next_value_still_replaces(m: Memory) -> None:
    first = m.add_fact(SCOPE, PT, kind="preference", key="preferred_language")
    m.import_scope(("acme", "copy"), m.export_scope(SCOPE))
    [copied] = m.facts(("acme", "copy"))
    assert (copied.id, copied.key) == (first.fact.id, "preferred_language")
    after = m.add_fact(("acme", "copy"), ES, kind="preference", key="preferred_language")
    assert after.superseded == first.fact.id


def test_valid_from_of_the_new_value_closes_the_old_one_then(m: Memory) -> None:
    t0 = utcnow() - timedelta(days=30)
    m.add_fact(SCOPE, PT, kind="preference", key="lang", valid_from=t0)
    new = m.add_fact(SCOPE, ES, kind="preference", key="lang", valid_from=t0 + timedelta(days=10))
    old = m.history(SCOPE, new.fact.id)[0]
    assert old.valid_to == t0 + timedelta(days=10)


def test_http_mcp_and_cli_take_the_key(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    base = "/v1/scopes/acme/dana"
    with Memory.open(tmp_path / "http", embedder=HashingEmbedder(64)) as mem:
        with (
            serve_in_thread(create_app(mem, auth=None, insecure_local=True)) as url,
            httpx.Client(base_url=url, timeout=60) as c,
        ):
            a = c.post(f"{base}/facts", json={"text": PT, "kind": "preference", "key": "preferred_language"})
            b = c.post(f"{base}/facts", json={"text": ES, "kind": "preference", "key": "preferred_language"})
            blank = c.post(f"{base}/facts", json={"text": ES, "key": " "})
        assert a.status_code == b.status_code == 200, b.text
        assert (b.json()["decided_by"], b.json()["superseded"]) == ("key", a.json()["fact"]["id"])
        assert b.json()["fact"]["key"] == "preferred_language"
        assert blank.status_code == 422 and blank.json()["error"]["field"] == "key"

    async def mcp() -> dict[str, Any]:
        with Memory.open(tmp_path / "mcp", embedder=HashingEmbedder(64)) as mem:
            async with Client(create_mcp_server(mem)) as client:
                args = {"kind": "preference", "key": "lang", "org_id": "acme", "user_id": "dana"}
                await client.call_tool("memory_add_fact", {"text": PT, **args})
                r = await client.call_tool("memory_add_fact", {"text": ES, **args})
                assert r.structured_content is not None
                return r.structured_content

    import asyncio

    out = asyncio.run(mcp())
    assert (out["decision"], out["decided_by"]) == ("UPDATE", "key")

    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    scope = ["--org", "acme", "--user", "dana", "--root", str(tmp_path / "cli"), "--embedder", "hashing"]
    assert main(["add-fact", PT, *scope, "--kind", "preference", "--key", "preferred_language"]) == 0
    capsys.readouterr()
    assert (
        main(["add-fact", ES, *scope, "--kind", "preference", "--key", "preferred_language", "--json"]) == 0
    )
    added = json.loads(capsys.readouterr().out)
    assert (added["decision"], added["decided_by"]) == ("UPDATE", "key")
    assert main(["facts", *scope]) == 0
    out_text = capsys.readouterr().out
    assert "Spanish" in out_text and "[key preferred_language]" in out_text and "Portuguese" not in out_text
