"""Context assembly: the evidence a reader sees, dated, grouped by session, in chronological order, within budget.

Selection is by relevance (best hits first, until the token budget is spent); presentation is by time, because
readers reason about "before/after/latest" far better over a chronological transcript than over a score list.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from graphrecall.models import Context, Hit


def estimate_tokens(text: str) -> int:
    """~4 characters per token for English; exact counts need the reader's tokenizer, which we do not have here."""
    return max(1, (len(text) + 3) // 4)


def _fmt_date(d: datetime | None) -> str:
    return d.strftime("%Y-%m-%d (%a) %H:%M") if d else "unknown date"


def build_context(
    query: str,
    hits: list[Hit],
    token_budget: int,
    *,
    question_date: datetime | None = None,
    max_item_tokens: int | None = None,
) -> Context:
    if token_budget < 1:
        raise ValueError("token_budget must be positive")
    header = f"Question date: {_fmt_date(question_date)}\n" if question_date else ""
    used = estimate_tokens(header) if header else 0
    per_item = max_item_tokens or max(64, token_budget // 3)
    chosen: list[tuple[Hit, str]] = []
    truncated = False
    seen_sessions: set[str] = set()
    for h in hits:
        body = h.text
        if estimate_tokens(body) > per_item:
            body = body[: per_item * 4].rstrip() + " …"
            truncated = True
        cost = estimate_tokens(f"[{h.id}] {body}\n") + (0 if h.session_id in seen_sessions else 12)
        if used + cost > token_budget:
            truncated = True
            continue
        used += cost
        seen_sessions.add(h.session_id)
        chosen.append((h, body))
    by_session: OrderedDict[str, list[tuple[Hit, str]]] = OrderedDict()
    for h, body in sorted(chosen, key=lambda hb: (hb[0].date or datetime.min, hb[0].session_id, hb[0].id)):
        by_session.setdefault(h.session_id, []).append((h, body))
    parts = [header] if header else []
    for sid, items in by_session.items():
        parts.append(f"### Session {sid} — {_fmt_date(items[0][0].date)}")
        for h, body in items:
            parts.append(f"[{h.id}] ({h.kind}, {_fmt_date(h.date)})\n{body}")
        parts.append("")
    text = "\n".join(parts).strip() + "\n"
    return Context(
        query=query,
        text=text,
        hits=[h for h, _ in chosen],
        token_count=estimate_tokens(text),
        token_budget=token_budget,
        truncated=truncated,
    )
