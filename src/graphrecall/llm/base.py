"""The provider-neutral LLM interface: message/tool types, the ``LLM`` protocol and ``BaseLLM``.

Everything above this layer (extraction, entity resolution, the reader) talks to an ``LLM`` and never to an
SDK, so providers can be swapped by configuration and tests can use ``ScriptedLLM``. ``BaseLLM`` owns the
behaviour that must not differ between providers: usage accounting, the structured-output repair retry and
the sync wrappers. Providers only implement ``_complete`` and, when they have a native mechanism,
``_structured``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, Field, ValidationError

from graphrecall import telemetry

from .errors import StructuredOutputError
from .usage import Usage, UsageTracker

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

MessageRole = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A function call requested by the model. ``raw_arguments`` keeps the text when it was not valid JSON."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None


class ChatMessage(BaseModel):
    """One message of a prompt. Assistant messages may carry ``tool_calls``; ``tool`` messages answer one of
    them (``tool_call_id``, and ``name`` = the tool's name, which Ollama needs)."""

    role: MessageRole
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: Sequence[ToolCall] = ()) -> ChatMessage:
        return cls(role="assistant", content=content, tool_calls=list(tool_calls))

    @classmethod
    def tool(cls, call: ToolCall, content: str) -> ChatMessage:
        """The result of running ``call``, to send back to the model."""
        return cls(role="tool", content=content, tool_call_id=call.id, name=call.name)


class ToolSpec(BaseModel):
    """A tool the model may call: ``parameters`` is a JSON schema of the arguments object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @classmethod
    def from_model(
        cls, model: type[BaseModel], name: str | None = None, description: str | None = None
    ) -> ToolSpec:
        """Build a tool whose arguments are ``model``; the docstring becomes the description by default."""
        doc = (model.__doc__ or "").strip()
        return cls(
            name=name or tool_name(model.__name__),
            description=description if description is not None else doc,
            parameters=model.model_json_schema(),
        )

    def as_function(self) -> dict[str, Any]:
        """The ``{"type": "function", ...}`` tool format that OpenAI-compatible servers and Ollama both take."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class LLMResponse(BaseModel):
    """What one call returned. For ``parse`` the usage and latency cover the repair attempt too."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    latency_s: float = 0.0
    finish_reason: str | None = None
    first_token_logprobs: dict[str, float] = Field(default_factory=dict)
    """The likeliest tokens for the first generated position and their log probabilities, when the call asked
    for them (``complete(..., top_logprobs=n)``) and the provider returns them; empty otherwise. A judge that
    answers with one word reads its confidence here instead of a bare yes or no."""


MessagesIn = str | Sequence[ChatMessage | Mapping[str, Any]]
"""A prompt: a bare string (one user message) or a list of messages (``ChatMessage`` or plain dicts)."""


def to_messages(messages: MessagesIn) -> list[ChatMessage]:
    if isinstance(messages, str):
        return [ChatMessage(role="user", content=messages)]
    return [m if isinstance(m, ChatMessage) else ChatMessage.model_validate(m) for m in messages]


def logprob_table(alternatives: Iterable[Any]) -> dict[str, float]:
    """Token alternatives (objects with ``token`` and ``logprob``, as OpenAI's and Ollama's SDKs return them) as
    {token: logprob}; the likeliest wins a repeated token, entries without both fields are skipped."""
    out: dict[str, float] = {}
    for alt in alternatives:
        token, logprob = getattr(alt, "token", None), getattr(alt, "logprob", None)
        if isinstance(token, str) and isinstance(logprob, (int, float)):
            out[token] = max(float(logprob), out.get(token, float("-inf")))
    return out


def tool_name(name: str) -> str:
    """A name every provider accepts for a tool (``^[A-Za-z0-9_-]{1,64}$``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]
    return cleaned or "tool"


