"""graphrecall serve takes its model from GRAPHRECALL_LLM, so extract: true and answers work on a server, as
docs/http-api.md says; a setting that cannot be used stops the server before it binds."""

from __future__ import annotations

import pytest

from graphrecall.server.auth import ServerConfigError
from graphrecall.server.serve import server_llm


def test_no_setting_means_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHRECALL_LLM", raising=False)
    assert server_llm() is None


def test_the_setting_names_the_servers_model(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ollama")
    monkeypatch.setenv("GRAPHRECALL_LLM", "ollama:qwen2.5-coder:1.5b")
    llm = server_llm()
    assert llm is not None and llm.model == "qwen2.5-coder:1.5b"


def test_an_unusable_setting_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRECALL_LLM", "no-such-provider:model")
    with pytest.raises(ServerConfigError, match="GRAPHRECALL_LLM cannot be used"):
        server_llm()
