"""OpenTelemetry traces, opt-in: spans for HTTP requests, CLI commands, search stages, embedding calls, LLM calls,
flushes and extraction jobs.

Why opt-in and why this shape: most users run no collector, and a memory library must not make every search pay
for tracing nobody reads. Until ``configure_from_env`` or ``use`` turns it on, ``span`` is one global read and a
shared no-op object, and nothing of OpenTelemetry is imported. It is turned on:

- by the standard variables, read by ``graphrecall serve`` and every CLI command: ``OTEL_TRACES_EXPORTER``
  (``otlp``, ``console``; ``none`` keeps it off) or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, then the exporter is ``otlp``), unless ``OTEL_SDK_DISABLED=true``;
  the service name comes from ``OTEL_SERVICE_NAME`` (default ``graphrecall``), and the OTLP exporter reads its own
  ``OTEL_EXPORTER_OTLP_*`` settings (``pip install 'graphrecall[otel]'``);
- in an application that already set up OpenTelemetry, by ``graphrecall.telemetry.use()`` (its global tracer
  provider) or ``use(provider)``.

Personal data: a scope is recorded as its organisation and a hash of (organisation, user)
(``graphrecall.scope_hash``, the first 16 hex digits of SHA-256), never the user id; no span carries a question,
a message or a fact. Prometheus metrics (``/metrics``) are independent of this and always on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from graphrecall.models import Scope

R = TypeVar("R")

SERVICE_NAME = "graphrecall"
_tracer: Any = None  # an opentelemetry Tracer once enabled


class _NoSpan:
    """What ``span`` yields while tracing is off: every call does nothing."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        pass

    def add_event(self, name: str, attributes: dict[str, Any] | None = None) -> None:
        pass

    def update_name(self, name: str) -> None:
        pass


NO_SPAN = _NoSpan()


def enabled() -> bool:
    return _tracer is not None


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any] | None = None, *, kind: str | None = None) -> Iterator[Any]:
    """A child span of the current one named ``name`` (``graphrecall.<what>``), or nothing while tracing is off.
    An exception leaving the block is recorded on the span and re-raised."""
    tracer = _tracer
    if tracer is None:
        yield NO_SPAN
        return
    from opentelemetry.trace import SpanKind

    span_kind = getattr(SpanKind, kind.upper()) if kind else SpanKind.INTERNAL
    with tracer.start_as_current_span(name, kind=span_kind, attributes=_clean(attributes)) as s:
        yield s


def current_event(name: str, attributes: dict[str, Any]) -> None:
    """An event on the current span (a retry of an LLM call), or nothing while tracing is off."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().add_event(name, _clean(attributes))


def scope_attributes(scope: Scope) -> dict[str, str]:
    """How a scope appears on a span: its organisation, and a hash of the scope instead of the user id."""
    digest = hashlib.sha256(f"{scope.org_id}\0{scope.user_id}".encode()).hexdigest()[:16]
    return {"graphrecall.org": scope.org_id, "graphrecall.scope_hash": digest}


def carried(coro: Coroutine[Any, Any, R]) -> Coroutine[Any, Any, R]:
    """``coro`` run under the caller's trace context when it is scheduled on another thread's event loop (the LLM
    clients' loop), so that its spans stay children of the caller's; ``coro`` itself while tracing is off."""
    if _tracer is None:
        return coro
    from opentelemetry import context

    current = context.get_current()

    async def run() -> R:
        token = context.attach(current)
        try:
            return await coro
        finally:
            context.detach(token)

    return run()


def extract_context(headers: dict[str, str]) -> Any:
    """The remote parent named by a request's ``traceparent`` header (W3C Trace Context), or None."""
    if _tracer is None:
        return None
    from opentelemetry import propagate

    return propagate.extract(headers)


@contextlib.contextmanager
def attached(ctx: Any) -> Iterator[None]:
    """Make ``ctx`` (from ``extract_context``) the current context for the block."""
    if ctx is None:
        yield
        return
    from opentelemetry import context

    token = context.attach(ctx)
    try:
        yield
    finally:
        context.detach(token)


def use(provider: Any = None) -> None:
    """Trace into ``provider`` (an OpenTelemetry ``TracerProvider``), or into the process's global one when none
    is given; ``use(False)`` turns tracing off again."""
    global _tracer
    if provider is False:
        _tracer = None
        return
    from opentelemetry import trace

    from graphrecall import __version__

    source = provider if provider is not None else trace.get_tracer_provider()
    _tracer = source.get_tracer("graphrecall", __version__)


def wanted_exporter(env: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """The exporter the standard variables ask for (``otlp``, ``console``), or None: tracing stays off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    named = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if named:
        return None if named == "none" else named.split(",")[0].strip()
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return "otlp"
    return None


def configure_from_env() -> bool:
    """Set up the SDK as the ``OTEL_*`` variables ask (module docstring); whether tracing is on. Called once by
    each entry point (``graphrecall serve``, the CLI); a second call changes nothing."""
    if _tracer is not None:
        return True
    exporter_name = wanted_exporter()
    if exporter_name is None:
        return False
    from graphrecall.errors import ConfigurationError

    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise ConfigurationError(
            "OTEL_* asks for traces but the OpenTelemetry SDK is not installed: pip install 'graphrecall[otel]'"
        ) from None
    exporter: Any
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    elif exporter_name == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigurationError(
                "OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: pip install 'graphrecall[otel]'"
            ) from None
        exporter = OTLPSpanExporter()
    else:
        raise ConfigurationError(
            f"OTEL_TRACES_EXPORTER={exporter_name!r}: graphrecall knows otlp, console and none"
        )
    name = os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    import atexit

    atexit.register(provider.shutdown)  # flush what is buffered when the command or server ends
    use(provider)
    return True


def _clean(attributes: dict[str, Any] | None) -> dict[str, Any] | None:
    """OpenTelemetry takes str, bool, int, float (or sequences of one type): None values are left out."""
    if not attributes:
        return None
    return {k: v for k, v in attributes.items() if v is not None}
