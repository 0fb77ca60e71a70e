"""The ``graphrecall`` command line, driven through ``main([...])`` in-process with the hashing embedder, plus a few
real subprocesses for exit codes and the one-line error contract."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from graphrecall import Memory, cli
from graphrecall.params import BATCH_SESSIONS

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "chat_history.json"
SCOPE = ["--org", "acme", "--user", "ann"]


class Run:
    """``graphrecall ARGS`` in this process against a private store; returns (exit code, stdout, stderr)."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = root
        self.capsys = capsys

    def __call__(self, *args: str | Path) -> tuple[int, str, str]:
        argv = [str(a) for a in args]
        code = cli.main([*argv, "--root", str(self.root), "--embedder", "hashing"])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str | Path) -> Any:
        code, out, err = self(*args, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(tmp_path / "store", capsys)


def example_sessions() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(EXAMPLE.read_text())
    return data


def counts(run: Run, *scope: str) -> tuple[int, int]:
    stats = run.json("stats", *(scope or SCOPE))
    return stats["sessions"], stats["messages"]


# -- ingest ------------------------------------------------------------------------------------------------------------
def test_ingest_reports_what_it_added_and_stats_agree(run: Run) -> None:
    sessions = example_sessions()
    n_messages = sum(len(s["messages"]) for s in sessions)
    code, out, err = run("ingest", EXAMPLE, *SCOPE)
    assert code == 0, err
    assert err == ""  # no progress bar when stderr is not a terminal
    assert f"{len(sessions)} sessions, {n_messages} messages added" in out
    assert counts(run) == (len(sessions), n_messages)


def test_re_ingesting_the_same_file_changes_nothing(run: Run) -> None:
    first = run.json("ingest", EXAMPLE, *SCOPE)
    again = run.json("ingest", EXAMPLE, *SCOPE)
    assert again["sessions_added"] == again["messages_added"] == again["rounds_written"] == 0
    assert again["messages_skipped"] == first["messages_added"] == again["messages_in_file"]
    assert counts(run) == (first["sessions_added"], first["messages_added"])


def test_small_batches_store_the_same_as_one(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE, "--batch", "3")
    run.json("ingest", EXAMPLE, "--org", "acme", "--user", "bob")
    assert counts(run) == counts(run, "--org", "acme", "--user", "bob")


@pytest.mark.parametrize("fmt", ["jsonl", "jsonl.gz", "longmemeval", "messages"])
def test_every_input_format_ingests(run: Run, tmp_path: Path, fmt: str) -> None:
    sessions = example_sessions()[:3]
    extra: list[str] = []
    if fmt.startswith("jsonl"):
        data = "\n".join(json.dumps(s) for s in sessions).encode()
        want = (3, sum(len(s["messages"]) for s in sessions))
    elif fmt == "longmemeval":
        question = {
            "question_id": "q1",
            "haystack_session_ids": [s["session_id"] for s in sessions],
            "haystack_dates": [f"2024/01/0{i + 1} (Mon) 10:00" for i in range(3)],
            "haystack_sessions": [s["messages"] for s in sessions],
        }
        data = json.dumps([question, question]).encode()  # overlapping haystacks are stored once
        want = (3, sum(len(s["messages"]) for s in sessions))
    else:
        data = json.dumps(sessions[0]["messages"]).encode()
        extra = ["--date", "2024-02-02T10:00:00"]
        want = (1, len(sessions[0]["messages"]))
    path = tmp_path / {"longmemeval": "lme.json", "messages": "chat.json"}.get(fmt, f"input.{fmt}")
    path.write_bytes(gzip.compress(data) if fmt.endswith(".gz") else data)
    result = run.json("ingest", path, *SCOPE, *extra)
    assert result["format"] == fmt.removesuffix(".gz")
    assert counts(run) == want
    if fmt == "messages":
        [only] = run.json("sessions", *SCOPE)["sessions"]
        assert only["id"] == "chat"  # named after the file
        assert only["started_at"].startswith("2024-02-02T10:00")


def test_export_is_re_ingestable_into_an_identical_scope(run: Run, tmp_path: Path) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    out = tmp_path / "export.json.gz"
    code, _, err = run("export", *SCOPE, "-o", out)
    assert code == 0, err
    other = ["--org", "acme", "--user", "copy"]
    run.json("ingest", out, *other)
    code, original, _ = run("export", *SCOPE)
    code, copied, _ = run("export", *other)
    assert (
        json.loads(original)["sessions"] == json.loads(copied)["sessions"]
    )  # the same history, another user
    assert (json.loads(original)["user_id"], json.loads(copied)["user_id"]) == ("ann", "copy")
    assert json.loads(gzip.decompress(out.read_bytes())) == json.loads(original)


# -- bad input: exit 2, one line naming file/item/field, nothing stored ------------------------------------------------
def bad_files() -> dict[str, tuple[str, str]]:
    """name -> (file content, the location the error must name)."""
    good = example_sessions()[:3]

    def with_change(change: Any) -> str:
        doc = json.loads(json.dumps(good))
        change(doc)
        return json.dumps(doc)

    return {
        "missing role": (
            with_change(lambda d: d[1]["messages"][2].pop("role")),
            "sessions[1].messages[2].role",
        ),
        "unknown role": (
            with_change(lambda d: d[2]["messages"][0].update(role="bot")),
            "sessions[2].messages[0].role",
        ),
        "bad date": (with_change(lambda d: d[1].update(date="last tuesday")), "sessions[1].date"),
        "not json": ('[{"session_id": "a", "messages": [', "not valid JSON"),
        "empty": ("", "empty"),
    }


@pytest.mark.parametrize("case", sorted(bad_files()))
def test_a_bad_file_exits_2_with_one_line_and_stores_nothing(run: Run, tmp_path: Path, case: str) -> None:
    run.json("ingest", EXAMPLE, "--org", "acme", "--user", "existing")
    before = run.json("stats")
    content, where = bad_files()[case]
    path = tmp_path / "history.json"
    path.write_text(content)
    for scope in (SCOPE, ["--org", "acme", "--user", "existing"]):
        code, out, err = run("ingest", path, *scope, "--batch", "1")  # the bad item is not in the first batch
        assert code == 2
        assert out == ""
        assert len(err.strip().splitlines()) == 1, err
        assert "history.json" in err and where in err, err
        assert "Traceback" not in err
    assert run.json("stats") == before


def test_bad_scope_ids_name_the_flag(run: Run) -> None:
    code, _, err = run("search", "hello", "--org", "a/b", "--user", "ann")
    assert code == 2
    assert "--org" in err and "'/'" in err


def test_extract_without_an_llm_names_both_ways_to_configure_one_and_stores_nothing(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    code, out, err = run("ingest", EXAMPLE, *SCOPE, "--extract")
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert "needs an LLM" in line and "--llm" in line and "GRAPHRECALL_LLM" in line
    assert not run.root.exists()


# -- recall --------------------------------------------------------------------------------------------------------------
def test_search_finds_the_session_that_mentions_the_words(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    [puppy] = [s["session_id"] for s in example_sessions() if "beagle" in json.dumps(s)]
    hits = run.json("search", "beagle puppy named Biscuit", *SCOPE, "-k", "3")["hits"]
    assert 1 <= len(hits) <= 3
    assert hits[0]["session_id"] == puppy
    assert [h["rank"] for h in hits] == sorted(h["rank"] for h in hits)
    code, out, _ = run("search", "beagle puppy named Biscuit", *SCOPE, "-k", "3")
    assert code == 0
    first = out.splitlines()[0]
    assert puppy in first and "vector=" in first


def test_a_long_round_is_shown_by_the_sentences_that_match(run: Run, tmp_path: Path) -> None:
    filler = " ".join(f"Day {d} of the conference was talks and lunch with the team." for d in range(1, 20))
    history = tmp_path / "long.json"
    history.write_text(
        json.dumps(
            [
                {
                    "session_id": "trip",
                    "date": "2024-05-01",
                    "messages": [
                        {
                            "role": "user",
                            "content": f"{filler} Also I am restoring a wooden sailboat called Albatross.",
                        },
                        {"role": "assistant", "content": "Sounds like a full week."},
                    ],
                }
            ]
        )
    )
    run.json("ingest", history, *SCOPE)
    code, out, _ = run("search", "what is my sailboat called?", *SCOPE, "-k", "1")
    assert code == 0
    [_, shown] = out.splitlines()
    assert "Albatross" in shown and len(shown.strip()) <= 160
    assert "Day 1 " not in shown  # not the opening


def test_backfill_passages_reports_per_scope_and_names_an_unknown_one(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    # The hashing embedder has no window, so it keeps no passages: the command has nothing to do, and says so.
    assert run.json("backfill-passages", *SCOPE) == {"scope": "/".join(SCOPE[1::2]), "rounds": 0}
    code, out, _ = run("backfill-passages", *SCOPE)
    assert code == 0 and "nothing to backfill" in out
    code, _, err = run("backfill-passages", "--org", SCOPE[1], "--user", "nobody")
    assert code == 1 and "nobody" in err


def test_backfill_passages_runs_over_an_organisation_or_every_scope(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    run.json("ingest", EXAMPLE, "--org", "other", "--user", "bo")
    every = run.json("backfill-passages")
    assert sorted(every["scopes"], key=lambda s: s["scope"]) == [
        {"scope": "/".join(SCOPE[1::2]), "rounds": 0},
        {"scope": "other/bo", "rounds": 0},
    ]
    assert every["rounds"] == 0
    assert [s["scope"] for s in run.json("backfill-passages", "--org", "other")["scopes"]] == ["other/bo"]
    code, out, _ = run("backfill-passages")
    assert code == 0 and "2 scopes: nothing to backfill" in out
    code, out, _ = run("backfill-passages", "--org", SCOPE[1])
    assert code == 0 and "1 scope: nothing to backfill" in out
    code, _, err = run("backfill-passages", "--org", "nope")
    assert code == 1 and "nope" in err and "other" in err
    code, _, err = run("backfill-passages", "--user", "bo")
    assert code == 2 and "--user needs --org" in err


def test_question_date_hides_later_sessions(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    hits = run.json("search", "Denver", *SCOPE, "--question-date", "2024-03-01")["hits"]
    dates = [h["date"] for h in hits]
    assert dates and all(d < "2024-03-01" for d in dates)


def test_context_respects_the_budget_and_renders_dates(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    ctx = run.json("context", "vegetarian dinners", *SCOPE, "--budget", "200")
    assert 0 < ctx["token_count"] <= 200
    code, out, _ = run("context", "vegetarian dinners", *SCOPE, "--budget", "200")
    assert code == 0 and out == ctx["text"]
    assert "### Session" in out


def test_reading_an_unknown_user_says_so_and_suggests_the_close_ones(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    for command in (["search", "anything"], ["context", "anything"], ["sessions"], ["export"], ["facts"]):
        code, out, err = run(*command, "--org", "acme", "--user", "anne")
        assert code == 1 and out == "", command
        assert "no memory stored for acme/anne" in err and "did you mean acme/ann?" in err, command
    code, out, _ = run("stats", "--org", "acme", "--user", "anne", "--json")
    assert code == 1
    error = json.loads(out)["error"]
    assert error["code"] == "not_found" and error["where"] == "--user" and "acme/ann" in error["message"]
    code, _, err = run("stats", "--org", "acmee")
    assert code == 1 and "no organisation 'acmee'" in err and "acme" in err


def test_read_commands_never_create_the_store_root(run: Run) -> None:
    for command in (["search", "x", *SCOPE], ["stats"], ["sessions", *SCOPE], ["facts", *SCOPE]):
        run(*command)
    assert not run.root.exists()


def test_an_organisation_on_an_empty_root_is_not_found_by_every_command_over_scopes(run: Run) -> None:
    # stats and backfill-passages select their scopes alike: nothing stored is "no such organisation", not an
    # empty success
    for command in ("stats", "backfill-passages"):
        code, out, err = run(command, "--org", "acme")
        assert code == 1 and out == "", command
        assert "no organisation 'acme'" in err and "stored: none" in err, command
    code, _, err = run("stats")
    assert code == 0 and "no scopes under" in err
    assert not run.root.exists()


# -- administration ------------------------------------------------------------------------------------------------------
def test_stats_without_a_scope_lists_every_scope(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    run.json("ingest", EXAMPLE, "--org", "other", "--user", "bo")
    listed = run.json("stats")
    assert sorted((s["scope"]["org_id"], s["scope"]["user_id"]) for s in listed) == [
        ("acme", "ann"),
        ("other", "bo"),
    ]
    assert [s["scope"]["org_id"] for s in run.json("stats", "--org", "other")] == ["other"]
    code, out, _ = run("stats")
    assert code == 0 and "acme/ann" in out and "other/bo" in out


def test_sessions_lists_ids_oldest_first(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    listed = run.json("sessions", *SCOPE)["sessions"]
    by_date = sorted(example_sessions(), key=lambda s: s["date"])
    assert [s["id"] for s in listed] == [s["session_id"] for s in by_date]


def test_forget_needs_yes_and_then_erases(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    code, _, err = run("forget", *SCOPE)
    assert code == 2 and "--yes" in err
    assert counts(run)[0] > 0
    code, out, _ = run("forget", *SCOPE, "--yes")
    assert code == 0 and "erased acme/ann" in out
    assert run.json("stats") == []


@pytest.mark.parametrize(
    ("command", "module", "extra"), [("serve", "fastapi", "server"), ("mcp", "mcp", "mcp")]
)
def test_servers_without_their_extra_say_what_to_install(
    run: Run, monkeypatch: pytest.MonkeyPatch, command: str, module: str, extra: str
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a)
    )
    code, _, err = run(command)
    assert code == 2
    assert f"pip install 'graphrecall[{extra}]'" in err


# -- real processes ------------------------------------------------------------------------------------------------------
def graphrecall(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphrecall", *map(str, args), "--embedder", "hashing"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_subprocess_gets_exit_2_and_one_line_for_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "history.json"
    bad.write_text(
        json.dumps([{"session_id": "s", "date": "2024-01-01", "messages": [{"role": "bot", "content": "x"}]}])
    )
    proc = graphrecall("ingest", bad, *SCOPE, "--root", tmp_path / "store")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "graphrecall: error: history.json: sessions[0].messages[0].role: 'bot' is not one of user, assistant, "
        "system, tool, document"
    ]
    debug = graphrecall("ingest", bad, *SCOPE, "--root", tmp_path / "store", "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_the_console_script_runs(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("graphrecall")
    if not script.exists():
        pytest.skip("the graphrecall console script is not installed in this environment")
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "ingest" in proc.stdout and "search" in proc.stdout


def test_a_store_held_by_another_process_is_reported_busy_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from graphrecall import Memory
                from graphrecall.embed import HashingEmbedder
                with Memory.open({str(root)!r}, embedder=HashingEmbedder(64)) as m:
                    m.add_session(("acme", "ann"), [{{"role": "user", "content": "hi"}}], session_id="s",
                                  date="2024-01-01")
                    print("ready", flush=True)
                    sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        code, _, err = Run(root, capsys)("stats", *SCOPE)
        assert code == 3
        assert len(err.strip().splitlines()) == 1
        assert "store busy" in err and "acme/ann" in err
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)


def test_a_bad_question_date_names_the_flag(run: Run) -> None:
    code, out, err = run("search", "hello", *SCOPE, "--question-date", "someday")
    assert code == 2 and out == ""
    assert err.startswith("graphrecall: error: --question-date:") and "'someday'" in err


# -- only what a command needs -------------------------------------------------------------------------------------------
class _SameIdAsTheDefault:
    """Vectors from the hashing embedder under the default model's id and size, so that a store written without
    loading the model opens with the CLI's default embedder."""

    id = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384

    def __init__(self) -> None:
        from graphrecall.embed import HashingEmbedder

        self._inner = HashingEmbedder(384)

    def embed(self, texts: Any, *, kind: Any = "document") -> Any:
        return self._inner.embed(texts, kind=kind)


_PROBE = """
import json, sys
HEAVY = ("torch", "sentence_transformers", "transformers")
root, report_path = sys.argv[1], sys.argv[2]
commands = json.loads(sys.argv[3])
report = []
def note(name, code):
    from graphrecall.embed.lazy import load_count
    report.append({"command": name, "code": code, "loads": load_count(),
                   "heavy": [m for m in HEAVY if m in sys.modules]})
import graphrecall
with graphrecall.Memory.open(root) as m:
    m.stats(("acme", "ann"))
note("import graphrecall + Memory.open + stats", 0)
from graphrecall import cli
for argv in commands:
    note(" ".join(argv[:2]), cli.main([*argv, "--root", root]))
open(report_path, "w").write(json.dumps(report))
"""


def test_commands_that_do_not_embed_never_load_the_model(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with Memory.open(root, embedder=_SameIdAsTheDefault()) as mem:
        for user in ("ann", "bob"):
            mem.add_sessions(("acme", user), [s for s in example_sessions()[:2]])  # type: ignore[misc]
    scope = ["--org", "acme", "--user", "ann"]
    no_model = [
        ["stats"],
        ["stats", *scope],
        ["sessions", *scope],
        ["export", *scope, "-o", str(tmp_path / "out.json")],
        ["facts", *scope],
        ["entities", *scope],
        ["events", *scope],
        ["erase", *scope, "--matching", "beagle", "--dry-run"],
        ["history", "no-such-fact", *scope],  # not stored: exit 1
        ["answer", "where do I live?", *scope],  # no LLM configured: an error, before anything loads
        ["ingest", str(EXAMPLE), *scope, "--extract"],  # the same error for extraction
        ["search", "beagle", "--org", "acme", "--user", "anne"],  # unknown user
        ["--help"],
        ["--version"],
        ["forget", "--org", "acme", "--user", "bob", "--yes"],
    ]
    embeds = [["search", "beagle puppy", *scope]]
    report_path = tmp_path / "report.json"
    env = {k: v for k, v in __import__("os").environ.items() if k != "GRAPHRECALL_LLM"}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(root), str(report_path), json.dumps(no_model + embeds)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    *quiet, search = report
    assert [r["code"] for r in quiet] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 1, 0, 0, 0]
    for r in quiet:
        assert r["loads"] == 0 and r["heavy"] == [], r
    assert (
        search["code"] == 0 and search["loads"] == 1 and "torch" in search["heavy"]
    )  # the control: it can fail


def test_a_terminal_hears_once_that_the_model_is_loading(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphrecall.embed.lazy import LoadOnce

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    remove = cli._announce_model_loads(quiet=False)
    try:
        loader: LoadOnce[int] = LoadOnce(lambda: 1, what="embedding model")
        loader.get()
        loader.get()
    finally:
        remove()
    assert capsys.readouterr().err == "graphrecall: loading the embedding model…\n"
    remove = cli._announce_model_loads(quiet=True)  # --quiet: nothing
    LoadOnce(lambda: 1, what="embedding model").get()
    remove()
    assert capsys.readouterr().err == ""


def test_version_and_defaults_in_help(run: Run) -> None:
    code, out, _ = run("--version")
    assert code == 0 and out.strip() == f"graphrecall {__import__('graphrecall').__version__}"
    code, out, _ = run("ingest", "--help")
    assert code == 0 and f"(default: {BATCH_SESSIONS})" in " ".join(out.split())
    assert "(default: None)" not in out and "(default: False)" not in out


# -- errors --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("llm", "code", "error_code", "words"),
    [
        (None, 2, "not_available", ["--llm", "GRAPHRECALL_LLM"]),
        ("openai:gpt-4o-mini", 2, "invalid_config", ["OPENAI_API_KEY"]),
        ("nosuch:model", 2, "invalid_config", ["unknown LLM provider", "nosuch"]),
        ("gpt-4o-mini", 2, "invalid_config", ["provider:model"]),
    ],
)
def test_llm_configuration_errors_are_named_and_exit_2(
    run: Run, monkeypatch: pytest.MonkeyPatch, llm: str | None, code: int, error_code: str, words: list[str]
) -> None:
    for name in ("GRAPHRECALL_LLM", "GRAPHRECALL_LLM_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    flags = ["--llm", llm] if llm else []
    got, out, err = run("answer", "where do I live?", *SCOPE, *flags)
    assert got == code and out == ""
    [line] = err.splitlines()
    assert "unexpected" not in line and all(w in line for w in words), line
    got, out, _ = run("answer", "where do I live?", *SCOPE, *flags, "--json")
    assert got == code
    error = json.loads(out)["error"]
    assert error["code"] == error_code and set(error) == {"code", "message", "where"}


def test_an_unreachable_llm_fails_at_once_naming_the_url(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    code, _, err = run(
        "answer", "where do I live?", *SCOPE, "--llm", "ollama:llama3.1", "--llm-base-url", url
    )
    assert time.monotonic() - started < 5
    assert code == 1 and url in err and "cannot reach the LLM" in err and "unexpected" not in err


def test_usage_errors_are_json_under_json(run: Run) -> None:
    code, out, err = run("search", *SCOPE, "--json")  # no query
    assert code == 2 and err == ""
    assert json.loads(out)["error"]["code"] == "invalid_input"


# -- what ingest fills in, how things are printed ----------------------------------------------------------------------
def test_a_plain_message_list_says_which_session_and_date_it_got(run: Run, tmp_path: Path) -> None:
    chat = tmp_path / "monday-chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "I moved to Lisbon."}]))
    code, _, err = run("ingest", chat, *SCOPE)
    assert code == 0
    assert "plain message list" in err and "'monday-chat'" in err and "modification time" in err
    assert re.search(r"dated \d{4}-\d\d-\d\d \d\d:\d\d \(", err)
    code, _, err = run("ingest", chat, "--org", "acme", "--user", "bo", "--date", "2024-05-01T10:30:15")
    assert code == 0 and "dated 2024-05-01 10:30 (--date)" in err
    code, out, _ = run("sessions", "--org", "acme", "--user", "bo")
    assert code == 0 and out.startswith("2024-05-01 10:30  monday-chat")


def test_stats_for_one_scope_reads_as_a_table(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    code, out, _ = run("stats", *SCOPE)
    assert code == 0 and "{" not in out
    lines = dict(line.split(None, 1) for line in out.splitlines() if not line.startswith("on disk"))
    assert lines["scope"] == "acme/ann" and int(lines["sessions"]) == len(example_sessions())
    assert lines["embedder"].endswith("(64 dimensions)")
    assert re.search(r"^on disk\s+\d+ KB$", out, re.M)  # a small scope is kilobytes, not "0.0 MB"
    assert cli.disk_size(2_500_000) == "2.5 MB"


def test_messages_too_long_to_embed_in_full_are_reported(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from graphrecall.embed.lazy import load_count

    before = load_count()
    window = cli._embedding_window(argparse.Namespace(embedder="default"))
    assert window is not None and window.tokens == 256
    assert load_count() == before  # the model's files, not the model
    monkeypatch.setattr(cli, "_embedding_window", lambda args: window)
    long = " ".join(f"word{i}" for i in range(window.max_chars // 6))  # past MAX_PASSAGES windows
    history = tmp_path / "h.json"
    history.write_text(
        json.dumps(
            [{"session_id": "s1", "date": "2024-01-01", "messages": [{"role": "user", "content": long},
                                                                      {"role": "user", "content": "short"}]}]
        )
    )  # fmt: skip
    code, _, err = run("ingest", history, *SCOPE)
    assert code == 0 and "1 message(s) are longer than the 128 passages the embedding model reads" in err
    code, _, err = run("ingest", EXAMPLE, "--org", "acme", "--user", "bo")
    assert code == 0 and "window" not in err


def test_a_reader_that_stops_reading_is_not_an_error(run: Run) -> None:
    """``graphrecall stats | head -1``: the reader goes away before we write; we stop quietly, exit 0."""
    run.json("ingest", EXAMPLE, *SCOPE)
    for user in ("bob", "cy"):
        run.json("ingest", EXAMPLE, "--org", "acme", "--user", user)
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphrecall", "stats", "--root", str(run.root), "--embedder", "hashing"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like head -1 that has its line, before the command has written anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == ""


def test_supersede_replaces_a_fact_by_hand_and_history_shows_both(run: Run) -> None:
    """The CLI had no supersede although Python and HTTP did: the operation table gives it one."""
    old = run.json("add-fact", "The user lives in Berlin.", "--kind", "attribute", *SCOPE)["fact"]["id"]
    new = run.json("add-fact", "The user lives in Lisbon.", "--kind", "attribute", *SCOPE)["fact"]["id"]
    replaced = run.json("supersede", old, new, *SCOPE, "--reason", "moved")
    assert replaced["id"] == old and replaced["superseded_by"] == new
    assert [f["id"] for f in run.json("history", new, *SCOPE)["versions"]] == [old, new]
    code, out, err = run("supersede", old, new, *SCOPE)
    assert code == 2 and "already superseded" in err and out == ""
    code, _, err = run("supersede", old, "f_missing", *SCOPE)
    assert code == 1 and "f_missing" in err


def test_session_shows_one_session_with_its_messages(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    first = example_sessions()[0]
    shown = run.json("session", first["session_id"], *SCOPE)
    assert [m["content"] for m in shown["messages"]] == [m["content"] for m in first["messages"]]
    code, out, _ = run("session", first["session_id"], *SCOPE)
    assert code == 0 and first["session_id"] in out
    code, _, err = run("session", "no-such-session", *SCOPE)
    assert code == 1 and "no-such-session" in err


def test_search_json_is_what_the_http_api_returns(run: Run) -> None:
    run.json("ingest", EXAMPLE, *SCOPE)
    found = run.json("search", "dog", *SCOPE, "-k", "2")
    assert set(found) == {"query", "hits"} and found["query"] == "dog" and len(found["hits"]) == 2
