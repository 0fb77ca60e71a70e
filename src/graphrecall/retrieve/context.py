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


def _heading(session_id: str, d: datetime | None) -> str:
    return f"### Session {session_id} — {_fmt_date(d)}"


def _item(h: Hit, body: str) -> str:
    return f"[{h.id}] ({h.kind}, {_fmt_date(h.date)})\n{body}"


def _render(header: str, chosen: list[tuple[Hit, str]]) -> str:
    by_session: OrderedDict[str, list[tuple[Hit, str]]] = OrderedDict()
    for h, body in sorted(chosen, key=lambda hb: (hb[0].date or datetime.min, hb[0].session_id, hb[0].id)):
        by_session.setdefault(h.session_id, []).append((h, body))
    parts = [header] if header else []
    for sid, items in by_session.items():
        parts.append(_heading(sid, items[0][0].date))
        parts.extend(_item(h, body) for h, body in items)
        parts.append("")
    return "\n".join(parts).strip() + "\n"


def build_context(
    query: str,
    hits: list[Hit],
    token_budget: int,
    *,
    question_date: datetime | None = None,
    max_item_tokens: int | None = None,
) -> Context:
    """Pick hits best-first while their rendered cost fits ``token_budget``; ``token_count`` never exceeds it.

    Each piece is charged as rendered (item line with its date, session heading, separators), and the final text
    is measured again, dropping the least relevant hits if the estimate was short, so the budget is a guarantee.
    """
    if token_budget < 1:
        raise ValueError("token_budget must be positive")
    header = f"Question date: {_fmt_date(question_date)}\n" if question_date else ""
    truncated = False
    if header and estimate_tokens(header + "\n") > token_budget:
        header, truncated = "", True
    used = estimate_tokens(header + "\n") if header else 0
    per_item = max_item_tokens or max(64, token_budget // 3)
    chosen: list[tuple[Hit, str]] = []
    seen_sessions: set[str] = set()
    for h in hits:
        body = h.text
        if estimate_tokens(body) > per_item:
            body = body[: per_item * 4].rstrip() + " …"
            truncated = True
        cost = estimate_tokens(_item(h, body) + "\n")
        if h.session_id not in seen_sessions:
            # The heading shows the session's earliest chosen date, not known yet: charge the longer form.
            heading = max(_heading(h.session_id, h.date), _heading(h.session_id, None), key=len)
            cost += estimate_tokens(heading + "\n") + 1  # + the blank line that closes the section
        if used + cost > token_budget:
            truncated = True
            continue
        used += cost
        seen_sessions.add(h.session_id)
        chosen.append((h, body))
    text = _render(header, chosen)
    while chosen and estimate_tokens(text) > token_budget:  # a safety net; the charges above are upper bounds
        chosen.pop()
        truncated = True
        text = _render(header, chosen)
    return Context(
        query=query,
        text=text,
        hits=[h for h, _ in chosen],
        token_count=estimate_tokens(text),
        token_budget=token_budget,
        truncated=truncated,
    )
