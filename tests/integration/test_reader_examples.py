"""The reader examples run end to end in their scripted (model-free) modes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_chat_loop_recalls_an_earlier_session(tmp_path: Path) -> None:
    chat = _load("chat_loop")
    transcript = chat.demo(tmp_path / "store")
    assert len(transcript) == 3
    question, reply = transcript[-1]
    assert "beagle" in question and reply.startswith(
        "Biscuit"
    )  # only answered if memory put Biscuit in the prompt
    assert reply.endswith("Alice.")  # only if the profile put her name (an application fact) there too


def test_chat_loop_stores_every_turn(tmp_path: Path) -> None:
    chat = _load("chat_loop")
    from graphrecall import Memory, Scope
    from graphrecall.embed import HashingEmbedder

    chat.demo(tmp_path / "store")
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as mem:
        stats = mem.stats(Scope(org_id="demo", user_id="alice"))
    assert (stats.sessions, stats.messages) == (2, 6)


def test_recommend_names_the_preferences_it_used(capsys: pytest.CaptureFixture[str]) -> None:
    rec = _load("recommend")
    assert rec.main(["--scripted"]) == 0
    out = capsys.readouterr().out
    assert "quiet Sichuan restaurant" in out
    assert "- vegetarian [s1@0]" in out and "[s2@0] 2024-02-20" in out
