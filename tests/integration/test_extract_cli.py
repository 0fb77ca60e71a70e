"""``graphrecall ingest --extract``, ``extract`` and ``facts`` against an OpenAI-compatible fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.fakeserver import FakeHTTPServer, Recorded

from graphrecall.cli import main


def completion(content: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {
        "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(content)},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }  # fmt: skip


def handler(req: Recorded) -> tuple[int, dict[str, Any]]:
    prompt = json.dumps(req.body)
    if "New facts, each followed" in prompt:
        return completion(
            {"decisions": [{"fact": "n1", "decision": "UPDATE", "target": "c1", "reason": "moved"}]}
        )
    city = "Berlin" if "Berlin" in prompt else "Munich"
    return completion(
        {"facts": [{"text": f"The user lives in {city}", "kind": "attribute", "message_ids": ["m1"]}]}
    )


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    one = [
        {
            "session_id": "s1",
            "date": "2024-01-10T10:00:00",
            "messages": [{"role": "user", "content": "I live in Munich"}],
        }
    ]
    two = [
        {
            "session_id": "s2",
            "date": "2024-05-10T10:00:00",
            "messages": [{"role": "user", "content": "I live in Berlin now"}],
        }
    ]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(one))
    b.write_text(json.dumps(two))
    return a, b


def test_ingest_extract_then_facts(
    tmp_path: Path, files: tuple[Path, Path], capsys: Any, monkeypatch: Any
) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    base = ["--root", str(tmp_path / "store"), "--embedder", "hashing", "--org", "o", "--user", "u"]
    with FakeHTTPServer(handler) as srv:
        llm = ["--llm", "openai:fake", "--llm-base-url", srv.url + "/v1"]
        assert main(["ingest", str(files[0]), *base, "--extract", *llm]) == 0
        out = capsys.readouterr().out
        assert "extract: 1/1 sessions done" in out and "LLM: 1 calls, 100 input + 20 output tokens" in out
        # the second file is ingested raw, then extracted by the extract command
        assert main(["ingest", str(files[1]), *base]) == 0
        capsys.readouterr()
        assert main(["extract", *base, *llm, "--json"]) == 0
        r = json.loads(capsys.readouterr().out)
        # "lives in Berlin" vs "lives in Munich" with 64-dim hashing vectors: a candidate only if similar enough
        assert r["sessions_done"] == 1 and r["facts_added"] == 1 and r["llm_calls"] in (1, 2)
    assert main(["facts", *base]) == 0
    current = capsys.readouterr().out
    assert "The user lives in Berlin" in current
    assert main(["facts", *base, "--all", "--json"]) == 0
    every = json.loads(capsys.readouterr().out)["facts"]
    assert {f["text"] for f in every} == {"The user lives in Munich", "The user lives in Berlin"}
    berlin = next(f for f in every if "Berlin" in f["text"])
    assert main(["history", berlin["id"], *base, "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)["versions"]
    assert chain[-1]["id"] == berlin["id"] and all("lives in" in f["text"] for f in chain)
    assert main(["history", "no-such-fact", *base]) == 1
    assert "no-such-fact" in capsys.readouterr().err
    for command in ("entities", "events"):  # this fake model extracts neither
        assert main([command, *base]) == 0
        assert f"no {command} for o/u" in capsys.readouterr().err


def test_extract_without_an_llm_is_a_usage_error(tmp_path: Path, files: tuple[Path, Path], capsys: Any,
                                                 monkeypatch: Any) -> None:  # fmt: skip
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    base = ["--root", str(tmp_path / "store"), "--embedder", "hashing", "--org", "o", "--user", "u"]
    assert main(["ingest", str(files[0]), *base, "--extract"]) == 2
    assert "GRAPHRECALL_LLM" in capsys.readouterr().err
    assert main(["sessions", *base]) == 1  # nothing was ingested: the check runs first
    assert "no memory stored for o/u" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_a_background_extraction_that_failed_three_times_is_retried_by_the_extract_command(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """The queue gives up after three failed attempts and records why; ``graphrecall extract`` then extracts the
    session, and every view of it (the queue's job, ``sessions``) says done, not the stale failure."""
    from graphrecall import Memory, Scope
    from graphrecall.embed import HashingEmbedder
    from graphrecall.extract import ExtractionConfig
    from graphrecall.llm import ScriptedLLM

    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    root, scope = tmp_path / "store", Scope(org_id="o", user_id="u")
    broken = ScriptedLLM(ordered=False)  # no rule matches: every extraction call fails
    cfg = ExtractionConfig(max_attempts=3, retry_backoff_s=0.0)
    with Memory.open(root, embedder=HashingEmbedder(64), llm=broken, extraction=cfg) as mem:
        turn = [{"role": "user", "content": "I live in Munich"}]
        mem.add_session(scope, turn, session_id="s1", date="2024-01-10", extract=True)
        assert mem.wait_for_extraction(timeout=60)
        (job,) = mem.extraction_jobs(scope)
        assert (job.status, job.attempts) == ("failed", 3)
        assert job.reason is not None and "UnexpectedPrompt" in job.reason
    base = ["--root", str(root), "--embedder", "hashing", "--org", "o", "--user", "u"]
    assert main(["sessions", *base]) == 0
    assert "s1  (extract: failed)" in capsys.readouterr().out
    with FakeHTTPServer(handler) as srv:
        assert (
            main(["extract", *base, "--llm", "openai:fake", "--llm-base-url", srv.url + "/v1", "--json"]) == 0
        )
        r = json.loads(capsys.readouterr().out)
    assert (r["sessions"], r["sessions_done"], r["sessions_failed"]) == (1, 1, 0)
    assert main(["sessions", *base]) == 0
    assert "s1  (extract: done)" in capsys.readouterr().out
    assert main(["facts", *base]) == 0
    assert "The user lives in Munich" in capsys.readouterr().out
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        (job,) = mem.extraction_jobs(scope)
        assert (job.status, job.reason) == ("done", None)


def _three_scopes(tmp_path: Path, files: tuple[Path, Path]) -> list[str]:
    base = ["--root", str(tmp_path / "store"), "--embedder", "hashing"]
    for org, user in (("o", "u1"), ("o", "u2"), ("p", "u3")):
        assert main(["ingest", str(files[0]), *base, "--org", org, "--user", user]) == 0
    return base


def test_extract_many_scopes_reports_each_and_a_rerun_has_nothing_left(
    tmp_path: Path, files: tuple[Path, Path], capsys: Any, monkeypatch: Any
) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    base = _three_scopes(tmp_path, files)
    capsys.readouterr()
    with FakeHTTPServer(handler) as srv:
        llm = ["--llm", "openai:fake", "--llm-base-url", srv.url + "/v1"]
        assert main(["extract", *base, *llm, "--all-scopes", "--org", "o"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert sorted(line.split(":")[0] for line in lines) == ["o/u1", "o/u2"]
        assert all("1/1 sessions done" in line for line in lines)
        listed = tmp_path / "scopes.txt"
        listed.write_text("# the rest\np/u3\n\no/u1\n")
        assert main(["extract", *base, *llm, "--scopes", str(listed), "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [r["scope"] for r in rows] == ["p/u3", "o/u1"]
        assert rows[0]["result"]["sessions_done"] == 1 and rows[1]["result"]["sessions"] == 0  # u1 was done
    assert main(["facts", *base, "--org", "p", "--user", "u3"]) == 0
    assert "The user lives in Munich" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--all-scopes", "--scopes", "x.txt"], "not both"),
        (["--all-scopes", "--org", "o", "--user", "u1"], "--user names one scope"),
        (["--all-scopes", "--session", "s1"], "--session needs one scope"),
        ([], "needs --org and --user"),
        (["--org", "o", "--user", "u1", "--ray"], "--ray runs many scopes"),
    ],
)
def test_extract_refuses_scope_options_that_mean_nothing(
    tmp_path: Path, extra: list[str], message: str, capsys: Any
) -> None:
    assert main(["extract", "--root", str(tmp_path), *extra]) == 2
    assert message in capsys.readouterr().err


def test_extract_names_listed_scopes_that_hold_nothing(
    tmp_path: Path, files: tuple[Path, Path], capsys: Any, monkeypatch: Any
) -> None:
    base = _three_scopes(tmp_path, files)
    listed = tmp_path / "scopes.txt"
    listed.write_text("o/u1\no/nobody\n")
    with FakeHTTPServer(handler) as srv:
        llm = ["--llm", "openai:fake", "--llm-base-url", srv.url + "/v1"]
        assert main(["extract", *base, *llm, "--scopes", str(listed)]) == 1
        assert "o/nobody" in capsys.readouterr().err
        listed.write_text("not-a-scope\n")
        assert main(["extract", *base, *llm, "--scopes", str(listed)]) == 2
        assert "line 1" in capsys.readouterr().err
