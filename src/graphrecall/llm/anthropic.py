"""Anthropic's Messages API through the official ``anthropic`` SDK.

Anthropic has no JSON mode; the reliable way to get structured output is a *forced tool call*: offer one tool
whose ``input_schema`` is the pydantic schema and set ``tool_choice`` to that tool. The tool input is then the
object, already parsed. System messages go to the top-level ``system`` parameter, and tool results travel as
``tool_result`` blocks inside a user message, since the API only knows the user and assistant roles.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any, ClassVar

from pydantic import BaseModel

from ._sdk import SdkLLM, import_sdk, resolve_key, stainless_error
from .base import ChatMessage, LLMResponse, ToolCall, ToolSpec, tool_name
from .errors import LLMError
from .usage import Usage, UsageTracker

PLACEHOLDER_KEY = "sk-ant-no-key-needed"


class AnthropicLLM(SdkLLM):
    """Claude models. ``max_tokens`` is the default output cap (the API requires one on every request)."""

    provider: ClassVar[str] = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        concurrency: int = 8,
        *,
        max_tokens: int = 4096,
        retry_base_delay: float = 0.5,
        usage: UsageTracker | None = None,
    ) -> None:
        anthropic = import_sdk("anthropic", "AnthropicLLM", "anthropic")
        self.base_url = base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        key = resolve_key(
            api_key,
            env="ANTHROPIC_API_KEY",
            base_url=base,
            placeholder=PLACEHOLDER_KEY,
            missing="AnthropicLLM: no API key; set ANTHROPIC_API_KEY or pass api_key=",
        )
        super().__init__(
            model,
            sdk=anthropic,
            client=lambda: anthropic.AsyncAnthropic(
                api_key=key, base_url=base, timeout=timeout, max_retries=0
            ),
            timeout=timeout,
            max_retries=max_retries,
            concurrency=concurrency,
            retry_base_delay=retry_base_delay,
            usage=usage,
        )
        self.max_tokens = max_tokens
        self._sends_temperature = _sdk_accepts(anthropic, "temperature")

    def __repr__(self) -> str:
        return f"AnthropicLLM(model={self.model!r})"

    def _translate(self, exc: Exception) -> LLMError | None:
        # 529 "overloaded" is Anthropic's transient 5xx; status_error already retries every 5xx.
        return stainless_error(self._sdk, exc, self.what)

    async def _send(self, client: Any, kwargs: dict[str, Any]) -> Any:
        return await client.messages.create(**kwargs)

    def _decode(self, raw: Any) -> LLMResponse:
        return _from_anthropic(raw, structured=None)

    def _tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]

    def _kwargs(
        self, messages: list[ChatMessage], temperature: float, max_tokens: int | None
    ) -> dict[str, Any]:
        system, converted = _to_anthropic(messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": converted,
            "max_tokens": max_tokens or self.max_tokens,
        }
        if self._sends_temperature:
            kwargs["temperature"] = temperature
        if system:
            kwargs["system"] = system
        return kwargs

    async def _structured(
        self,
        messages: list[ChatMessage],
        schema: type[BaseModel],
        *,
        temperature: float,
        max_tokens: int | None,
    ) -> LLMResponse:
        name = tool_name(schema.__name__)
        kwargs = self._kwargs(messages, temperature, max_tokens)
        kwargs["tools"] = [
            {
                "name": name,
                "description": f"Record the answer as a {schema.__name__} object.",
                "input_schema": schema.model_json_schema(),
            }
        ]
        kwargs["tool_choice"] = {"type": "tool", "name": name}
        return _from_anthropic(await self._request(kwargs), structured=name)


def _sdk_accepts(sdk: Any, param: str) -> bool:
    """Whether ``messages.create`` of the installed SDK takes ``param``.

    Recent SDKs dropped ``temperature`` (newer models reject it); older ones accept it. Sending it where the SDK
    no longer knows it would fail on every call, so it is sent only when the SDK still has it.
    """
    try:
        return param in inspect.signature(sdk.resources.messages.AsyncMessages.create).parameters
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - unknown SDK layout
        return False


def _to_anthropic(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """System text, and the remaining messages as alternating user/assistant turns of content blocks."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        if m.role == "tool":
            blocks.append({"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content})
        else:
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            for c in m.tool_calls:
                blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)  # the API rejects two consecutive turns of one role
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def _from_anthropic(message: Any, *, structured: str | None) -> LLMResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            calls.append(ToolCall(id=block.id, name=block.name, arguments=args))
    text = "".join(texts)
    if structured is not None:
        forced = next((c for c in calls if c.name == structured), None)
        if forced is not None:
            text = json.dumps(forced.arguments)
    usage = message.usage
    return LLMResponse(
        text=text,
        tool_calls=calls,
        usage=Usage(
            input_tokens=getattr(usage, "input_tokens", 0) or 0,
            output_tokens=getattr(usage, "output_tokens", 0) or 0,
        ),
        model=message.model or "",
        finish_reason=message.stop_reason,
    )
