"""OpenAI and OpenAI-compatible servers (llama.cpp, vLLM, LM Studio...) through the official ``openai`` SDK.

Structured output is where compatible servers differ most, so three mechanisms are tried in order and the
first that works is remembered on the instance:

1. ``json_schema`` (strict when the schema allows it): OpenAI's native, guaranteed-valid structured output.
2. ``json_object`` + ``schema``: llama.cpp's grammar-constrained JSON (it answers HTTP 500 to mechanism 1).
3. plain ``json_object`` with the schema in the system prompt: anything else that speaks JSON mode.

Whatever the mechanism, the result is validated by pydantic in ``BaseLLM.parse`` (with one repair retry).

Timeouts follow the server's pace rather than a cloud API's: a self-hosted server (any ``base_url``) gets
``SELF_HOSTED_TIMEOUT_S`` per request by default, because a 1.5B model on a loaded machine answered at 2.5
tokens/s and one extraction call took up to ~400 s there (docs/e2e.md). A request that still times out is not
resent at once (``_http``); the next request to this instance first waits until the server answers a cheap
``GET /models``: llama-cpp-python serves that only when its one slot is free, i.e. once it has finished the
request the client gave up on, so a copy never queues behind the original (docs/llm.md, "Slow servers").
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from ._schema import NotStrictable, strict_json_schema
from ._sdk import SdkLLM, import_sdk, resolve_key, stainless_error
from .base import (
    ChatMessage,
    LLMResponse,
    ToolCall,
    logprob_table,
    tool_name,
    with_schema_instructions,
)
from .errors import LLMError, LLMTimeout
from .usage import Usage, UsageTracker

log = logging.getLogger("graphrecall.llm")

Mechanism = Literal["json_schema", "json_object_schema", "json_object"]
MECHANISMS: tuple[Mechanism, ...] = ("json_schema", "json_object_schema", "json_object")

_FORMAT_WORDS = re.compile(
    r"response_format|json_schema|json_object|grammar|structured output", re.IGNORECASE
)
_NO_FALLBACK_STATUS = {401, 403, 404, 429}
PLACEHOLDER_KEY = "sk-no-key-needed"
API_TIMEOUT_S = 60.0  # OpenAI's own API: answers start within seconds; a longer silence is a problem
SELF_HOSTED_TIMEOUT_S = 900.0  # a local server: more than twice the slowest extraction call measured (~400 s)
CONNECT_TIMEOUT_S = 10.0  # a server that does not accept the connection this fast is not there
# The HTTP client's "could not connect" errors, by name: the SDK wraps them in APIConnectionError, and its HTTP
# package (httpx, or a fork of it) differs between SDK releases.
_CONNECT_ERRORS = frozenset({"ConnectError", "ConnectTimeout", "ConnectionRefusedError"})


def _mentions_format(err: LLMError) -> bool:
    return bool(_FORMAT_WORDS.search(err.message))


def _retry_unless_format_error(err: LLMError) -> bool:
    """A 500 that complains about ``response_format`` will not go away by waiting: fall back at once."""
    return err.retryable and not _mentions_format(err)


class OpenAILLM(SdkLLM):
    """Chat Completions API client. ``base_url`` points it at any OpenAI-compatible server.

    ``timeout`` (seconds per request) defaults to ``API_TIMEOUT_S`` for OpenAI's API and to
    ``SELF_HOSTED_TIMEOUT_S`` for a ``base_url`` server. ``structured`` forces a structured-output mechanism
    (skipping the probe); ``structured_mechanism`` tells which one is in use once a structured call has succeeded.
    """

    provider: ClassVar[str] = "openai"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int = 3,
        concurrency: int = 8,
        *,
        structured: Mechanism | None = None,
        retry_base_delay: float = 0.5,
        usage: UsageTracker | None = None,
    ) -> None:
        openai = import_sdk("openai", "OpenAILLM", "openai")
        self.base_url = base = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = resolve_key(
            api_key,
            env="OPENAI_API_KEY",
            base_url=base,
            placeholder=PLACEHOLDER_KEY,
            missing="OpenAILLM: no API key; set OPENAI_API_KEY, pass api_key=, or pass base_url= for a local server",
        )
        if timeout is None:
            timeout = SELF_HOSTED_TIMEOUT_S if base else API_TIMEOUT_S
        http_timeout = openai.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S))
        super().__init__(
            model,
            sdk=openai,
            client=lambda: openai.AsyncOpenAI(
                api_key=key, base_url=base, timeout=http_timeout, max_retries=0
            ),
            timeout=timeout,
            max_retries=max_retries,
            concurrency=concurrency,
            retry_base_delay=retry_base_delay,
            usage=usage,
        )
        self._mech_index = MECHANISMS.index(structured) if structured else 0
        self._mech_confirmed = structured is not None
        # Set when a request ended without an answer while the server may still be computing it (it timed out,
        # was cancelled, or its connection broke after it was sent); cleared once the server answers again.
        self._maybe_busy = False

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def structured_mechanism(self) -> Mechanism | None:
        return MECHANISMS[self._mech_index] if self._mech_confirmed else None

    # -- requests -------------------------------------------------------------------------------------

    def _translate(self, exc: Exception) -> LLMError | None:
        return stainless_error(self._sdk, exc, self.what, _error_text)

    async def _send(self, client: Any, kwargs: dict[str, Any]) -> Any:
        try:
            return await client.chat.completions.create(**kwargs)
        except BaseException as exc:
            # CancelledError too: the attempt's timeout cancels the request, which may still run on the server
            if self._may_still_run(exc):
                self._maybe_busy = True
            raise

    def _decode(self, raw: Any) -> LLMResponse:
        return _from_openai(raw)

    def _retry_options(self) -> dict[str, Any]:
        return {"retry_if": _retry_unless_format_error, "prepare": self._wait_until_idle}

    def _logprob_options(self, top_logprobs: int) -> dict[str, Any] | None:
        return {"logprobs": True, "top_logprobs": top_logprobs}

    def _may_still_run(self, exc: BaseException) -> bool:
        """Whether the server may still be computing a request that ended with ``exc`` (no answer came back)."""
        sdk = self._sdk
        if isinstance(exc, asyncio.CancelledError | TimeoutError | sdk.APITimeoutError):
            return True
        if isinstance(exc, sdk.APIConnectionError):  # could not connect: the request never got there
            return type(exc.__cause__).__name__ not in _CONNECT_ERRORS
        return False

    async def _wait_until_idle(self) -> None:
        """Before a request that follows one abandoned without an answer: wait (up to ``timeout``) until the
        server answers ``GET /models``. llama-cpp-python answers it only when its one slot is free again, so the
        new request is not queued behind the abandoned one; a server that answers at once (llama.cpp, vLLM:
        they stop the work of a client that left) costs one quick request. Still busy after ``timeout``: raise
        ``LLMTimeout`` without sending anything, and leave the retry to the caller (the extraction queue)."""
        if not self._maybe_busy:
            return
        sdk = self._sdk
        try:
            async with asyncio.timeout(self.policy.timeout):
                await self._clients.get().models.list()
        except (TimeoutError, sdk.APITimeoutError):
            raise LLMTimeout(
                f"openai {self.model}: the server is still busy with an earlier request that timed out "
                f"(no answer to GET /models within {self.policy.timeout:g}s); not sending another copy"
            ) from None
        except sdk.APIError:
            pass  # it answered (an error status: no /models here) or is gone: either way it is not computing
        self._maybe_busy = False

    def _kwargs(
        self, messages: list[ChatMessage], temperature: float, max_tokens: int | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [_to_openai(m) for m in messages],
            "temperature": temperature,
        }
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        return kwargs

    async def _structured(
        self,
        messages: list[ChatMessage],
        schema: type[BaseModel],
        *,
        temperature: float,
        max_tokens: int | None,
    ) -> LLMResponse:
        for index in range(self._mech_index, len(MECHANISMS)):
            mech = MECHANISMS[index]
            kwargs = self._structured_kwargs(mech, messages, schema, temperature, max_tokens)
            try:
                completion = await self._request(kwargs)
            except LLMError as err:
                if index + 1 < len(MECHANISMS) and self._is_rejection(err):
                    log.info(
                        "openai %s: %s rejected (%s); trying %s",
                        self.model,
                        mech,
                        err.status,
                        MECHANISMS[index + 1],
                    )
                    self._mech_index, self._mech_confirmed = index + 1, False
                    continue
                raise
            self._mech_index, self._mech_confirmed = index, True
            return _from_openai(completion)
        raise AssertionError("unreachable: the last mechanism either returns or raises")

    def _is_rejection(self, err: LLMError) -> bool:
        """Whether an error means "this server does not support this response_format" (so fall back)."""
        if err.status is None:
            return False
        if err.status in (400, 422, 500) and _mentions_format(err):
            return True
        return not self._mech_confirmed and 400 <= err.status < 600 and err.status not in _NO_FALLBACK_STATUS

    def _structured_kwargs(
        self,
        mech: Mechanism,
        messages: list[ChatMessage],
        schema: type[BaseModel],
        temperature: float,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        json_schema = schema.model_json_schema()
        if mech == "json_schema":
            kwargs = self._kwargs(messages, temperature, max_tokens)
            try:
                spec: dict[str, Any] = {"schema": strict_json_schema(json_schema), "strict": True}
            except NotStrictable:
                spec = {"schema": json_schema, "strict": False}
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": tool_name(schema.__name__), **spec},
            }
            return kwargs
        # Small local models fill fields far better when they can read the schema's descriptions, so the
        # schema goes into the prompt even when a grammar enforces it.
        kwargs = self._kwargs(with_schema_instructions(messages, schema), temperature, max_tokens)
        if mech == "json_object_schema":
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        else:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs


def _error_text(exc: Any) -> str:
    """The server's error message; compatible servers put it in different places, so keep the raw body too."""
    body = getattr(exc, "body", None)
    text = getattr(exc, "message", "") or str(exc)
    if body is not None and not isinstance(body, str):
        body = json.dumps(body, default=str)
    return f"{text} {body}" if body and body not in text else text


