"""Grouping for consolidation (pure): clusters of duplicate facts, and windows of old sessions.

Why star clusters, not connected components: similarity is not transitive ("lives in Berlin" ~ "lives in Berlin
now" ~ "lived in Berlin until 2023"), so chaining pairs could merge facts that say different things. A cluster is
a seed (the most reinforced, then the longest fact) and the facts linked *to the seed*. This also makes a rerun
find nothing new: the facts left current after a run are seeds that no earlier seed linked, and linking depends
only on what a fact says (kind, entities, text, vector), which merging does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from graphrecall.names import normalize_name
from graphrecall.store.facts import SUMMARY_PREFIX

WINDOW_EPOCH = datetime(1970, 1, 5)
"""A Monday: 7-day windows are Monday-to-Sunday weeks."""


@dataclass(frozen=True)
class FactPoint:
    """What clustering reads of a current fact."""

    id: str
    text: str
    kind: str
    entity_ids: frozenset[str]
    reinforcement: int = 1
    recorded_at: datetime | None = None


def seed_order(facts: Sequence[FactPoint]) -> list[int]:
    """Indices, best seed first: most reinforced, then longest text, then earliest recorded, then id."""
    return sorted(
        range(len(facts)),
        key=lambda i: (
            -facts[i].reinforcement,
            -len(facts[i].text),
            facts[i].recorded_at or datetime.max,
            facts[i].id,
        ),
    )


def linked(a: FactPoint, b: FactPoint, similarity: float, threshold: float) -> bool:
    """Same kind, about a shared entity (or both about none), and the same normalized text or similar enough."""
    if a.kind != b.kind:
        return False
    if (a.entity_ids or b.entity_ids) and not (a.entity_ids & b.entity_ids):
        return False
    return normalize_name(a.text) == normalize_name(b.text) or similarity >= threshold


def duplicate_clusters(facts: Sequence[FactPoint], vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """Clusters of two or more facts (indices into ``facts``, the seed first, then by seed order). ``vectors``
    holds one embedding per fact, in order."""
    if len(facts) < 2:
        return []
    raw = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(raw, axis=1, keepdims=True)
    unit = raw / np.where(norms == 0, np.float32(1.0), norms)
    order = seed_order(facts)
    by_kind: dict[str, list[int]] = {}
    for i in order:
        by_kind.setdefault(facts[i].kind, []).append(i)
    clusters: list[list[int]] = []
    # Only facts of one kind can link, so similarities are computed per kind: memory grows with the largest
    # kind's square (2,000 facts of one kind: 16 MB), not the scope's.
    for group in by_kind.values():
        sims = unit[group] @ unit[group].T
        taken = [False] * len(group)
        for a in range(len(group)):
            if taken[a]:
                continue
            taken[a] = True
            members = [group[a]]
            for b in range(len(group)):
                if not taken[b] and linked(facts[group[a]], facts[group[b]], float(sims[a, b]), threshold):
                    taken[b] = True
                    members.append(group[b])
            if len(members) > 1:
                clusters.append(members)
    rank = {i: r for r, i in enumerate(order)}
    return sorted(clusters, key=lambda c: rank[c[0]])


def same_text(facts: Sequence[FactPoint]) -> bool:
    """Whether every fact says exactly the same (normalized) text: a merge no model needs to decide."""
    return len({normalize_name(f.text) for f in facts}) == 1


@dataclass(frozen=True)
class Window:
    """Sessions that started in ``[start, end)``."""

    start: datetime
    end: datetime
    session_ids: tuple[str, ...]


def session_windows(
    sessions: Sequence[tuple[str, datetime]], *, window_days: int, ended_by: datetime
) -> list[Window]:
    """Sessions grouped into fixed windows of ``window_days`` counted from ``WINDOW_EPOCH``, oldest first; only
    windows that ended by ``ended_by`` (so a window is summarized once, when no session can still join it)."""
    if window_days < 1:
        raise ValueError(f"window_days must be at least 1, got {window_days}")
    span = timedelta(days=window_days)
    groups: dict[datetime, list[tuple[datetime, str]]] = {}
    for sid, at in sessions:
        start = WINDOW_EPOCH + span * ((at - WINDOW_EPOCH) // span)
        groups.setdefault(start, []).append((at, sid))
    return [
        Window(start, start + span, tuple(sid for _, sid in sorted(groups[start])))
        for start in sorted(groups)
        if start + span <= ended_by
    ]


def summary_id(window: Window) -> str:
    """The summary fact's id: one per window, so a rerun finds it and writes nothing."""
    days = (window.end - window.start).days
    return f"{SUMMARY_PREFIX}{window.start:%Y%m%d}_{days}d"
