"""An erase's preview shows the text of everything it would remove and says when a match takes a whole message:
``matching="cilantro"`` must show that "I'm doing a PhD at MIT", said in the same message, goes too (Python, HTTP
and the CLI, on a real store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from graphrecall import Memory
from graphrecall.cli import main
from graphrecall.embed import HashingEmbedder
from graphrecall.server import create_app
from graphrecall.server.testing import serve_in_thread

SCOPE = ("acme", "alice")
MIXED = "I hate cilantro. I'm doing a PhD at MIT."


def _store(root: Path) -> None:
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        m.add_session(SCOPE, [{"role": "user", "content": MIXED}, {"role": "assistant", "content": "Noted!"}],
                      session_id="s1", date="2024-01-01")  # fmt: skip
        m.add_session(SCOPE, [{"role": "user", "content": "Cilantro soap taste."}], session_id="s2",
                      date="2024-02-01")  # fmt: skip
        m.add_session(SCOPE, [{"role": "user", "content": "I like tea."}], session_id="s3", date="2024-03-01")


def test_the_dry_run_lists_texts_and_flags_whole_messages(tmp_path: Path) -> None:
    _store(tmp_path / "store")
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        dry = m.erase(SCOPE, matching="cilantro", dry_run=True)
        by_text = {i.text: i for i in dry.items if i.kind == "message"}
        assert MIXED in by_text and by_text[MIXED].beyond_match  # the PhD goes with the cilantro
        assert by_text["Noted!"].beyond_match  # the reply in the same round does not say cilantro at all
        assert not by_text["Cilantro soap taste."].beyond_match
        assert dry.warnings and "whole" in dry.warnings[0]
        sessions = {i.id: i for i in dry.items if i.kind == "session"}
        assert set(sessions) == {"s1", "s2"} and sessions["s1"].reason == "every message of it goes"
        assert [s.id for s in m.sessions(SCOPE)] == ["s1", "s2", "s3"]  # a dry run deletes nothing
        by_date = m.erase(SCOPE, before="2024-02-15", dry_run=True)
        assert {i.reason for i in by_date.items if i.kind == "session"} == {"started before 2024-02-15 00:00"}
        named = m.erase(SCOPE, session_ids=["s3"])
        assert [(i.kind, i.text, i.reason) for i in named.items if i.kind != "message"] == [
            ("session", "1 message(s)", "named")
        ]
        assert not named.warnings and [s.id for s in m.sessions(SCOPE)] == ["s1", "s2"]


def test_http_and_cli_show_the_same_texts(tmp_path: Path, capsys: Any) -> None:
    root = tmp_path / "store"
    _store(root)
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        with (
            serve_in_thread(create_app(m, auth=None, insecure_local=True, warm=False)) as url,
            httpx.Client(base_url=url, timeout=60) as c,
        ):
            dry = c.post("/v1/scopes/acme/alice/erase", json={"matching": "cilantro", "dry_run": True}).json()
        texts = {i["text"]: i["beyond_match"] for i in dry["items"]}
        assert texts[MIXED] is True and dry["warnings"]
    scope = ["--org", "acme", "--user", "alice", "--root", str(root), "--embedder", "hashing:64"]
    assert main(["erase", *scope, "--matching", "cilantro", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert MIXED in out and "[the WHOLE message goes]" in out and "whole" in err
