"""Loading LongMemEval questions, turning haystacks into ``Memory`` input, and locating the labelled evidence.

The loader keeps labels (``has_answer``, ``answer_session_ids``) apart from what a retriever may see:
``session_inputs`` passes only role and content, so no label or evidence hint can leak into the store. Evidence
ids are derived with the library's own round builder, so they name exactly the rounds ``Memory`` stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import load_list
from graphrecall import dates, ingest

ABSTENTION_SUFFIX = "_abs"


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    has_answer: bool


@dataclass(frozen=True)
class HaystackSession:
    session_id: str
    date: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    question_id: str
    question_type: str
    question: str
    question_date: str
    answer: str
    answer_session_ids: tuple[str, ...]
    sessions: tuple[HaystackSession, ...]

    @property
    def is_abstention(self) -> bool:
        """Abstention questions have no evidence to retrieve; the official retrieval evaluation skips them."""
        return self.question_id.endswith(ABSTENTION_SUFFIX)


def _sessions(raw: dict[str, Any]) -> tuple[HaystackSession, ...]:
    """Haystack sessions in order. A few haystacks repeat a session verbatim under the same id; the copy is
    dropped (one id, one session), while a repeated id with different content is an error."""
    out: dict[str, HaystackSession] = {}
    for sid, date, turns in zip(
        raw["haystack_session_ids"], raw["haystack_dates"], raw["haystack_sessions"], strict=True
    ):
        s = HaystackSession(
            session_id=str(sid),
            date=str(date),
            turns=tuple(
                Turn(str(t["role"]), str(t["content"]), bool(t.get("has_answer", False))) for t in turns
            ),
        )
        if s.session_id in out and out[s.session_id].turns != s.turns:
            raise ValueError(f"session id {s.session_id!r} appears twice with different content")
        out.setdefault(s.session_id, s)
    return tuple(out.values())


def _question(raw: dict[str, Any]) -> Question:
    sessions = _sessions(raw)
    return Question(
        question_id=str(raw["question_id"]),
        question_type=str(raw["question_type"]),
        question=str(raw["question"]),
        question_date=str(raw["question_date"]),
        answer=str(raw["answer"]),
        answer_session_ids=tuple(str(s) for s in raw["answer_session_ids"]),
        sessions=sessions,
    )


def load(
    path: str | Path,
    *,
    limit: int | None = None,
    types: Iterable[str] | None = None,
    include_abstention: bool = False,
) -> list[Question]:
    """Questions from a LongMemEval JSON file (``.json`` or ``.json.gz``), in file order, filtered, then limited."""
    raw = load_list(path, "LongMemEval", "questions")
    wanted = set(types) if types else None
    out: list[Question] = []
    for i, item in enumerate(raw):
        try:
            q = _question(item)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: question [{i}] is malformed: {e!r}") from None
        if q.is_abstention and not include_abstention:
            continue
        if wanted is not None and q.question_type not in wanted:
            continue
        out.append(q)
        if limit is not None and len(out) >= limit:
            break
    return out


def _kept(turns: Sequence[Turn]) -> list[Turn]:
    """Blank messages are dropped: ``Memory`` rejects them (a handful exist in the raw data)."""
    return [t for t in turns if t.content.strip()]


def session_inputs(q: Question) -> list[dict[str, Any]]:
    """The haystack as ``Memory.add_sessions`` input: ids, dates, role and content only (never labels)."""
    return [
        {
            "session_id": s.session_id,
            "date": s.date,
            "messages": [{"role": t.role, "content": t.content} for t in _kept(s.turns)],
        }
        for s in q.sessions
        if _kept(s.turns)
    ]


@dataclass(frozen=True)
class LabelledRound:
    """A round as ``Memory`` stores it (same id, same text), with whether it holds an evidence message."""

    id: str
    session_id: str
    text: str
    evidence: bool


def rounds(session: HaystackSession) -> list[LabelledRound]:
    """The rounds ``Memory`` builds from this session, built by the library's own round builder."""
    kept = _kept(session.turns)
    if not kept:
        return []
    msgs = ingest.validate_messages([{"role": t.role, "content": t.content} for t in kept])
    rows = ingest.message_rows(session.session_id, msgs, start_idx=0, date=datetime(2000, 1, 1))
    evidence_msg_ids = {row.id for row, t in zip(rows, kept, strict=True) if t.has_answer}
    return [
        LabelledRound(
            id=r.id,
            session_id=session.session_id,
            text=f"{r.user_text}\n{r.reply_text}",
            evidence=bool(evidence_msg_ids.intersection(r.message_ids)),
        )
        for r in ingest.build_rounds(session.session_id, rows)
    ]


def all_rounds(q: Question) -> list[LabelledRound]:
    return [r for s in q.sessions for r in rounds(s)]


def evidence_rounds(q: Question, labelled: Sequence[LabelledRound] | None = None) -> set[str]:
    """Rounds holding a ``has_answer`` message inside an answer session: the turn-level relevance labels."""
    answer = set(q.answer_session_ids)
    return {r.id for r in (labelled or all_rounds(q)) if r.evidence and r.session_id in answer}


def parse_date(text: str) -> datetime:
    """LongMemEval's ``2023/05/20 (Sat) 07:47``."""
    return dates.parse_date(text, where="question_date")
