"""``graphrecall hook EVENT`` (issue 29, item 1) driven as Claude Code drives it: its hook JSON on stdin, transcripts in
its JSONL shape (``tests/transcripts.py``). In process with the hashing embedder, plus real subprocesses where the
command line itself is the point: the stranger's path (install into a settings file, replay two sessions through
the installed commands, the second one's start shows what the first said) and hooks through a running server.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from tests.transcripts import Transcript, hook_input

import graphrecall
from graphrecall import Memory, Scope, cli
from graphrecall.hooks import state
from graphrecall.server.testing import ServerProcess

SCOPE_ARGS = ["--org", "acme", "--user", "ann"]
PROJECT = Scope(org_id="acme", user_id="_project-tidewater")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "tidewater"
    (path / ".git").mkdir(parents=True)
    (path / "src").mkdir()
    return path


class Hook:
    """``graphrecall hook EVENT`` in this process; returns (exit code, stdout, stderr)."""

    def __init__(
        self, root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.root, self.capsys, self.monkeypatch = root, capsys, monkeypatch

    def __call__(self, event: str, stdin: str, *args: str) -> tuple[int, str, str]:
        self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        argv = ["hook", event, *args, *SCOPE_ARGS, "--root", str(self.root), "--embedder", "hashing"]
        code = cli.main(argv)
        out, err = self.capsys.readouterr()
        return code, out, err

    def errors(self) -> dict[str, Any]:
        assert cli.main(["hook", "errors", "--root", str(self.root), "--json"]) == 0
        counts: dict[str, Any] = json.loads(self.capsys.readouterr().out)
        return counts


@pytest.fixture
def hook(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Hook:
    return Hook(tmp_path / "store", capsys, monkeypatch)


def first_session(tmp_path: Path, repo: Path) -> Transcript:
    t = Transcript(tmp_path / "one.jsonl", "0a1b2c3d-first", repo)
    t.user("The integration tests hang on CI when Postgres is not ready. Fix the startup race.")
    t.tool("Bash", {"command": "pytest tests/integration"}, "E OperationalError: connection refused")
    t.tool("Edit", {"file_path": str(repo / "tests/conftest.py")}, "The file has been updated.")
    t.say("I added wait_for_postgres() to tests/conftest.py: it polls pg_isready for up to 30 seconds.")
    return t


def stored(root: Path, scope: Scope = PROJECT) -> list[Any]:
    with Memory.open(root, embedder="hashing") as mem:
        return [m for s in mem.export_sessions(scope) for m in s.messages]


def test_stop_stores_only_new_turns_and_repeated_calls_change_nothing(
    hook: Hook, tmp_path: Path, repo: Path
) -> None:
    t = first_session(tmp_path, repo)
    assert hook("stop", hook_input("stop", t)) == (0, "", "")
    messages = stored(hook.root)
    assert [m.role.value for m in messages] == ["user", "tool", "tool", "tool", "assistant"]
    assert hook("stop", hook_input("stop", t))[0] == 0
    assert hook("session-end", hook_input("session-end", t, reason="exit"))[0] == 0
    assert len(stored(hook.root)) == 5  # nothing twice
    t.user("Also make the test database name configurable.")
    t.say("TEST_DB_NAME now overrides the default name.")
    assert hook("pre-compact", hook_input("pre-compact", t, trigger="auto"))[0] == 0
    again = stored(hook.root)
    assert [m.content for m in again][-2:] == [
        "Also make the test database name configurable.",
        "TEST_DB_NAME now overrides the default name.",
    ]
    for cursor in (
        state.state_dir(hook.root) / "cursors"
    ).iterdir():  # lost state: the ids keep it idempotent
        cursor.unlink()
    assert hook("stop", hook_input("stop", t))[0] == 0
    assert [m.id for m in stored(hook.root)] == [m.id for m in again]
    assert hook.errors()["errors"] == 0


def test_outside_a_repository_the_transcript_goes_to_the_users_scope(hook: Hook, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "plain.jsonl", "s-plain", tmp_path / "notes")
    t.user("Remember that I prefer tabs.")
    t.say("Noted.")
    assert hook("stop", hook_input("stop", t))[0] == 0
    assert (
        next(m.content for m in stored(hook.root, Scope(org_id="acme", user_id="ann")))
        == "Remember that I prefer tabs."
    )


def test_session_start_shows_the_latest_sessions_of_the_project_but_not_the_current_one(
    hook: Hook, tmp_path: Path, repo: Path
) -> None:
    t = first_session(tmp_path, repo)
    second = Transcript(tmp_path / "two.jsonl", "9f8e7d6c-second", repo)
    code, out, err = hook("session-start", hook_input("session-start", second, source="startup"))
    assert (code, out, err) == (0, "", "")  # nothing stored yet: nothing said
    hook("stop", hook_input("stop", t))
    code, out, err = hook("session-start", hook_input("session-start", second, source="startup"))
    assert code == 0 and err == ""
    output = json.loads(out)["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    text = output["additionalContext"]
    assert "## Project tidewater" in text and "wait_for_postgres()" in text and "2 tool calls" in text
    assert "session 0a1b2c3d" in text
    resumed = hook("session-start", hook_input("session-start", t, source="resume"), "--plain")[1]
    assert "wait_for_postgres" not in resumed  # the current session is in the agent's context already
    small = hook(
        "session-start", hook_input("session-start", second, source="startup"), "--plain", "--budget", "40"
    )[1]
    assert len(small) <= 40 * 4 and "tidewater" in small


def test_the_prompt_hook_adds_relevant_memory_and_nothing_otherwise(
    hook: Hook, tmp_path: Path, repo: Path
) -> None:
    t = first_session(tmp_path, repo)
    second = Transcript(tmp_path / "two.jsonl", "9f8e7d6c-second", repo)
    asked = "integration tests hang on CI when Postgres is not ready"
    assert hook("prompt", hook_input("prompt", second, prompt=asked)) == (0, "", "")  # nothing stored
    hook("stop", hook_input("stop", t))
    code, out, _ = hook("prompt", hook_input("prompt", second, prompt=asked), "--plain")
    assert code == 0 and out.startswith("Relevant memory (project tidewater, graphrecall):")
    assert "wait_for_postgres" in out
    unrelated = hook("prompt", hook_input("prompt", second, prompt="translate the settings page into German"))
    assert unrelated == (0, "", "")


def test_every_failure_exits_0_with_one_line_and_is_counted(
    hook: Hook, tmp_path: Path, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = first_session(tmp_path, repo)
    failures = [
        ("prompt", "not json", "invalid_input"),
        (
            "stop",
            json.dumps({"session_id": "x", "transcript_path": str(tmp_path / "missing.jsonl")}),
            "invalid_input",
        ),
        ("stop", json.dumps({"transcript_path": str(t.path)}), "invalid_input"),
        ("session-start", "", "invalid_input"),
    ]
    for event, stdin, code in failures:
        exit_code, out, err = hook(event, stdin)
        assert exit_code == 0 and out == ""
        assert len(err.strip().splitlines()) == 1 and err.startswith(f"graphrecall hook {event}: {code}: ")
    code = cli.main(["hook", "prompt", "--no-such-option", "--root", str(hook.root)])
    _, err = capsys.readouterr()
    assert (
        code == 0 and "unrecognized arguments" in err
    )  # a usage error would be exit 2: "block" to the agent
    counts = hook.errors()
    assert counts["errors"] == 5 and counts["by_event"] == {"prompt": 2, "stop": 2, "session-start": 1}
    assert cli.main(["hook", "errors", "--root", str(hook.root)]) == 0
    assert capsys.readouterr().out.startswith("5 hook errors (by event: prompt 2, session-start 1, stop 2;")


def test_a_busy_store_does_not_fail_the_agent(hook: Hook, tmp_path: Path, repo: Path) -> None:
    t = first_session(tmp_path, repo)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from graphrecall import Memory
            with Memory.open({str(hook.root)!r}, embedder="hashing") as m:
                m.add_session(("acme", "_project-tidewater"), [{{"role": "user", "content": "hi"}}], session_id="x")
                print("ready", flush=True)
                sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        code, out, err = hook("stop", hook_input("stop", t))
        assert code == 0 and out == "" and "store_busy" in err
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    counts = hook.errors()
    assert counts["by_code"] == {"store_busy": 1} and counts["by_scope"] == {"acme/_project-tidewater": 1}
    assert hook("stop", hook_input("stop", t)) == (
        0,
        "",
        "",
    )  # the cursor did not move: the next call stores it
    assert len(stored(hook.root)) == 6


def test_hooks_go_through_a_server_that_holds_the_root(hook: Hook, tmp_path: Path, repo: Path) -> None:
    t = first_session(tmp_path, repo)
    second = Transcript(tmp_path / "two.jsonl", "9f8e7d6c-second", repo)
    with ServerProcess(hook.root, cli=True, extra_args=["--insecure-local"]) as server:
        assert hook("stop", hook_input("stop", t)) == (0, "", "")  # no store_busy: it went to the server
        out = hook("session-start", hook_input("session-start", second), "--plain")[1]
        assert "wait_for_postgres" in out
        asked = "integration tests hang on CI when Postgres is not ready"
        assert "wait_for_postgres" in hook("prompt", hook_input("prompt", second, prompt=asked), "--plain")[1]
        deadline = time.monotonic() + 10
        while (
            '_project-tidewater/messages" 200' not in server.log()
        ):  # the access log (lines follow responses)
            assert time.monotonic() < deadline, server.log()[-2000:]
            time.sleep(0.05)
    assert len(stored(hook.root)) == 5


def test_a_stranger_installs_the_hooks_and_the_second_session_starts_with_the_first(
    tmp_path: Path, repo: Path
) -> None:
    """Tried as a stranger: ``graphrecall hook install --write`` into a settings file, then every hook run as
    Claude Code runs it (the command from the file, through a shell, the hook JSON on stdin)."""
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"theme": "dark"}))
    root = tmp_path / "store"
    src = str(Path(graphrecall.__file__).resolve().parents[1])  # this checkout, whatever the hook's cwd
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-m", "graphrecall", "hook", "install", "--write", str(settings), "--root", str(root),
         "--org", "acme", "--user", "ann", "--embedder", "hashing"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    config = json.loads(settings.read_text())
    assert config["theme"] == "dark"

    def run(agent_event: str, payload: str) -> str:
        (command,) = [h["command"] for entry in config["hooks"][agent_event] for h in entry["hooks"]]
        assert shlex.split(command)[:4] == [sys.executable, "-m", "graphrecall", "hook"]
        proc = subprocess.run(
            command, shell=True, input=payload, capture_output=True, text=True, env=env, cwd=repo, timeout=300
        )
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        return proc.stdout

    one = first_session(tmp_path, repo)
    assert run("SessionStart", hook_input("session-start", one, source="startup")) == ""
    assert run("UserPromptSubmit", hook_input("prompt", one, prompt="Fix the startup race in CI")) == ""
    assert run("Stop", hook_input("stop", one)) == ""
    assert run("SessionEnd", hook_input("session-end", one, reason="exit")) == ""

    two = Transcript(tmp_path / "two.jsonl", "77777777-second", repo)
    start = json.loads(run("SessionStart", hook_input("session-start", two, source="startup")))
    context = start["hookSpecificOutput"]["additionalContext"]
    assert "I added wait_for_postgres() to tests/conftest.py" in context
    assert "The integration tests hang on CI when Postgres is not ready" in context


def test_with_an_llm_configured_a_session_with_new_turns_is_queued_for_extraction(
    hook: Hook, tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphrecall.extract.queue import QUEUE_FILE, ExtractionQueue

    t = first_session(tmp_path, repo)
    assert hook("stop", hook_input("stop", t)) == (0, "", "")
    assert not (hook.root / QUEUE_FILE).exists()  # no LLM configured: nothing queued
    monkeypatch.setenv("GRAPHRECALL_LLM", "openai:gpt-4o-mini")  # never called: the hook only enqueues
    t.user("Also make the test database name configurable.")
    t.say("TEST_DB_NAME now overrides the default name.")
    assert hook("stop", hook_input("stop", t)) == (0, "", "")

    def jobs() -> list[Any]:
        queue = ExtractionQueue(hook.root, lambda scope, sid: None, workers=0, start=False)
        try:
            return queue.jobs()
        finally:
            queue.close()

    (job,) = jobs()
    assert (job.scope, job.session_id, job.status) == (PROJECT, "0a1b2c3d-first", "pending")
    assert hook("stop", hook_input("stop", t)) == (0, "", "")  # nothing new: not queued again
    assert [j.updated_at for j in jobs()] == [job.updated_at]


def test_a_prompt_in_a_repository_reads_the_users_memory_and_the_projects_together(
    hook: Hook, tmp_path: Path, repo: Path
) -> None:
    elsewhere = Transcript(tmp_path / "plain.jsonl", "s-plain", tmp_path / "notes")
    elsewhere.user("Remember that I always want type hints on every function signature.")
    elsewhere.say("Noted: type hints on every function signature.")
    assert hook("stop", hook_input("stop", elsewhere))[0] == 0  # outside a repository: the user's scope
    hook("stop", hook_input("stop", first_session(tmp_path, repo)))  # in it: the project's
    second = Transcript(tmp_path / "two.jsonl", "9f8e7d6c-second", repo)
    out = hook(
        "prompt", hook_input("prompt", second, prompt="type hints on every function signature"), "--plain"
    )[1]
    assert "type hints on every function signature" in out
    out = hook(
        "prompt",
        hook_input("prompt", second, prompt="integration tests hang when Postgres is not ready"),
        "--plain",
    )[1]
    assert "wait_for_postgres" in out
