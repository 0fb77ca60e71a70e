"""``ScriptedLLM``: a deterministic stand-in for a model, for tests.

Tests of extraction and reading must not depend on a network or on a model's mood, but they should still
exercise the real code paths: the same ``BaseLLM.parse`` repair retry, the same usage accounting. A script is
a list of steps; each step says which prompt it expects (a substring, a regex or a predicate) and what the
"model" answers. Anything unexpected fails loudly with ``UnexpectedPrompt`` showing the start of the prompt,
so a test never silently passes on a prompt nobody looked at.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from pydantic import BaseModel

from .base import BaseLLM, ChatMessage, LLMResponse, ToolCall, ToolSpec
from .errors import UnexpectedPrompt
from .usage import Usage, UsageTracker

Matcher: TypeAlias = str | re.Pattern[str] | Callable[[list[ChatMessage]], bool] | None
"""``None`` matches anything; a ``str`` must occur as a substring; a pattern is ``search``-ed; a callable gets
the messages and returns whether it matches."""

Reply: TypeAlias = (
    str
    | Mapping[str, Any]
    | BaseModel
    | ToolCall
    | Sequence[ToolCall]
    | LLMResponse
    | BaseException
    | type[BaseException]
    | Callable[[list[ChatMessage]], Any]
)
"""Text; a dict or pydantic object (sent as JSON text, for ``parse``); tool calls; a full ``LLMResponse``; an
exception (instance or class) to raise; or a callable computing any of those from the messages."""


def render_prompt(messages: Sequence[ChatMessage]) -> str:
    """The whole prompt as one string, as matchers and error messages see it."""
    return "\n".join(f"[{m.role}] {m.content}" for m in messages)


def last_user_text(messages: Sequence[ChatMessage]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


@dataclass
class Step:
    """One expected call and its answer. ``where`` chooses what a text matcher looks at: the whole prompt
    (every message, system included) or only the last user message. ``times`` limits how often an unordered
    rule may answer (``None``: unlimited); ordered steps always answer once."""

    match: Matcher
    reply: Reply
    where: Literal["prompt", "last_user"] = "prompt"
    times: int | None = None
    used: int = field(default=0, init=False)

    def matches(self, messages: list[ChatMessage]) -> bool:
        if self.match is None:
            return True
        if callable(self.match) and not isinstance(self.match, (str, re.Pattern)):
            return bool(self.match(messages))
        text = render_prompt(messages) if self.where == "prompt" else last_user_text(messages)
        if isinstance(self.match, re.Pattern):
            return self.match.search(text) is not None
        return self.match in text

    def describe(self) -> str:
        if self.match is None:
            return "<any prompt>"
        if isinstance(self.match, re.Pattern):
            return f"/{self.match.pattern}/"
        if isinstance(self.match, str):
            return repr(self.match)
        return getattr(self.match, "__name__", "<predicate>")


@dataclass(frozen=True)
class ScriptedCall:
    """A call the scripted model received, for assertions on what was sent."""

    kind: Literal["complete", "parse"]
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    schema: str | None
    step: int
    """Index of the step that answered."""

    @property
    def prompt(self) -> str:
        return render_prompt(self.messages)

    @property
    def last_user(self) -> str:
        return last_user_text(self.messages)


class ScriptedLLM(BaseLLM):
    """Replays ``steps`` in order (``ordered=True``) or answers with the first matching rule
    (``ordered=False``).

    Token counts are approximated as ``len(text) // 4`` so usage accounting has something realistic to add up.
    """

    provider: ClassVar[str] = "scripted"

    def __init__(
        self,
        steps: Iterable[Step | tuple[Matcher, Reply]] = (),
        *,
        ordered: bool = True,
        model: str = "scripted",
        usage: UsageTracker | None = None,
    ) -> None:
        super().__init__(model, usage=usage)
        self.ordered = ordered
        self.steps: list[Step] = [s if isinstance(s, Step) else Step(s[0], s[1]) for s in steps]
        self.calls: list[ScriptedCall] = []
        self._next = 0
        self._lock = threading.Lock()

    def add(self, match: Matcher, reply: Reply, **kw: Any) -> ScriptedLLM:
        """Append a step; returns ``self`` so scripts can be chained."""
        self.steps.append(Step(match, reply, **kw))
        return self

    @property
    def remaining(self) -> int:
        """Ordered steps not yet used (always 0 for unordered scripts)."""
        return len(self.steps) - self._next if self.ordered else 0

    def assert_done(self) -> None:
        """Fail if an ordered script still has unused steps (the code under test made fewer calls)."""
        if self.remaining:
            pending = ", ".join(s.describe() for s in self.steps[self._next :])
            raise AssertionError(f"ScriptedLLM: {self.remaining} step(s) never used: {pending}")

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        tools: list[ToolSpec],
        temperature: float,
        max_tokens: int | None,
    ) -> LLMResponse:
        return self._answer("complete", messages, tools, None)

    async def _structured(
        self,
        messages: list[ChatMessage],
        schema: type[BaseModel],
        *,
        temperature: float,
        max_tokens: int | None,
    ) -> LLMResponse:
        return self._answer("parse", messages, [], schema.__name__)

    def _answer(
        self,
        kind: Literal["complete", "parse"],
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        schema: str | None,
    ) -> LLMResponse:
        with self._lock:
            index = self._pick(kind, messages)
            step = self.steps[index]
            step.used += 1
            self.calls.append(ScriptedCall(kind, list(messages), list(tools), schema, index))
        resp = _to_response(step.reply, messages)
        out_chars = len(resp.text) + sum(len(json.dumps(c.arguments)) + len(c.name) for c in resp.tool_calls)
        usage = Usage(input_tokens=len(render_prompt(messages)) // 4, output_tokens=out_chars // 4, calls=1)
        return resp.model_copy(update={"usage": usage, "model": resp.model or self.model})

    def _pick(self, kind: str, messages: list[ChatMessage]) -> int:
        call_no = len(self.calls) + 1
        head = render_prompt(messages)[:400]
        if self.ordered:
            if self._next >= len(self.steps):
                raise UnexpectedPrompt(
                    f"ScriptedLLM: script exhausted ({len(self.steps)} steps) at call #{call_no} ({kind}); "
                    f"prompt begins: {head!r}"
                )
            step = self.steps[self._next]
            if not step.matches(messages):
                raise UnexpectedPrompt(
                    f"ScriptedLLM: call #{call_no} ({kind}) does not match step {self._next} "
                    f"{step.describe()} (in {step.where}); prompt begins: {head!r}"
                )
            self._next += 1
            return self._next - 1
        for i, step in enumerate(self.steps):
            if (step.times is None or step.used < step.times) and step.matches(messages):
                return i
        raise UnexpectedPrompt(
            f"ScriptedLLM: no rule matches call #{call_no} ({kind}); prompt begins: {head!r}"
        )


def _to_response(reply: Any, messages: list[ChatMessage]) -> LLMResponse:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, type) and issubclass(reply, BaseException):
        raise reply("raised by ScriptedLLM")
    if isinstance(reply, LLMResponse):
        return reply.model_copy()
    if isinstance(reply, str):
        return LLMResponse(text=reply, finish_reason="stop")
    if isinstance(reply, BaseModel) and not isinstance(reply, ToolCall):
        return LLMResponse(text=reply.model_dump_json(), finish_reason="stop")
    if isinstance(reply, ToolCall):
        return LLMResponse(tool_calls=[reply], finish_reason="tool_calls")
    if isinstance(reply, Mapping):
        return LLMResponse(text=json.dumps(dict(reply), default=str), finish_reason="stop")
    if isinstance(reply, Sequence) and reply and all(isinstance(c, ToolCall) for c in reply):
        return LLMResponse(tool_calls=list(reply), finish_reason="tool_calls")
    if callable(reply):
        return _to_response(reply(messages), messages)
    if isinstance(reply, Sequence):
        return LLMResponse(text=json.dumps(list(reply), default=str), finish_reason="stop")
    raise TypeError(f"ScriptedLLM cannot turn {type(reply).__name__} into a response")
