"""A ChatGPT data export, zip and all, ingested from the command line into a real store, then searched."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from graphrecall import Memory, Scope, cli
from graphrecall.embed import HashingEmbedder

T0 = 1_717_000_000.0


def _message(role: str, text: str, at: float) -> dict[str, object]:
    return {
        "id": f"m{at}",
        "author": {"role": role, "metadata": {}},
        "create_time": at,
        "content": {"content_type": "text", "parts": [text]},
        "metadata": {},
        "recipient": "all",
    }


def _export(path: Path) -> None:
    """Two conversations; in the first the user edited their message, and kept the second version."""
    moving = {
        "root": {"parent": None, "children": ["old", "new"], "message": None},
        "old": {
            "parent": "root",
            "children": [],
            "message": _message("user", "My dog is called Rex.", T0 + 1),
        },
        "new": {
            "parent": "root",
            "children": ["ok"],
            "message": _message("user", "My dog is called Pixel.", T0 + 2),
        },
        "ok": {"parent": "new", "children": [], "message": _message("assistant", "Hello Pixel!", T0 + 3)},
    }
    work = {
        "root": {"parent": None, "children": ["q"], "message": None},
        "q": {
            "parent": "root",
            "children": [],
            "message": _message("user", "I work as a glassblower.", T0 + 99),
        },
    }
    conversations = [
        {"id": "chat-dog", "title": "Dog", "create_time": T0, "mapping": moving, "current_node": "ok"},
        {"id": "chat-work", "title": "Work", "create_time": T0 + 90, "mapping": work, "current_node": "q"},
    ]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("conversations.json", json.dumps(conversations))
        z.writestr("user.json", "{}")


def test_an_export_zip_becomes_one_session_per_conversation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export, root = tmp_path / "chatgpt.zip", tmp_path / "store"
    _export(export)
    scope = ["--org", "acme", "--user", "zoe", "--root", str(root), "--embedder", "hashing"]
    assert cli.main(["ingest", str(export), *scope, "--json"]) == 0, capsys.readouterr().err
    capsys.readouterr()

    with Memory.open(root, embedder=HashingEmbedder()) as mem:
        z = Scope(org_id="acme", user_id="zoe")
        sessions = {s.id: s for s in mem.sessions(z)}
        assert set(sessions) == {"chat-dog", "chat-work"}
        assert sessions["chat-dog"].started_at.isoformat() == "2024-05-29T16:26:40"
        hits = mem.search(z, "what is my dog called", k=5)
        texts = " ".join(h.text for h in hits)
        assert "Pixel" in texts
        assert "Rex" not in texts  # the abandoned edit was never stored

    # ingesting the same export again stores nothing new
    assert cli.main(["ingest", str(export), *scope, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions_added"] == 0
