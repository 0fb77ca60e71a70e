"""Context assembly: the evidence a reader sees, dated, grouped by session, in chronological order, within budget.

Selection is by relevance (best hits first, until the token budget is spent); presentation is by time, because
readers reason about "before/after/latest" far better over a chronological transcript than over a score list.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from graphrecall.docref import parse_location
from graphrecall.models import Context, Hit
from graphrecall.retrieve.excerpt import CHARS_PER_TOKEN, excerpt, question_terms, round_excerpt

Packing = Literal["evidence", "whole"]

CORE_SHARE = 16
"""First pass of evidence packing: each hit's short form gets about 1/16 of the budget (125 tokens of 2,000): room
for the user's turn and the reply's best sentences, and for the best hit of ten sessions with the rest spare."""
MIN_CORE_TOKENS = 48
FIRST_SESSIONS = 6
"""First pass: the best hit of each of the best 6 sessions goes first, then every other hit in rank order. Why a
limit: with one hit from *every* session first, the 20-30 sessions of a long history filled a 4,000-token budget with
weak sessions' best hits and pushed out the second and third evidence rounds of the gold sessions. Chosen by
5-fold cross-validation over the LongMemEval dev questions (limits 4-12 and none), maximizing evidence rounds inside
and evidence shown whole at 2,000 and 4,000 tokens (docs/benchmarks.md, context packing)."""


def estimate_tokens(text: str) -> int:
    """~4 characters per token for English; exact counts need the reader's tokenizer, which we do not have here."""
    return max(1, (len(text) + 3) // 4)


def _fmt_date(d: datetime | None) -> str:
    return d.strftime("%Y-%m-%d (%a) %H:%M") if d else "unknown date"


def _heading(h: Hit, d: datetime | None) -> str:
    """A session's heading; a learned document's names its source instead of its session id."""
    if h.document is not None:
        return f"### Document {h.document.source} — {_fmt_date(d)}"
    return f"### Session {h.session_id} — {_fmt_date(d)}"


def _item(h: Hit, body: str, part: bool = False) -> str:
    what: str = h.kind
    if h.document is not None:  # the passage's place: its number and the headings above it
        path = " › ".join(h.document.title_path)
        what = f"document passage {h.document.position}{f': {path}' if path else ''}"
    return f"[{h.id}] ({what}, {_fmt_date(h.date)}{', excerpt' if part else ''})\n{body}"


def _render(header: str, chosen: list[_Piece]) -> str:
    by_session: OrderedDict[str, list[_Piece]] = OrderedDict()
    for p in sorted(chosen, key=lambda p: (p.hit.date or datetime.min, p.hit.session_id, p.hit.id)):
        by_session.setdefault(p.hit.session_id, []).append(p)
    parts = [header] if header else []
    for items in by_session.values():
        parts.append(_heading(items[0].hit, items[0].hit.date))
        parts.extend(_item(p.hit, p.body, p.part) for p in items)
        parts.append("")
    return "\n".join(parts).strip() + "\n"


@dataclass
class _Piece:
    """A chosen hit as shown: its body (whole or an excerpt) and whether that is a part of it."""

    hit: Hit
    body: str
    part: bool


def _shown(h: Hit, terms: frozenset[str], max_tokens: int) -> tuple[str, bool]:
    """The hit's text within ``max_tokens`` (``excerpt.round_excerpt``; a hit that is not a round is cut to its
    best window), and whether that is a part of it."""
    max_chars = max_tokens * CHARS_PER_TOKEN
    if h.kind != "round":
        return excerpt(h.text, terms, max_chars), len(h.text) > max_chars
    found = parse_location(h.text) if h.document is not None else None
    if found is not None:  # a document passage: its source and headings are in the heading and item line
        body = found[2]
        return excerpt(body, terms, max_chars), len(body) > max_chars
    return round_excerpt(h.text, terms, max_chars)


def build_context(
    query: str,
    hits: list[Hit],
    token_budget: int,
    *,
    question_date: datetime | None = None,
    max_item_tokens: int | None = None,
    packing: Packing = "evidence",
    first_sessions: int = FIRST_SESSIONS,
) -> Context:
    """Pick hits best-first while their rendered cost fits ``token_budget``; ``token_count`` never exceeds it.

    ``packing="evidence"`` (the default) packs in two passes. First every hit gets a short form (its messages cut
    to the sentences that share the query's content words, about ``token_budget / CORE_SHARE`` tokens), best
    first but the best hit of each of the best ``first_sessions`` sessions before any other hit, until the budget
    is spent: the evidence of a question spread over sessions gets in. Then the budget left over grows the chosen hits back towards their full
    text, best first. A hit shown in part says so (``excerpt`` beside its date) and is listed in ``excerpted``: its
    id reads the whole round (the Reader's ``read_round`` tool). ``packing="whole"`` is the earlier rule, kept for
    comparison: whole hits best-first, each cut at ``max_item_tokens``.

    Each piece is charged as rendered (item line with its date, session heading, separators), and the final text
    is measured again, dropping the least relevant hits if the estimate was short, so the budget is a guarantee.
    """
    if token_budget < 1:
        raise ValueError("token_budget must be positive")
    header = f"Question date: {_fmt_date(question_date)}\n" if question_date else ""
    truncated = False
    if header and estimate_tokens(header + "\n") > token_budget:
        header, truncated = "", True
    per_item = max_item_tokens or max(64, token_budget // 3)
    packer = _Packer(header, token_budget)
    if packing == "whole":
        for h in hits:
            body, part = _shown(h, frozenset(), per_item)
            if part:  # the earlier rule: the opening of the text, not a window
                body = h.text[: per_item * CHARS_PER_TOKEN].rstrip() + " …"
            truncated |= part | (not packer.add(_Piece(h, body, False)))
    else:
        terms = question_terms(query)
        core = max(MIN_CORE_TOKENS, token_budget // CORE_SHARE)
        firsts: dict[str, Hit] = {}  # the best hit of each of the best FIRST_SESSIONS sessions
        for h in hits:
            if len(firsts) < first_sessions or h.session_id in firsts:
                firsts.setdefault(h.session_id, h)
        first_ids = {h.id for h in firsts.values()}
        order = [*firsts.values(), *(h for h in hits if h.id not in first_ids)]
        for h in order:
            body, part = _shown(h, terms, min(core, per_item))
            truncated |= not packer.add(_Piece(h, body, part))  # an excerpt grown whole later is not cut
        rank = {h.id: i for i, h in enumerate(hits)}
        for p in sorted(packer.chosen, key=lambda p: rank[p.hit.id]):
            if p.part:
                packer.grow(p, terms, per_item)
        truncated |= any(p.part for p in packer.chosen)
    text, chosen = packer.finish()
    truncated |= len(chosen) < len(packer.chosen)
    return Context(
        query=query,
        text=text,
        hits=[p.hit for p in chosen],
        token_count=estimate_tokens(text),
        token_budget=token_budget,
        truncated=truncated,
        excerpted=[p.hit.id for p in chosen if p.part],
    )


class _Packer:
    """The running choice and its charged cost (each piece as rendered, headings included)."""

    def __init__(self, header: str, budget: int) -> None:
        self.header = header
        self.budget = budget
        self.used = estimate_tokens(header + "\n") if header else 0
        self.chosen: list[_Piece] = []
        self.sessions: set[str] = set()

    def _cost(self, p: _Piece) -> int:
        return estimate_tokens(_item(p.hit, p.body, p.part) + "\n")

    def add(self, p: _Piece) -> bool:
        cost = self._cost(p)
        if p.hit.session_id not in self.sessions:
            # The heading shows the session's earliest chosen date, not known yet: charge the longer form.
            heading = max(_heading(p.hit, p.hit.date), _heading(p.hit, None), key=len)
            cost += estimate_tokens(heading + "\n") + 1  # + the blank line that closes the section
        if self.used + cost > self.budget:
            return False
        self.used += cost
        self.sessions.add(p.hit.session_id)
        self.chosen.append(p)
        return True

    def grow(self, p: _Piece, terms: frozenset[str], per_item: int) -> None:
        """Show more of ``p`` with what the budget has left: whole if that fits ``per_item``, else a larger
        excerpt."""
        now = self._cost(p)
        room = min(per_item, now + self.budget - self.used - 1)
        if room <= now:
            return
        body, part = _shown(p.hit, terms, room)
        bigger = _Piece(p.hit, body, part)
        cost = self._cost(bigger)
        if len(body) > len(p.body) and self.used - now + cost <= self.budget:
            self.used += cost - now
            p.body, p.part = bigger.body, bigger.part

    def finish(self) -> tuple[str, list[_Piece]]:
        chosen = list(self.chosen)
        text = _render(self.header, chosen)
        while (
            chosen and estimate_tokens(text) > self.budget
        ):  # a safety net; the charges above are upper bounds
            chosen.pop()
            text = _render(self.header, chosen)
        return text, chosen
