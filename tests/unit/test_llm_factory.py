"""llm_from_settings: one GRAPHRECALL_LLM string picks provider and model."""

from __future__ import annotations

import pytest

from graphrecall.llm import (
    LLM,
    LLMConfigError,
    LLMNotConfigured,
    llm_from_settings,
    llm_from_settings_or_none,
)
from graphrecall.llm.factory import parse_spec


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GRAPHRECALL_LLM", "GRAPHRECALL_LLM_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OLLAMA_HOST", "GRAPHRECALL_LLM_TIMEOUT_S",
                "GRAPHRECALL_LLM_MAX_RETRIES", "GRAPHRECALL_LLM_CONCURRENCY"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:gpt-4o-mini", ("openai", "gpt-4o-mini")),
        ("Anthropic:claude-3-5-haiku-latest", ("anthropic", "claude-3-5-haiku-latest")),
        ("ollama:llama3.1:8b", ("ollama", "llama3.1:8b")),  # only the first colon splits
        ("  openai : qwen  ", ("openai", "qwen")),
    ],
)
def test_parse_spec(spec: str, expected: tuple[str, str]) -> None:
    assert parse_spec(spec) == expected


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", ":gpt-4o", "openai"])
def test_malformed_specs_are_rejected_with_an_example(spec: str) -> None:
    with pytest.raises(LLMConfigError, match="expected 'provider:model'"):
        parse_spec(spec)


def test_unknown_provider_is_named() -> None:
    with pytest.raises(LLMConfigError, match=r"unknown LLM provider 'gemini'.*openai, anthropic, ollama"):
        llm_from_settings("gemini:pro")


def test_nothing_configured_raises_llm_not_configured() -> None:
    with pytest.raises(LLMNotConfigured, match="GRAPHRECALL_LLM"):
        llm_from_settings()
    assert llm_from_settings_or_none() is None


def test_environment_configures_an_openai_compatible_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphrecall.llm.openai import OpenAILLM

    monkeypatch.setenv("GRAPHRECALL_LLM", "openai:qwen2.5-coder")
    monkeypatch.setenv("GRAPHRECALL_LLM_BASE_URL", "http://127.0.0.1:8181/v1")

    llm = llm_from_settings()

    assert isinstance(llm, OpenAILLM) and isinstance(llm, LLM)
    assert (llm.model, llm.base_url) == ("qwen2.5-coder", "http://127.0.0.1:8181/v1")


@pytest.mark.parametrize(
    ("provider", "env"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")]
)
def test_a_hosted_provider_without_key_or_base_url_is_not_configured(provider: str, env: str) -> None:
    pytest.importorskip(provider)
    with pytest.raises(LLMNotConfigured, match=env):
        llm_from_settings(f"{provider}:some-model")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_server_of_ones_own_needs_no_key(provider: str) -> None:
    """A base URL without a key: the SDK is given a placeholder, and errors name the provider and the model."""
    pytest.importorskip(provider)
    llm = llm_from_settings(f"{provider}:local-model", base_url="http://127.0.0.1:9/v1")
    assert llm.what == f"{provider} local-model"  # type: ignore[attr-defined]


def test_arguments_win_and_extra_keywords_reach_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRECALL_LLM", "openai:ignored")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")

    llm = llm_from_settings("anthropic:claude-3-5-haiku-latest", max_tokens=123)

    from graphrecall.llm.anthropic import AnthropicLLM

    assert isinstance(llm, AnthropicLLM)
    assert llm.max_tokens == 123
    assert "sk-ant-test" not in repr(llm)


def test_ollama_base_url_becomes_the_host() -> None:
    from graphrecall.llm.ollama import OllamaLLM

    llm = llm_from_settings("ollama:llama3.1", base_url="http://10.0.0.2:11434")

    assert isinstance(llm, OllamaLLM) and llm.host == "http://10.0.0.2:11434"


def test_the_environment_sets_how_patient_the_client_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow local model is fitted from the environment (the CLI and the server have no other way); an explicit
    keyword still wins, and unset variables leave each provider's default (generous for a self-hosted server)."""
    from graphrecall.llm.openai import SELF_HOSTED_TIMEOUT_S, OpenAILLM

    url = "http://127.0.0.1:8181/v1"
    default = llm_from_settings("openai:qwen", base_url=url)
    assert isinstance(default, OpenAILLM) and default.policy.timeout == SELF_HOSTED_TIMEOUT_S
    monkeypatch.setenv("GRAPHRECALL_LLM_TIMEOUT_S", "1800")
    monkeypatch.setenv("GRAPHRECALL_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("GRAPHRECALL_LLM_CONCURRENCY", "1")
    llm = llm_from_settings("openai:qwen", base_url=url)
    assert isinstance(llm, OpenAILLM)
    assert (llm.policy.timeout, llm.policy.max_retries, llm.limiter.concurrency) == (1800.0, 0, 1)
    assert llm_from_settings("openai:qwen", base_url=url, timeout=5.0).policy.timeout == 5.0  # type: ignore[attr-defined]
    for value, problem in (("soon", "is not a number"), ("0", "must be > 0"), ("-1", "must be > 0")):
        monkeypatch.setenv("GRAPHRECALL_LLM_TIMEOUT_S", value)
        with pytest.raises(LLMConfigError, match=f"GRAPHRECALL_LLM_TIMEOUT_S={value!r} {problem}"):
            llm_from_settings("openai:qwen", base_url=url)
