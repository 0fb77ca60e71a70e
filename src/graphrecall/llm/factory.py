"""Build an ``LLM`` from configuration: ``GRAPHRECALL_LLM=provider:model`` and ``GRAPHRECALL_LLM_BASE_URL``.

One string picks the provider and model so that the CLI, the server and the benchmarks are configured the
same way. The model part may itself contain colons (``ollama:llama3.1:8b``); only the first one splits.
"""

from __future__ import annotations

import os
from typing import Any

from .base import LLM
from .errors import LLMError, LLMNotConfigured

ENV_SPEC = "GRAPHRECALL_LLM"
ENV_BASE_URL = "GRAPHRECALL_LLM_BASE_URL"
PROVIDERS = ("openai", "anthropic", "ollama")


class LLMConfigError(LLMError, ValueError):
    """``GRAPHRECALL_LLM`` (or the spec passed in) is malformed or names an unknown provider."""


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``provider:model``; raise ``LLMConfigError`` with an example when it is not of that shape."""
    provider, sep, model = spec.strip().partition(":")
    provider, model = provider.strip().lower(), model.strip()
    if not sep or not provider or not model:
        raise LLMConfigError(
            f"malformed LLM spec {spec!r}: expected 'provider:model', e.g. 'openai:gpt-4o-mini', "
            "'anthropic:claude-3-5-haiku-latest' or 'ollama:llama3.1'"
        )
    if provider not in PROVIDERS:
        raise LLMConfigError(f"unknown LLM provider {provider!r} in {spec!r}; known: {', '.join(PROVIDERS)}")
    return provider, model


def llm_from_settings(spec: str | None = None, base_url: str | None = None, **kw: Any) -> LLM:
    """Build the configured LLM. Arguments win over the environment; ``kw`` goes to the provider class.

    Raises ``LLMNotConfigured`` when no spec is given and ``GRAPHRECALL_LLM`` is unset or empty, so callers
    can fall back to LLM-free behaviour with a clear message instead of an attribute error later.
    """
    spec = spec if spec is not None else os.environ.get(ENV_SPEC, "")
    if not spec.strip():
        raise LLMNotConfigured(
            f"no LLM configured: set {ENV_SPEC} (e.g. 'openai:gpt-4o-mini') and, for a local "
            f"OpenAI-compatible server, {ENV_BASE_URL}"
        )
    provider, model = parse_spec(spec)
    base_url = base_url or os.environ.get(ENV_BASE_URL) or None
    if provider == "openai":
        from .openai import OpenAILLM

        return OpenAILLM(model, base_url=base_url, **kw)
    if provider == "anthropic":
        from .anthropic import AnthropicLLM

        return AnthropicLLM(model, base_url=base_url, **kw)
    from .ollama import OllamaLLM

    return OllamaLLM(model, host=base_url, **kw)


def llm_from_settings_or_none(spec: str | None = None, base_url: str | None = None, **kw: Any) -> LLM | None:
    """Like ``llm_from_settings`` but ``None`` when nothing is configured (bad configuration still raises)."""
    try:
        return llm_from_settings(spec, base_url, **kw)
    except LLMNotConfigured:
        if (spec if spec is not None else os.environ.get(ENV_SPEC, "")).strip():
            raise
        return None
