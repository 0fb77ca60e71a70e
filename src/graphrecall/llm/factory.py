"""Build an ``LLM`` from configuration: ``GRAPHRECALL_LLM=provider:model`` and ``GRAPHRECALL_LLM_BASE_URL``.

One string picks the provider and model so that the CLI, the server and the benchmarks are configured the
same way. The model part may itself contain colons (``ollama:llama3.1:8b``); only the first one splits.
"""

from __future__ import annotations

import os
import socket
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from graphrecall.errors import Unreachable

from .base import LLM
from .errors import LLMError, LLMNotConfigured

ENV_SPEC = "GRAPHRECALL_LLM"
ENV_BASE_URL = "GRAPHRECALL_LLM_BASE_URL"
# How patient the client is with the server (docs/llm.md, "Slow servers"): the CLI and the HTTP server build their
# LLM here, so these are how their users fit a slow local model without code. Unset: each provider's default.
ENV_KNOBS: dict[str, tuple[str, type[float] | type[int]]] = {
    "GRAPHRECALL_LLM_TIMEOUT_S": ("timeout", float),
    "GRAPHRECALL_LLM_MAX_RETRIES": ("max_retries", int),
    "GRAPHRECALL_LLM_CONCURRENCY": ("concurrency", int),
}
PROVIDERS = ("openai", "anthropic", "ollama")
# Where each provider's client connects when no base URL is given, and the variables its SDK reads instead.
DEFAULT_ENDPOINTS = {
    "openai": ("https://api.openai.com/v1", "OPENAI_BASE_URL"),
    "anthropic": ("https://api.anthropic.com", "ANTHROPIC_BASE_URL"),
    "ollama": ("http://127.0.0.1:11434", "OLLAMA_HOST"),
}


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
    kw = {**env_knobs(), **kw}
    if provider == "openai":
        from .openai import OpenAILLM

        return OpenAILLM(model, base_url=base_url, **kw)
    if provider == "anthropic":
        from .anthropic import AnthropicLLM

        return AnthropicLLM(model, base_url=base_url, **kw)
    from .ollama import OllamaLLM

    return OllamaLLM(model, host=base_url, **kw)


def env_knobs() -> dict[str, Any]:
    """The provider keywords set in the environment (``ENV_KNOBS``); a value that is not a number, or is
    negative (zero for the timeout and the concurrency), raises ``LLMConfigError`` naming the variable."""
    out: dict[str, Any] = {}
    for var, (name, kind) in ENV_KNOBS.items():
        raw = os.environ.get(var, "").strip()
        if not raw:
            continue
        try:
            value = kind(raw)
        except ValueError:
            raise LLMConfigError(f"{var}={raw!r} is not a number") from None
        if value < 0 or (value == 0 and name != "max_retries"):
            raise LLMConfigError(f"{var}={raw!r} must be {'>= 0' if name == 'max_retries' else '> 0'}")
        out[name] = value
    return out


def llm_from_settings_or_none(spec: str | None = None, base_url: str | None = None, **kw: Any) -> LLM | None:
    """Like ``llm_from_settings`` but ``None`` when nothing is configured (bad configuration still raises)."""
    try:
        return llm_from_settings(spec, base_url, **kw)
    except LLMNotConfigured:
        if (spec if spec is not None else os.environ.get(ENV_SPEC, "")).strip():
            raise
        return None


def endpoint(spec: str | None = None, base_url: str | None = None) -> str:
    """The URL ``llm_from_settings(spec, base_url)`` will send requests to (same precedence as the providers)."""
    provider, _ = parse_spec(spec if spec is not None else os.environ.get(ENV_SPEC, ""))
    default, sdk_env = DEFAULT_ENDPOINTS[provider]
    url = base_url or os.environ.get(ENV_BASE_URL) or os.environ.get(sdk_env) or default
    if "://" not in url:  # OLLAMA_HOST is often just host:port
        url = f"http://{url}"
    if provider == "ollama" and urlsplit(url).port is None and url.count(":") == 1:
        url = f"{url.rstrip('/')}:11434"  # the Ollama client's port when the host names none
    return url


def check_reachable(url: str, timeout: float = 3.0) -> None:
    """Open (and close) a TCP connection to ``url``'s host within ``timeout`` s, or raise ``Unreachable`` naming it.

    A provider's client retries dropped connections with backoff, which is right inside a long extraction but makes
    a command line wait ~12 s to say that nothing listens at the URL; one cheap probe up front fails at once
    instead. Skipped when a proxy is configured for the URL, since the client then never connects directly."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host or (urllib.request.getproxies() and not urllib.request.proxy_bypass(host)):
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise Unreachable(f"the LLM URL {url!r} has an invalid port") from None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        reason = "timed out" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
        raise Unreachable(f"cannot reach the LLM at {url} ({host}:{port}: {reason})") from None
