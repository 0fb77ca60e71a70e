"""Local models served by Ollama, through the official ``ollama`` SDK.

Structured output uses Ollama's ``format=<JSON schema>`` (grammar-constrained); the schema is also put in the
system prompt because small local models fill fields better when they can read the descriptions. Ollama has
no tool-call ids, so ids are synthesised (``call_0``...) and tool results are matched back by tool name. Log
probabilities (``complete(..., top_logprobs=n)``, which the LLM reranker reads) are Ollama's ``logprobs`` /
``top_logprobs`` (the SDK has them from 0.6.1; a server too old to know them sends none, and the reranker then
reads the word).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from pydantic import BaseModel

from ._http import status_error
from ._sdk import SdkLLM, import_sdk
from .base import ChatMessage, LLMResponse, ToolCall, logprob_table, with_schema_instructions
from .errors import LLMError, LLMTimeout
from .usage import Usage, UsageTracker


class OllamaLLM(SdkLLM):
    """An Ollama model; ``host`` defaults to ``$OLLAMA_HOST`` or ``http://127.0.0.1:11434``."""

    provider: ClassVar[str] = "ollama"

    def __init__(
        self,
        model: str,
        host: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        concurrency: int = 2,
        *,
        retry_base_delay: float = 0.5,
        usage: UsageTracker | None = None,
    ) -> None:
        ollama = import_sdk("ollama", "OllamaLLM", "ollama")
        self.host = resolved = host or os.environ.get("OLLAMA_HOST") or None
        super().__init__(
            model,
            sdk=ollama,
            client=lambda: ollama.AsyncClient(host=resolved, timeout=timeout),
            timeout=timeout,
            max_retries=max_retries,
            concurrency=concurrency,
            retry_base_delay=retry_base_delay,
            usage=usage,
        )

    def __repr__(self) -> str:
        return f"OllamaLLM(model={self.model!r}, host={self.host!r})"

    def _translate(self, exc: Exception) -> LLMError | None:
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return LLMTimeout(f"{self.what}: request timed out")
        if isinstance(exc, (ConnectionError, httpx.TransportError)):
            return LLMError(f"{self.what}: connection failed: {exc}", retryable=True)
        if isinstance(exc, self._sdk.ResponseError):
            return status_error(self.what, exc.status_code, str(exc.error))
        return None

    async def _send(self, client: Any, kwargs: dict[str, Any]) -> Any:
        return await client.chat(**kwargs)

    def _decode(self, raw: Any) -> LLMResponse:
        return _from_ollama(raw)

    def _kwargs(
        self, messages: list[ChatMessage], temperature: float, max_tokens: int | None
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"temperature": temperature}
        if max_tokens is not None:
            options["num_predict"] = max_tokens
        return {"model": self.model, "messages": [_to_ollama(m) for m in messages], "options": options}

    def _logprob_options(self, top_logprobs: int) -> dict[str, Any] | None:
        return {"logprobs": True, "top_logprobs": top_logprobs}

    async def _structured(
        self,
        messages: list[ChatMessage],
        schema: type[BaseModel],
        *,
        temperature: float,
        max_tokens: int | None,
    ) -> LLMResponse:
        kwargs = self._kwargs(with_schema_instructions(messages, schema), temperature, max_tokens)
        kwargs["format"] = schema.model_json_schema()
        return _from_ollama(await self._request(kwargs))


def _to_ollama(m: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.role == "tool" and m.name:
        out["tool_name"] = m.name
    if m.role == "assistant" and m.tool_calls:
        out["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
    return out


def _from_ollama(resp: Any) -> LLMResponse:
    msg = resp.message
    calls = [
        ToolCall(id=f"call_{i}", name=tc.function.name, arguments=dict(tc.function.arguments or {}))
        for i, tc in enumerate(msg.tool_calls or [])
    ]
    return LLMResponse(
        text=msg.content or "",
        tool_calls=calls,
        usage=Usage(input_tokens=resp.prompt_eval_count or 0, output_tokens=resp.eval_count or 0),
        model=resp.model or "",
        finish_reason=resp.done_reason,
        first_token_logprobs=_first_token_logprobs(resp),
    )


def _first_token_logprobs(resp: Any) -> dict[str, float]:
    """The first generated token's alternatives as {token: logprob} (the token itself included; the likeliest
    spelling wins a repeat); empty when the server sent none."""
    tokens = getattr(resp, "logprobs", None) or []
    if not tokens:
        return {}
    first = tokens[0]
    return logprob_table([first, *(getattr(first, "top_logprobs", None) or [])])
