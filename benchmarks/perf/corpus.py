"""Real chat text for the perf benchmarks: LongMemEval_S haystack sessions and questions.

Sessions are taken in the order the dataset lists them (question by question, deduplicated by session id), which is
the order the LongMemEval benchmark fills the shared embedding cache in, so the first few thousand rounds are the
cheapest to vectorize.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from graphrecall import ingest as ing
from graphrecall.dates import parse_date
from graphrecall.store.rows import MessageRow, RoundRow

DATA = Path("/work/shared/data/longmemeval/longmemeval_s_dev.json.gz")


@dataclass
class ChatSession:
    """One haystack session as ``Memory.add_sessions`` takes it, plus the rows ingest would derive from it."""

    session_id: str
    date: datetime
    messages: list[dict[str, str]]
    message_rows: list[MessageRow]
    rounds: list[RoundRow]

    def as_input(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "date": self.date, "messages": self.messages}


@dataclass
class Corpus:
    sessions: list[ChatSession]
    questions: list[tuple[str, datetime]]

    def take_rounds(self, n: int) -> list[ChatSession]:
        """The shortest prefix of sessions holding at least ``n`` rounds."""
        out: list[ChatSession] = []
        total = 0
        for s in self.sessions:
            if total >= n:
                break
            out.append(s)
            total += len(s.rounds)
        return out


def load(path: Path = DATA, *, max_sessions: int | None = None) -> Corpus:
    """Parse the dataset; blank messages are dropped (the dataset has a few, and ingest rejects them)."""
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    seen: set[str] = set()
    sessions: list[ChatSession] = []
    questions: list[tuple[str, datetime]] = []
    for item in data:
        questions.append((item["question"], parse_date(item["question_date"], where="question_date")))
        for sid, date, sess in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
        ):
            if sid in seen or (max_sessions is not None and len(sessions) >= max_sessions):
                continue
            seen.add(sid)
            msgs = [{"role": m["role"], "content": m["content"]} for m in sess if m["content"].strip()]
            if not msgs:
                continue
            when = parse_date(date, where="date")
            rows = ing.message_rows(sid, ing.validate_messages(msgs), start_idx=0, date=when)
            sessions.append(ChatSession(sid, when, msgs, rows, ing.build_rounds(sid, rows)))
    return Corpus(sessions, questions)


def embed_texts(rounds: list[RoundRow]) -> list[str]:
    """Exactly the texts ``graphrecall.writer.Writer.embed_rounds`` sends to the embedder for these rounds, in the same order."""
    texts: list[str] = []
    for r in rounds:
        u, p = ing.embedding_texts(r)
        texts.append(u)
        if p != u:
            texts.append(p)
    return texts
