"""Turning chat input into storage rows: validation, ids, and rounds. Pure functions, no I/O.

A *round* is a user turn with the replies that followed it, up to the next user turn: the default retrieval unit
for raw history (a question is usually about something the user said, and the reply holds what was recommended).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from graphrecall.dates import parse_date
from graphrecall.errors import InvalidInput
from graphrecall.models import Message, Role, validate_identifier
from graphrecall.store.rows import USER_SIDE, MessageRow, RoundRow, round_texts
from graphrecall.text import index_terms, message_language

ROLE_NAMES = ", ".join(r.value for r in Role)


def _describe(err: ValidationError, where: str) -> InvalidInput:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    msg = first["msg"]
    if first["loc"] and first["loc"][0] == "role":
        msg = f"role {first.get('input')!r} is not one of {ROLE_NAMES}"
    return InvalidInput(msg, where=f"{where}.{loc}" if loc else where)


def validate_messages(items: Iterable[Any], *, where: str = "messages") -> list[Message]:
    """Validate raw message dicts (or Messages); the first bad one raises ``InvalidInput`` naming it."""
    out: list[Message] = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        if isinstance(item, Message):
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            raise InvalidInput(
                f"expected an object with role and content, got {type(item).__name__}", where=w
            )
        for key in ("role", "content"):
            if key not in item:
                raise InvalidInput(f"missing field {key!r}", where=w)
        data = dict(item)
        if isinstance(data.get("at"), str):
            data["at"] = parse_date(data["at"], where=f"{w}.at")
        try:
            out.append(Message.model_validate(data))
        except ValidationError as e:
            raise _describe(e, w) from None
    return out


def message_rows(
    session_id: str, messages: Sequence[Message], *, start_idx: int, date: datetime
) -> list[MessageRow]:
    validate_identifier(session_id, "session_id")
    rows = []
    seen: set[str] = set()
    for offset, m in enumerate(messages):
        idx = start_idx + offset
        mid = m.id or f"{session_id}#{idx}"
        if mid in seen:
            raise InvalidInput(f"duplicate message id {mid!r}", where=f"messages[{offset}].id")
        seen.add(mid)
        # The language is detected here, once per message (a caller's ``lang`` is not taken: it is the store's).
        lang = message_language(m.content)
        rows.append(MessageRow(mid, session_id, idx, m.role.value, m.content, m.at or date, lang))
    return rows


def build_rounds(session_id: str, messages: Sequence[MessageRow]) -> list[RoundRow]:
    """Group a session's messages (in order) into rounds. System messages are kept as messages only."""
    groups: list[list[MessageRow]] = []
    for m in messages:
        if m.role == Role.system.value:
            continue
        if m.role in USER_SIDE or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    rounds = []
    for i, g in enumerate(groups):
        text, user, reply = round_texts([(m.role, m.text) for m in g])
        rounds.append(
            RoundRow(
                id=f"{session_id}@{i}",
                session_id=session_id,
                idx=i,
                text=text,
                user_text=user,
                reply_text=reply,
                terms=index_terms(
                    f"{user}\n{reply}"
                ),  # not ``text``: role labels would be terms of every round
                at=g[0].at,
                message_ids=[m.id for m in g],
            )
        )
    return rounds


# Replies are long (1.7k characters on average in LongMemEval, past MiniLM's 256-token window) and their topic is
# stated in their opening: embedding a short prefix keeps the reply vector's signal (what the assistant talked
# about) at the cost of a user turn. Measured on 2 cores: the reply side was ~80% of ingest embedding time with
# whole replies; the reply's details stay searchable through BM25 over the whole round.
REPLY_EMBED_CHARS = 200


def embedding_texts(r: RoundRow) -> tuple[str, str]:
    """The (user-side, reply-side) texts embedded for a round; a round missing one side reuses the other."""
    user = r.user_text or r.reply_text
    reply = r.reply_text[:REPLY_EMBED_CHARS] if r.reply_text else user
    return user, reply
