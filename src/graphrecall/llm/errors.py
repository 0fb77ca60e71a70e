"""Errors raised by the LLM layer.

Provider SDKs each have their own exception zoo; every provider translates them into these few types so that
callers (extraction, the reader, the server) can handle "retry later", "the model said nonsense" and "the test
script did not expect this" without importing any SDK.
"""

from __future__ import annotations


class LLMError(Exception):
    """A call to a language model failed.

    ``status`` is the HTTP status when there was one; ``retryable`` says whether the same request may succeed
    if sent again (rate limits, 5xx, dropped connections), which is what the retry loop in ``_http`` looks at.
    """

    retryable_default = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = self.retryable_default if retryable is None else retryable
        self.retry_after = retry_after


class LLMTimeout(LLMError):
    """The model did not answer within the configured timeout."""

    retryable_default = True


class LLMRateLimited(LLMError):
    """The provider answered HTTP 429; ``retry_after`` carries its hint in seconds when it sent one."""

    retryable_default = True

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, status=429, retry_after=retry_after)


class LLMNotConfigured(LLMError):
    """No model is configured (``GRAPHRECALL_LLM`` unset) or the configuration cannot be used."""


class StructuredOutputError(LLMError):
    """The model's answer did not validate against the requested schema, even after one repair attempt.

    Carries the schema name, the last validation error and the last raw answer so that logs show what the
    model actually produced.
    """

    def __init__(self, schema: str, error: str, raw: str) -> None:
        preview = raw if len(raw) <= 300 else raw[:300] + "..."
        super().__init__(
            f"model output does not match schema {schema} after one repair attempt: {error}\n"
            f"last output: {preview!r}"
        )
        self.schema = schema
        self.error = error
        self.raw = raw


class UnexpectedPrompt(LLMError):
    """A ``ScriptedLLM`` received a prompt that no step matches, or more calls than it has steps."""
