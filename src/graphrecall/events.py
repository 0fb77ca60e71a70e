"""What changed in memory, told to whoever listens: the events a ``Memory`` emits after a change is durable.

Why: an application that mirrors memory elsewhere (a search index, a CRM, an audit log) or reacts to it (tell the
user a fact was replaced, refresh a cached profile) should not poll. ``Memory.subscribe(sink)`` calls ``sink`` with
a ``MemoryEvent`` after each change below; the HTTP server turns them into signed webhooks
(``graphrecall.server.webhooks``).

| type | emitted when | ``data`` |
|---|---|---|
| ``session.stored`` | an ingest call stored something new (acknowledged: in the write log or in Kuzu) | ``session_ids``, ``sessions_added``, ``messages_added`` |
| ``extraction.done`` | a session's extraction was written | ``session_id``, ``facts_added``, ``facts_superseded``, ``events_added`` |
| ``extraction.failed`` | a session's extraction failed | ``session_id``, ``retry_later`` (the model could not answer now) |
| ``fact.superseded`` | a fact stopped being current: replaced by ``add_fact``, ``supersede`` or ``consolidate`` | ``fact_id``, ``superseded_by``, ``by`` |
| ``feedback.given`` | ``feedback`` marked a fact, round or event useful or wrong | ``item_id``, ``kind``, ``useful`` |
| ``memory.erased`` | ``erase`` removed part of a scope | counts per kind (``sessions``, ``messages``, ``facts``, ...) |
| ``scope.erased`` | ``forget`` removed a whole scope | nothing more |

Invariants: an event carries ids and counts, never the user's text (a receiver that needs the text asks the API,
with a key allowed to read it); it is emitted after the change it reports is durable, never for a dry run or an
idempotent repeat that changed nothing; a sink that raises is logged and does not fail the operation (the change is
already stored: failing the caller would invite a retry of a write that succeeded). Sinks run on the thread that
made the change, so a sink must be quick (the webhook sink only appends to its durable outbox).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from graphrecall.models import Scope

log = logging.getLogger(__name__)

EventType = Literal[
    "session.stored",
    "extraction.done",
    "extraction.failed",
    "fact.superseded",
    "feedback.given",
    "memory.erased",
    "scope.erased",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)


@dataclass(frozen=True)
class MemoryEvent:
    """One change: its ``type``, the ``scope`` it happened in, ids and counts in ``data``; ``id`` is unique (a
    receiver deduplicates deliveries by it), ``at`` is when it was emitted (UTC)."""

    type: EventType
    scope: Scope
    data: Mapping[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: f"ev_{uuid.uuid4().hex}")
    at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def to_json(self) -> dict[str, Any]:
        """The wire form (webhook bodies): dates with their offset, the scope as org and user."""
        return {
            "id": self.id,
            "type": self.type,
            "at": self.at.isoformat(),
            "org_id": self.scope.org_id,
            "user_id": self.scope.user_id,
            "data": dict(self.data),
        }


EventSink = Callable[[MemoryEvent], None]


class EventHub:
    """The sinks of one ``Memory``, and ``emit`` for the services that change memory."""

    def __init__(self) -> None:
        self._sinks: list[EventSink] = []
        self._lock = threading.Lock()

    def subscribe(self, sink: EventSink) -> Callable[[], None]:
        """Call ``sink`` for every event from now on; returns a function that stops it."""
        with self._lock:
            self._sinks.append(sink)

        def unsubscribe() -> None:
            with self._lock:
                if sink in self._sinks:
                    self._sinks.remove(sink)

        return unsubscribe

    def emit(self, type: EventType, scope: Scope, **data: Any) -> None:
        with self._lock:
            sinks = list(self._sinks)
        if not sinks:
            return
        event = MemoryEvent(type=type, scope=scope, data=data)
        for sink in sinks:
            try:
                sink(event)
            except Exception:  # the change is stored; a listener's failure must not undo or fail it
                log.exception("an event sink failed on %s (%s)", event.type, event.id)
