"""add_document over HTTP (POST .../documents), MCP (memory_learn) and the CLI (learn FILE...): each learns through
``Memory.add_document``, its hits name the document, and bad input is refused naming the field, file or flag with
nothing stored."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from tests.tinypdf import tiny_pdf

from graphrecall import Memory
from graphrecall.cli import main
from graphrecall.docref import session_id
from graphrecall.embed import HashingEmbedder
from graphrecall.remote import discovery
from graphrecall.server import create_app
from graphrecall.server.auth import hash_key
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.testing import ServerProcess, serve_in_thread

SCOPE = ("acme", "alice")
ACME_ALICE = {"org_id": "acme", "user_id": "alice"}
BASE = "/v1/scopes/acme/alice"
GUIDE = "# Bike guide\n\n## Tyres\n\nPump the tyres to 4.5 bar every Sunday.\n\n## Chain\n\nOil the chain monthly.\n"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        yield m


def test_http_learns_a_document_that_search_and_context_then_name(memory: Memory) -> None:
    with (
        serve_in_thread(create_app(memory, auth=None, insecure_local=True)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        first = c.post(
            f"{BASE}/documents", json={"document": GUIDE, "source": "bike.md", "date": "2024-04-01"}
        )
        again = c.post(f"{BASE}/documents", json={"document": GUIDE, "source": "bike.md"})
        search = c.get(f"{BASE}/search", params={"query": "tyre pressure bar", "k": 1})
        context = c.get(f"{BASE}/context", params={"query": "tyre pressure", "token_budget": 300})
        no_source = c.post(f"{BASE}/documents", json={"document": GUIDE.replace("Sunday", "Monday")})
        markup = c.post(f"{BASE}/documents", json={"document": "# Heading\n\n---\n", "source": "x"})
        blank = c.post(f"{BASE}/documents", json={"document": " ", "source": "x"})
        pdf_format = c.post(f"{BASE}/documents", json={"document": GUIDE, "source": "x", "format": "pdf"})
        extract = c.post(f"{BASE}/documents", json={"document": GUIDE, "source": "y", "extract": True})
    assert first.status_code == 200, first.text
    assert first.json() | {"extraction": None} == {
        "source": "bike.md", "session_id": session_id("bike.md"), "status": "added", "format": "markdown",
        "passages": 2, "removed": 0, "title": "Bike guide", "extraction": None, "extraction_job": None,
    }  # fmt: skip
    assert again.json()["status"] == "unchanged"
    (hit,) = search.json()["hits"]
    assert hit["document"] == {"source": "bike.md", "title_path": ["Bike guide", "Tyres"], "position": 0}
    assert "### Document bike.md — 2024-04-01" in context.json()["text"]
    assert no_source.status_code == 200 and no_source.json()["source"].startswith("Bike guide [")
    for bad, field in ((markup, "document"), (blank, "document"), (pdf_format, "format")):
        assert bad.status_code == 422 and bad.json()["error"]["field"] == field, bad.text
    assert extract.status_code == 409 and extract.json()["error"]["code"] == "not_available"  # no LLM here
    assert [s.id for s in memory.sessions(SCOPE)] == [session_id("bike.md"), no_source.json()["session_id"]]


async def test_mcp_learns_a_document_that_memory_search_then_finds(memory: Memory) -> None:
    async with Client(create_mcp_server(memory)) as client:
        learned = await client.call_tool(
            "memory_learn", {"document": GUIDE, "source": "bike.md", **ACME_ALICE}
        )
        found = await client.call_tool("memory_search", {"query": "oil the chain", "k": 1, **ACME_ALICE})
        bad = await client.call_tool("memory_learn", {"document": " ", "source": "x", **ACME_ALICE})
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert not learned.is_error and learned.structured_content is not None
    assert (learned.structured_content["status"], learned.structured_content["passages"]) == ("added", 2)
    assert found.structured_content is not None
    assert found.structured_content["hits"][0]["document"]["title_path"] == ["Bike guide", "Chain"]
    assert bad.is_error
    assert set(tools["memory_learn"].input_schema["required"]) == {"document"}
    hints = tools["memory_learn"].annotations
    assert hints is not None and hints.read_only_hint is False and hints.destructive_hint is False


def test_cli_learns_files_and_relearns_only_what_changed(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    Path("docs/bike.md").write_text(GUIDE)
    Path("docs/notes.txt").write_text("The spare bike key is in the blue drawer.\n")
    Path("docs/shop.pdf").write_bytes(tiny_pdf([["Bike shop", "Open Tuesday to Saturday."]]))
    scope = ["--org", "acme", "--user", "alice", "--root", str(tmp_path / "store"), "--embedder", "hashing"]
    files = ["docs/bike.md", "docs/notes.txt", "docs/shop.pdf"]
    assert main(["learn", *files, *scope, "--date", "2024-04-01"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        "docs/bike.md 'Bike guide' -> acme/alice (markdown): added, 2 passages; session doc-"
    )
    assert "docs/notes.txt -> acme/alice (text): added, 1 passages" in out[1]
    assert "docs/shop.pdf -> acme/alice (text): added, 1 passages" in out[2]

    Path("docs/bike.md").write_text(GUIDE.replace("4.5 bar", "5 bar"))
    assert main(["learn", *files, *scope, "--json"]) == 0
    statuses = [(d["source"], d["status"]) for d in json.loads(capsys.readouterr().out)["documents"]]
    assert statuses == [
        ("docs/bike.md", "replaced"),
        ("docs/notes.txt", "unchanged"),
        ("docs/shop.pdf", "unchanged"),
    ]

    assert main(["search", "tyre pressure", *scope, "-k", "1"]) == 0
    shown = capsys.readouterr().out
    assert "document docs/bike.md › Bike guide › Tyres" in shown and "5 bar every Sunday" in shown
    assert "document: docs/bike.md" not in shown  # the passage's text is shown, its location once

    assert (
        main(["learn", "docs/notes.txt", *scope, "--source", "notes", "--format", "markdown", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["documents"][0]["source"] == "notes"


@pytest.mark.parametrize(
    ("args", "where", "words"),
    [
        (["docs/ok.md", "docs/missing.md"], "docs/missing.md", "no such file"),
        (["docs/ok.md", "docs/heads.md"], "docs/heads.md", "no text besides its headings"),
        (["docs/ok.md", "docs/blank.txt"], "docs/blank.txt", "is empty"),
        (["docs/ok.md", "docs/photo.png"], "docs/photo.png", "unsupported document type"),
        (["docs/ok.md", "--date", "2024-02-30"], "--date", "day is out of range"),
        (["docs/ok.md", "docs/heads.md", "--source", "x"], "--source", "one document"),
    ],
    ids=["missing", "headings", "blank", "unsupported", "date", "source"],
)
def test_cli_refuses_bad_files_naming_them_and_learns_none(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, args: list[str], where: str, words: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    Path("docs/ok.md").write_text(GUIDE)
    Path("docs/heads.md").write_text("# Only\n\n## Headings\n")
    Path("docs/blank.txt").write_text("\n  \n")
    Path("docs/photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    scope = ["--org", "acme", "--user", "alice", "--root", str(tmp_path / "store"), "--embedder", "hashing"]
    assert main(["learn", *args, *scope, "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["where"] == where and words in error["message"], error
    assert not (tmp_path / "store").exists()  # nothing learned, not even the good file


def test_cli_learns_through_a_running_server_reading_the_files_itself(tmp_path: Path, capsys: Any) -> None:
    """The server holds the root: ``learn`` reads and splits the files here (a PDF too) and sends their text."""
    bike, shop = tmp_path / "bike.md", tmp_path / "shop.pdf"
    bike.write_text(GUIDE)
    shop.write_bytes(tiny_pdf([["Bike shop", "Open Tuesday to Saturday."]]))
    root = tmp_path / "store"
    scope = ["--org", "acme", "--user", "alice", "--root", str(root)]
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps([{"name": "ops", "sha256": hash_key("gr_documents-0123456789"), "orgs": ["acme"]}])
    )
    with ServerProcess(root, cli=True, extra_args=["--keys", str(keys)]) as served:
        deadline = time.monotonic() + 30
        while discovery.read(root) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert main(["learn", str(bike), str(shop), *scope, "--json"]) == 0
        first = json.loads(capsys.readouterr().out)["documents"]
        assert main(["learn", str(bike), *scope, "--json"]) == 0
        again = json.loads(capsys.readouterr().out)["documents"]
        assert main(["search", "when is the shop open?", *scope, "-k", "1", "--json"]) == 0
        (hit,) = json.loads(capsys.readouterr().out)["hits"]
        assert served.log().count("POST /v1/scopes/acme/alice/documents") == 3  # sent, not run here
    assert [(d["source"], d["status"]) for d in first] == [(str(bike), "added"), (str(shop), "added")]
    assert [d["status"] for d in again] == ["unchanged"]
    assert hit["document"]["source"] == str(shop) and "Tuesday to Saturday" in hit["text"]
