"""``hooks.install``: the Claude Code settings snippet, and merging it into a settings file without clobbering."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from graphrecall.errors import InvalidInput
from graphrecall.hooks import install


def test_the_snippet_registers_each_event_with_this_interpreter_and_the_options() -> None:
    hooks = install.snippet(["--org", "acme", "--root", "/my store"])["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}
    command = hooks["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert shlex.split(command) == [
        sys.executable,
        "-m",
        "graphrecall",
        "hook",
        "prompt",
        "--org",
        "acme",
        "--root",
        "/my store",
    ]
    assert all(
        e[0]["hooks"][0]["type"] == "command" and e[0]["hooks"][0]["timeout"] > 0 for e in hooks.values()
    )


def test_writing_keeps_other_settings_and_hooks_and_replaces_an_earlier_install(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    theirs = {"type": "command", "command": "echo started"}
    path.write_text(json.dumps({
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [theirs]}], "PostToolUse": [{"matcher": "Edit", "hooks": [theirs]}]},
    }))  # fmt: skip
    install.write(path, ["--org", "acme"])
    install.write(path, ["--org", "globex"])  # a second install replaces the first, it does not add to it
    got = json.loads(path.read_text())
    assert got["model"] == "opus" and got["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert got["hooks"]["PostToolUse"] == [{"matcher": "Edit", "hooks": [theirs]}]
    start = got["hooks"]["SessionStart"]
    assert start[0] == {"matcher": "startup", "hooks": [theirs]}
    assert len(start) == 2 and start[1]["hooks"][0]["command"].endswith("hook session-start --org globex")
    assert all(
        len(got["hooks"][name]) == 1 for name in ("UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
    )


def test_a_missing_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    install.write(path, [])
    assert set(json.loads(path.read_text())["hooks"]) == set(install.EVENTS)


@pytest.mark.parametrize("text", ["[1, 2]", "{not json", '{"hooks": []}', '{"hooks": {"Stop": {}}}'])
def test_a_file_that_is_not_settings_is_refused_and_left_as_it_was(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(InvalidInput, match="nothing was written"):
        install.write(path, [])
    assert path.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]  # no temporary file left behind
