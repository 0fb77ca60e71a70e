"""The user's profile: current facts and recent events, grouped by kind, ranked, fitted to a token budget.

Why a profile next to search: a chat assistant that has known a user for months should not have to guess the
right query to learn the user's name, home or diet; those belong in every system prompt. Search answers a
question; the profile states what is true now, compactly, before any question is asked.

Selection is by rank within each group (most reinforced first, i.e. said in the most sessions; then the most
recently confirmed), taken round-robin over the groups so that a budget too small for everything still shows the
top of every group rather than all of the first one. Presentation is by group, in ``models.PROFILE_GROUPS`` order.
The input is already limited to what is visible at the profile's date (``store.visibility``); this module is pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from graphrecall.models import (
    PROFILE_GROUP_OF_KIND,
    PROFILE_GROUPS,
    Event,
    Fact,
    FactKind,
    Profile,
    ProfileGroup,
    ProfileItem,
    ProfileSection,
    Scope,
)
from graphrecall.names import normalize_name
from graphrecall.retrieve.context import estimate_tokens

RECENT_EVENT_DAYS = 30
"""Events (and event-kind facts) dated within this many days before the profile's date are "recent"; older ones
are history, which search still finds, not part of who the user is now."""


def _day(d: datetime | None) -> str:
    return f"{d:%Y-%m-%d}" if d else "unknown date"


Mentions = Mapping[str, tuple[int, datetime | None]]
"""Fact id -> (sessions that said it, the latest of their dates), as known at the profile's cutoff
(``store.facts.fact_mentions``)."""


def fact_item(f: Fact, mentions: Mentions, as_of: datetime) -> ProfileItem:
    """A fact's line. Reinforcement and last confirmation come from ``mentions`` (what was said by the cutoff);
    a fact without source messages counts once, and its stored ``last_seen`` only when it is not later than
    ``as_of``."""
    count, seen = mentions.get(f.id, (1, None))
    if seen is None:
        seen = f.last_seen if f.last_seen is not None and f.last_seen <= as_of else f.recorded_at
    return ProfileItem(
        id=f.id,
        source="fact",
        kind=f.kind.value,
        text=f.text,
        session_id=f.session_id,
        date=f.recorded_at,
        valid_from=f.valid_from,
        last_seen=seen,
        mentions=max(1, count),
    )


def event_item(e: Event, when: datetime, *, upcoming: bool) -> ProfileItem:
    return ProfileItem(
        id=e.id,
        source="event",
        kind="event",
        text=e.text,
        session_id=e.session_id,
        date=when,
        upcoming=upcoming,
    )


def render_item(item: ProfileItem) -> str:
    """One line: the statement, then where and when it was said (facts) or when it happens (events)."""
    if item.source == "event":
        mark = " (upcoming)" if item.upcoming else ""
        return f"- {_day(item.date)}{mark}: {item.text} [{item.session_id}]"
    notes = []
    if item.valid_from is not None and (item.date is None or item.valid_from.date() != item.date.date()):
        notes.append(f"since {_day(item.valid_from)}")
    notes.append(f"{item.session_id}, {_day(item.date)}")
    if item.mentions > 1:
        notes.append(f"said in {item.mentions} sessions")
    return f"- {item.text} [{'; '.join(notes)}]"


def header(as_of: datetime) -> str:
    return f"About the user (as of {_day(as_of)}):"


def _fact_rank(item: ProfileItem) -> tuple[int, float, str]:
    seen = item.last_seen or item.date or item.valid_from
    return (-item.mentions, -(seen.timestamp() if seen else float("-inf")), item.id)


def group_items(
    as_of: datetime,
    facts: Sequence[Fact],
    mentions: Mentions,
    events: Sequence[tuple[Event, datetime]],
    *,
    recent_days: int = RECENT_EVENT_DAYS,
) -> dict[ProfileGroup, list[ProfileItem]]:
    """Every item of the profile, by group, best first (no budget applied)."""
    since = as_of - timedelta(days=recent_days)
    groups: dict[ProfileGroup, list[ProfileItem]] = {g: [] for g in PROFILE_GROUPS}
    upcoming_events: list[ProfileItem] = []
    happened: list[ProfileItem] = []
    for f in facts:
        group = PROFILE_GROUP_OF_KIND.get(f.kind, "identity")
        item = fact_item(f, mentions, as_of)
        if f.kind == FactKind.event:  # a fact about something that happened: recent or upcoming only
            when = f.valid_from or f.recorded_at
            if when is None or when < since:
                continue
            if when > as_of:
                upcoming_events.append(item.model_copy(update={"upcoming": True, "date": when}))
            else:
                happened.append(item.model_copy(update={"date": when}))
            continue
        groups[group].append(item)
    for e, when in events:
        if when < since:
            continue
        if when > as_of:
            upcoming_events.append(event_item(e, when, upcoming=True))
        else:
            happened.append(event_item(e, when, upcoming=False))
    for g in ("identity", "preferences", "relationships", "plans"):
        groups[g].sort(key=_fact_rank)
    groups["plans"] += _unique(sorted(upcoming_events, key=lambda i: (i.date or as_of, i.id)))
    groups["recent_events"] = _unique(
        sorted(happened, key=lambda i: (-(i.date or as_of).timestamp(), i.source != "fact", i.id))
    )
    return groups


def _unique(items: Sequence[ProfileItem]) -> list[ProfileItem]:
    """An event is often stored twice, as an event and as an event-kind fact with the same sentence: keep one."""
    seen: set[str] = set()
    out = []
    for i in items:
        key = normalize_name(i.text)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def _render(as_of: datetime, chosen: Mapping[ProfileGroup, Sequence[ProfileItem]]) -> str:
    if not any(chosen.values()):
        return ""
    lines = [header(as_of)]
    for g, title in PROFILE_GROUPS.items():
        if chosen.get(g):
            lines.append(f"{title}:")
            lines.extend(render_item(i) for i in chosen[g])
    return "\n".join(lines) + "\n"


def _tokens(text: str) -> int:
    return estimate_tokens(text) if text else 0


def build_profile(
    scope: Scope,
    as_of: datetime,
    facts: Sequence[Fact],
    mentions: Mentions,
    events: Sequence[tuple[Event, datetime]],
    token_budget: int | None = None,
    *,
    recent_days: int = RECENT_EVENT_DAYS,
) -> Profile:
    """The profile of ``facts`` (current at ``as_of``) and ``events`` (visible, with their dates): grouped,
    ranked and, with ``token_budget``, cut to fit. ``token_count`` never exceeds the budget: each line is charged
    as rendered (its group's heading with the first line of a group), and the final text is measured again,
    dropping the last chosen line while it is over."""
    if token_budget is not None and token_budget < 1:
        raise ValueError("token_budget must be positive")
    ranked = group_items(as_of, facts, mentions, events, recent_days=recent_days)
    total = sum(len(v) for v in ranked.values())
    queues = {g: deque(items) for g, items in ranked.items()}
    chosen: dict[ProfileGroup, list[ProfileItem]] = {g: [] for g in PROFILE_GROUPS}
    order: list[ProfileGroup] = []  # the group of each chosen line, in the order chosen
    used = _tokens(header(as_of) + "\n")
    while any(queues.values()):
        for g, title in PROFILE_GROUPS.items():
            if not queues[g]:
                continue
            item = queues[g].popleft()
            cost = _tokens(render_item(item) + "\n") + (0 if chosen[g] else _tokens(title + ":\n"))
            if token_budget is not None and used + cost > token_budget:
                continue
            chosen[g].append(item)
            order.append(g)
            used += cost
    text = _render(as_of, chosen)
    while order and token_budget is not None and _tokens(text) > token_budget:  # a safety net
        chosen[order.pop()].pop()
        text = _render(as_of, chosen)
    kept = sum(len(v) for v in chosen.values())
    return Profile(
        scope=scope,
        as_of=as_of,
        sections=[
            ProfileSection(group=g, title=title, items=chosen[g])
            for g, title in PROFILE_GROUPS.items()
            if chosen[g]
        ],
        text=text,
        token_count=_tokens(text),
        token_budget=token_budget,
        truncated=kept < total,
        omitted=total - kept,
    )