def _to_openai(m: ChatMessage) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in m.tool_calls
        ]
    if m.name and m.role in ("user", "system"):
        out["name"] = m.name
    return out


def _parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {}, raw
    return (value, None) if isinstance(value, dict) else ({}, raw)


def _from_openai(completion: Any) -> LLMResponse:
    choice = completion.choices[0]
    msg = choice.message
    calls: list[ToolCall] = []
    for i, tc in enumerate(msg.tool_calls or []):
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        args, raw = _parse_arguments(fn.arguments)
        calls.append(ToolCall(id=tc.id or f"call_{i}", name=fn.name, arguments=args, raw_arguments=raw))
    usage = completion.usage
    return LLMResponse(
        text=msg.content or "",
        tool_calls=calls,
        usage=Usage(
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        ),
        model=completion.model or "",
        finish_reason=choice.finish_reason,
        first_token_logprobs=_first_token_logprobs(choice),
    )


def _first_token_logprobs(choice: Any) -> dict[str, float]:
    """``choice.logprobs.content[0].top_logprobs`` as {token: logprob} (the likeliest spelling wins a repeat);
    empty when the server sent none."""
    content = getattr(getattr(choice, "logprobs", None), "content", None) or []
    return logprob_table(getattr(content[0], "top_logprobs", None) or []) if content else {}
