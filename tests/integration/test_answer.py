"""``Memory.answer`` and ``graphrecall answer``: which LLM is used, input validation, the Answer object, and the
CLI talking real HTTP (OpenAI SDK) to a loopback fake server whose replies mimic a tool-capable model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.fakeserver import FakeHTTPServer, Recorded, Reply

from graphrecall import Memory, NotAvailable, Scope
from graphrecall.cli import main as cli_main
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import InvalidInput
from graphrecall.llm import ScriptedLLM, Step
from graphrecall.read import Answer


def _store(mem: Memory, scope: Scope) -> None:
    mem.add_session(
        scope,
        [
            {"role": "user", "content": "My sister Ana moved to Porto last month."},
            {"role": "assistant", "content": "Nice!"},
        ],
        session_id="s1",
        date="2024-03-01T10:00:00",
    )


def _script() -> ScriptedLLM:
    return ScriptedLLM(
        [
            Step("Retrieved memory", {"verdict": "YES", "evidence_ids": ["s1@0"]}),
            Step("Memory excerpts", "NOTES:\n[s1@0] Ana moved to Porto\nANSWER: Porto.\nEVIDENCE: [s1@0]"),
        ]
    )


def test_answer_returns_a_complete_answer_object(mem: Memory, scope: Scope) -> None:
    _store(mem, scope)
    ans = mem.answer(scope, "Where does my sister live?", question_date="2024-04-01", llm=_script())
    assert isinstance(ans, Answer)
    assert (ans.text, ans.mode, ans.verdict, ans.abstained) == ("Porto.", "recall", "YES", False)
    assert ans.question_date is not None and ans.question_date.isoformat() == "2024-04-01T00:00:00"
    assert [c.hit_id for c in ans.citations] == ["s1@0"] and ans.citations[0].date is not None
    assert set(ans.stages) == {"retrieve", "verify", "read", "tools"} and ans.usage.calls == 2
    json.loads(ans.model_dump_json())  # serialisable for HTTP/CLI


def test_the_argument_llm_wins_over_the_memorys_own(mem: Memory, scope: Scope) -> None:
    _store(mem, scope)
    own = ScriptedLLM([])
    mem.llm = own
    mem.answer(scope, "Where does my sister live?", question_date="2024-04-01", llm=_script())
    assert own.calls == []
    mem.llm = _script()
    assert mem.answer(scope, "Where does my sister live?", question_date="2024-04-01").text == "Porto."


def test_no_llm_anywhere_is_not_available(mem: Memory, scope: Scope, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    mem.llm = None
    with pytest.raises(NotAvailable, match="GRAPHRECALL_LLM"):
        mem.answer(scope, "Where does my sister live?")


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"question": "  "}, "question"),
        ({"mode": "poetry"}, "mode"),
        ({"question_date": "last tuesday"}, "question_date"),
        ({"max_tool_steps": -1}, "max_tool_steps"),
        ({"token_budget": 10}, "token_budget"),
    ],
)
def test_bad_input_is_rejected_with_the_field_named(
    mem: Memory, scope: Scope, kwargs: dict[str, Any], where: str
) -> None:
    args: dict[str, Any] = {"question": "Where does my sister live?", "llm": ScriptedLLM([]), **kwargs}
    with pytest.raises(InvalidInput) as err:
        mem.answer(scope, **args)
    assert err.value.where == where


def _completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "c", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }  # fmt: skip


def _fake_model(req: Recorded) -> Reply:
    """Verifier: JSON. First reader turn: a native date_math tool call. After the tool result: the answer."""
    body = req.body
    if "response_format" in body:
        return 200, _completion(json.dumps({"verdict": "YES", "missing": "", "evidence_ids": ["s1@0"]}))
    if any(m.get("role") == "tool" for m in body["messages"]):
        return 200, _completion("ANSWER: Porto, since 2024-03-01.\nEVIDENCE: [s1@0]")
    call = {"id": "t1", "type": "function",
            "function": {"name": "date_math", "arguments": '{"op": "weekday", "date": "2024-03-01"}'}}  # fmt: skip
    return 200, _completion(None, [call])


def test_cli_answer_prints_answer_mode_abstention_and_dated_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("openai")
    root = tmp_path / "store"
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        _store(mem, Scope(org_id="acme", user_id="alice"))
    base = ["--root", str(root), "--embedder", "hashing", "--org", "acme", "--user", "alice"]
    with FakeHTTPServer(_fake_model) as srv:
        url = srv.url + "/v1"
        code = cli_main(["answer", "Where does my sister live?", *base, "--question-date", "2024-04-01",
                         "--llm", "openai:fake-model", "--llm-base-url", url])  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0, out
        assert out.startswith("Porto, since 2024-03-01.")
        assert "mode: recall" in out and "abstained: no" in out and "1 tool calls" in out
        assert "[s1@0] 2024-03-01 10:00  session s1" in out  # dates to the minute in human output
        tools_sent = [b.get("tools") for b in srv.bodies("/chat/completions") if "response_format" not in b]
        assert tools_sent[0] and {t["function"]["name"] for t in tools_sent[0]} >= {"date_math", "timeline"}
        code = cli_main(["answer", "Where does my sister live?", *base, "--question-date", "2024-04-01",
                         "--llm", "openai:fake-model", "--llm-base-url", url, "--json"])  # fmt: skip
        data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["abstained"] is False and data["tool_trace"][0]["name"] == "date_math"
    assert data["usage"]["input_tokens"] > 0


def test_cli_answer_without_an_llm_explains_how_to_configure_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    code = cli_main(
        ["answer", "Where?", "--root", str(tmp_path), "--embedder", "hashing", "--org", "a", "--user", "b"]
    )
    assert code == 2
    assert "GRAPHRECALL_LLM" in capsys.readouterr().err
    code = cli_main(["answer", "Where?", "--root", str(tmp_path), "--embedder", "hashing", "--org", "a", "--user", "b",
                     "--llm", "nonsense"])  # fmt: skip
    assert code == 2 and "--llm" in capsys.readouterr().err
