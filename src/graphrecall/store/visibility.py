"""What a question asked at a cutoff may see, as Cypher conditions: one definition for every kind of item.

``until`` is ``graphrecall.dates.Cutoff.until``: the last *recorded* time that is visible. Recorded time is when
the user said it (a round's date, a fact's ``recorded_at``, an event's source session date), so a replayed history
is judged as of its own dates, never by when extraction ran. A supersession is recorded when its superseding fact
is: a fact replaced after the cutoff is still current at the cutoff. ``as_of`` (valid time, "what was true
then") narrows further and is independent of the cutoff. ``until=None`` means no cutoff (administration and
export, never a question).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

Condition = tuple[str, dict[str, Any]]


def _recorded(expr: str) -> str:
    return f"({expr} IS NULL OR {expr} <= $cut_until)"


def round_condition(alias: str, until: datetime | None) -> Condition:
    """A round is visible when its date is."""
    if until is None:
        return "true", {}
    return f"{alias}.at <= $cut_until", {"cut_until": until}


def fact_condition(alias: str, until: datetime | None, as_of: datetime | None) -> Condition:
    """Facts recorded by ``until`` that are current at ``until`` (not replaced by a fact recorded by then) or,
    with ``as_of``, valid at ``as_of``."""
    params: dict[str, Any] = {}
    parts: list[str] = []
    if until is None:
        replaced = f"{alias}.expired_at IS NOT NULL"
    else:
        params["cut_until"] = until
        parts.append(_recorded(f"{alias}.recorded_at"))
        replaced = (
            f"EXISTS {{ MATCH (sup:Fact)-[:SUPERSEDES]->({alias}) WHERE {_recorded('sup.recorded_at')} }}"
        )
    if as_of is None:
        parts.append(f"NOT {replaced}")
    else:
        params["cut_asof"] = as_of
        parts.append(f"({alias}.valid_from IS NULL OR {alias}.valid_from <= $cut_asof)")
        parts.append(f"({alias}.valid_to IS NULL OR {alias}.valid_to > $cut_asof OR NOT {replaced})")
    return " AND ".join(parts), params


def event_condition(session_alias: str, until: datetime | None, as_of: datetime | None) -> Condition:
    """Events whose source session (``session_alias``, joined by the caller) was recorded by ``until`` and, with
    ``as_of``, had started by then."""
    params: dict[str, Any] = {}
    parts = ["true"]
    if until is not None:
        params["cut_until"] = until
        parts.append(f"{session_alias}.started_at <= $cut_until")
    if as_of is not None:
        params["cut_asof"] = as_of
        parts.append(f"{session_alias}.started_at <= $cut_asof")
    return " AND ".join(parts), params
