"""Test data shaped like a chat history: named sessions of alternating user and assistant turns, a day apart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any


def dialogue_sessions(
    sessions: Mapping[str, Sequence[str]], start: datetime = datetime(2024, 4, 1, 10)
) -> list[dict[str, Any]]:
    """``add_sessions`` input: session ``i`` dated ``start + i`` days, its turns user, assistant, user, ..."""
    return [
        {
            "session_id": sid,
            "date": start + timedelta(days=i),
            "messages": [
                {"role": "user" if j % 2 == 0 else "assistant", "content": text}
                for j, text in enumerate(turns)
            ],
        }
        for i, (sid, turns) in enumerate(sessions.items())
    ]