@runtime_checkable
class LLM(Protocol):
    """What the rest of graphrecall needs from a language model."""

    model: str
    usage: UsageTracker

    async def complete(
        self,
        messages: MessagesIn,
        *,
        tools: Sequence[ToolSpec] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
        top_logprobs: int = 0,
    ) -> LLMResponse: ...

    async def parse(
        self,
        messages: MessagesIn,
        schema: type[T],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> tuple[T, LLMResponse]: ...

    def complete_sync(
        self,
        messages: MessagesIn,
        *,
        tools: Sequence[ToolSpec] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
        top_logprobs: int = 0,
    ) -> LLMResponse: ...

    def parse_sync(
        self,
        messages: MessagesIn,
        schema: type[T],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> tuple[T, LLMResponse]: ...


REPAIR_PROMPT = (
    "Your previous reply is not a valid {schema} object. Validation errors:\n{error}\n\n"
    "Reply again with only the corrected JSON object, no prose and no code fences."
)

SCHEMA_INSTRUCTIONS = (
    "Respond with a single JSON object (no prose, no code fences) that conforms to this JSON schema:\n"
    "{schema}"
)


class BaseLLM(ABC):
    """Shared behaviour of all providers; subclasses implement ``_complete`` (and maybe ``_structured``)."""

    provider: ClassVar[str] = "base"

    def __init__(self, model: str, *, usage: UsageTracker | None = None) -> None:
        self.model = model
        self.usage = usage if usage is not None else UsageTracker()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    # -- provider hooks -------------------------------------------------------------------------------

    @abstractmethod
    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[ToolSpec],
        temperature: float,
        max_tokens: int | None,
    ) -> LLMResponse:
        """Send one request; return text/tool calls and token counts (cost and latency are filled in here)."""

    async def _structured(
        self,
        messages: list[ChatMessage],
        schema: type[BaseModel],
        *,
        temperature: float,
        max_tokens: int | None,
    ) -> LLMResponse:
        """Ask for JSON matching ``schema``; ``text`` must hold the JSON. The default puts the schema in the
        system prompt, which works with any model; providers override with their native mechanism."""
        return await self._complete(
            with_schema_instructions(messages, schema),
            tools=[],
            temperature=temperature,
            max_tokens=max_tokens,
        )

    async def _complete_logprobs(
        self,
        messages: list[ChatMessage],
        *,
        temperature: float,
        max_tokens: int | None,
        top_logprobs: int,
    ) -> LLMResponse:
        """A completion that also fills ``first_token_logprobs``. The default cannot (the provider has no such
        thing) and answers a plain completion; providers that can override it."""
        return await self._complete(messages, tools=[], temperature=temperature, max_tokens=max_tokens)

    # -- public API -----------------------------------------------------------------------------------

    async def complete(
        self,
        messages: MessagesIn,
        *,
        tools: Sequence[ToolSpec] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
        top_logprobs: int = 0,
    ) -> LLMResponse:
        """Free-text completion, optionally offering ``tools`` (then check ``response.tool_calls``).
        ``top_logprobs`` > 0 asks for that many alternatives of the first generated token
        (``response.first_token_logprobs``) from providers that can give them; the others ignore it."""
        started = time.perf_counter()
        msgs = to_messages(messages)
        with self._span("complete", purpose) as span:
            if top_logprobs > 0 and not tools:
                resp = await self._complete_logprobs(
                    msgs, temperature=temperature, max_tokens=max_tokens, top_logprobs=top_logprobs
                )
            else:
                resp = await self._complete(
                    msgs, tools=list(tools or ()), temperature=temperature, max_tokens=max_tokens
                )
            return _traced(span, self._account(resp, started, purpose))

    async def parse(
        self,
        messages: MessagesIn,
        schema: type[T],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> tuple[T, LLMResponse]:
        """Structured output validated by ``schema``.

        Small and local models often produce almost-right JSON; one repair round (the validation errors sent
        back to the model) fixes most of it. A second failure raises ``StructuredOutputError`` rather than
        looping, because a model that fails twice usually keeps failing and costs money doing so.
        """
        msgs = to_messages(messages)
        started = time.perf_counter()
        with self._span("parse", purpose) as span:
            first = _traced(
                span,
                self._account(
                    await self._structured(msgs, schema, temperature=temperature, max_tokens=max_tokens),
                    started,
                    purpose,
                ),
            )
        try:
            return validate_json(schema, first.text), first
        except ValidationError as exc:
            error = format_validation_error(exc)
        repair = [
            *msgs,
            ChatMessage(role="assistant", content=first.text),
            ChatMessage(role="user", content=REPAIR_PROMPT.format(schema=schema.__name__, error=error)),
        ]
        started = time.perf_counter()
        with self._span("parse.repair", purpose) as span:
            second = _traced(
                span,
                self._account(
                    await self._structured(repair, schema, temperature=temperature, max_tokens=max_tokens),
                    started,
                    purpose,
                ),
            )
        combined = second.model_copy(
            update={"usage": first.usage + second.usage, "latency_s": first.latency_s + second.latency_s}
        )
        try:
            return validate_json(schema, second.text), combined
        except ValidationError as exc:
            raise StructuredOutputError(schema.__name__, format_validation_error(exc), second.text) from exc

    def complete_sync(
        self,
        messages: MessagesIn,
        *,
        tools: Sequence[ToolSpec] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
        top_logprobs: int = 0,
    ) -> LLMResponse:
        """Blocking ``complete`` for sync callers (CLI, scripts, worker threads)."""
        return run_sync(
            self.complete(
                messages,
                tools=tools,
                temperature=temperature,
                max_tokens=max_tokens,
                purpose=purpose,
                top_logprobs=top_logprobs,
            )
        )

    def parse_sync(
        self,
        messages: MessagesIn,
        schema: type[T],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> tuple[T, LLMResponse]:
        """Blocking ``parse`` for sync callers."""
        return run_sync(
            self.parse(messages, schema, temperature=temperature, max_tokens=max_tokens, purpose=purpose)
        )

    # -- helpers --------------------------------------------------------------------------------------

    def _span(self, operation: str, purpose: str | None) -> contextlib.AbstractContextManager[Any]:
        """One model call as a span (``graphrecall.telemetry``), named by the provider-neutral operation."""
        return telemetry.span(
            f"graphrecall.llm.{operation}",
            {"gen_ai.request.model": self.model, "graphrecall.purpose": purpose},
            kind="client",
        )

    def _account(self, resp: LLMResponse, started: float, purpose: str | None) -> LLMResponse:
        latency = time.perf_counter() - started
        model = resp.model or self.model
        rec = self.usage.record(
            model=model,
            input_tokens=resp.usage.input_tokens,
            output_tokens=resp.usage.output_tokens,
            latency_s=latency,
            purpose=purpose,
        )
        usage = Usage(
            input_tokens=rec.input_tokens, output_tokens=rec.output_tokens, calls=1, cost_usd=rec.cost_usd
        )
        return resp.model_copy(update={"usage": usage, "model": model, "latency_s": latency})


def with_schema_instructions(messages: list[ChatMessage], schema: type[BaseModel]) -> list[ChatMessage]:
    """Append the JSON schema to the system prompt (or add one): for models without native structured
    output, and to let small models read the field descriptions."""
    note = SCHEMA_INSTRUCTIONS.format(schema=json.dumps(schema.model_json_schema(), separators=(",", ":")))
    if messages and messages[0].role == "system":
        head = messages[0].model_copy(update={"content": f"{messages[0].content}\n\n{note}"})
        return [head, *messages[1:]]
    return [ChatMessage(role="system", content=note), *messages]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_candidates(text: str) -> Iterator[str]:
    """The raw text, then a fenced block, then the outermost ``{...}``: models like to wrap JSON in prose."""
    yield text
    fence = _FENCE.search(text)
    if fence:
        yield fence.group(1)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        yield text[start : end + 1]


def validate_json(schema: type[T], text: str) -> T:
    """Validate ``text`` as ``schema``; raise the most informative ``ValidationError`` when nothing fits.

    A schema error (wrong field) is more useful to the repair prompt than "invalid JSON" for the prose around
    the object, so errors from candidates that were at least valid JSON are preferred.
    """
    errors: list[ValidationError] = []
    for candidate in _json_candidates(text):
        try:
            return schema.model_validate_json(candidate)
        except ValidationError as exc:
            errors.append(exc)
    for found in errors:
        if all(e["type"] != "json_invalid" for e in found.errors()):
            raise found
    raise errors[0]


def format_validation_error(exc: ValidationError, limit: int = 20) -> str:
    lines = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        lines.append(f"- {loc}: {err['msg']}")
    if exc.error_count() > limit:
        lines.append(f"- ... and {exc.error_count() - limit} more")
    return "\n".join(lines)


class _LoopThread:
    """A daemon thread running one event loop, shared by all sync wrappers.

    One long-lived loop (instead of ``asyncio.run`` per call) keeps SDK connection pools alive between sync
    calls and works whether or not the calling thread already runs a loop.
    """

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def loop(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="graphrecall-llm-sync", daemon=True)
                thread.start()
                cls._loop, cls._thread = loop, thread
            return cls._loop

    @classmethod
    def in_loop_thread(cls) -> bool:
        return threading.current_thread() is cls._thread


def run_sync(coro: Coroutine[Any, Any, R]) -> R:
    """Run ``coro`` to completion from sync code and return its result (exceptions propagate); under tracing, in
    the caller's trace context, so its spans are children of the caller's."""
    if _LoopThread.in_loop_thread():
        coro.close()
        raise RuntimeError("sync LLM helpers cannot be called from inside the LLM event loop; await instead")
    return asyncio.run_coroutine_threadsafe(telemetry.carried(coro), _LoopThread.loop()).result()


def _traced(span: Any, resp: LLMResponse) -> LLMResponse:
    """The call's usage on its span: tokens in and out, and the cost when the price is known."""
    span.set_attributes(
        {
            "gen_ai.usage.input_tokens": resp.usage.input_tokens,
            "gen_ai.usage.output_tokens": resp.usage.output_tokens,
            "graphrecall.llm.cost_usd": resp.usage.cost_usd,
        }
    )
    return resp
