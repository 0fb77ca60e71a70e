"""The LLM layer: one async interface over OpenAI(-compatible), Anthropic, Ollama and a scripted test double.

Provider classes are imported lazily (``from graphrecall.llm.openai import OpenAILLM`` or via
``llm_from_settings``) so that importing graphrecall never requires an SDK that is not installed.
"""

from .base import LLM, BaseLLM, ChatMessage, LLMResponse, MessagesIn, ToolCall, ToolSpec, run_sync
from .errors import (
    LLMError,
    LLMNotConfigured,
    LLMRateLimited,
    LLMTimeout,
    StructuredOutputError,
    UnexpectedPrompt,
)
from .factory import LLMConfigError, llm_from_settings, llm_from_settings_or_none, parse_spec
from .scripted import ScriptedCall, ScriptedLLM, Step
from .usage import PRICES, CallRecord, Usage, UsageTracker, usage_purpose

__all__ = [
    "LLM",
    "PRICES",
    "BaseLLM",
    "CallRecord",
    "ChatMessage",
    "LLMConfigError",
    "LLMError",
    "LLMNotConfigured",
    "LLMRateLimited",
    "LLMResponse",
    "LLMTimeout",
    "MessagesIn",
    "ScriptedCall",
    "ScriptedLLM",
    "Step",
    "StructuredOutputError",
    "ToolCall",
    "ToolSpec",
    "UnexpectedPrompt",
    "Usage",
    "UsageTracker",
    "llm_from_settings",
    "llm_from_settings_or_none",
    "parse_spec",
    "run_sync",
    "usage_purpose",
]


def __getattr__(name: str) -> object:
    """``from graphrecall.llm import OpenAILLM`` works too, importing the SDK only on first use."""
    lazy = {"OpenAILLM": "openai", "AnthropicLLM": "anthropic", "OllamaLLM": "ollama"}
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{lazy[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
