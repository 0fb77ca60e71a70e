"""Loading the small-store test set (``tests/data/smallstore/{dev,test}.json``) and naming the rounds it becomes.

The files are validated with pydantic on load, so a typo in a hand-written history (a gold id that names no session,
a question without a question mark's worth of text) fails loudly with the history and question it is in, instead
of quietly scoring as a miss. Round ids come from the library's own round builder, so they are exactly the ids
``Memory`` stores.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from graphrecall import ingest

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "smallstore"
SPLITS: tuple[str, ...] = ("dev", "test")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)


class Session(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
    date: datetime
    messages: list[Message] = Field(min_length=2)


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    question: str = Field(min_length=3)
    gold: list[str] = Field(min_length=1, description="session ids that answer the question")
    gold_round: int | None = Field(default=None, ge=0, description="round index inside gold[0], when natural")
    changed: bool = Field(
        default=False, description="the answer changed over time; the newest session is gold"
    )


class History(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    sessions: list[Session] = Field(min_length=5, max_length=15)
    questions: list[Question] = Field(min_length=1)

    @model_validator(mode="after")
    def _gold_names_sessions(self) -> History:
        ids = [s.session_id for s in self.sessions]
        if len(set(ids)) != len(ids):
            raise ValueError(f"history {self.id}: repeated session id")
        dates = [s.date for s in self.sessions]
        if dates != sorted(dates):
            raise ValueError(f"history {self.id}: sessions are not in date order")
        for q in self.questions:
            unknown = [g for g in q.gold if g not in ids]
            if unknown:
                raise ValueError(f"history {self.id}, question {q.id}: gold {unknown} names no session")
        return self

    @property
    def question_date(self) -> datetime:
        """The day after the last session: "now" for every question of this history."""
        return self.sessions[-1].date + timedelta(days=1)

    def session_inputs(self) -> list[dict[str, Any]]:
        """What ``Memory.add_sessions`` receives: ids, dates and messages, never the questions or labels."""
        return [
            {
                "session_id": s.session_id,
                "date": s.date.isoformat(),
                "messages": [m.model_dump() for m in s.messages],
            }
            for s in self.sessions
        ]

    def rounds(self) -> list[tuple[str, str, str]]:
        """(round id, session id, round text) as ``Memory`` builds them, in session order."""
        out: list[tuple[str, str, str]] = []
        for s in self.sessions:
            msgs = ingest.validate_messages([m.model_dump() for m in s.messages])
            rows = ingest.message_rows(s.session_id, msgs, start_idx=0, date=s.date)
            for r in ingest.build_rounds(s.session_id, rows):
                out.append((r.id, s.session_id, f"{r.user_text}\n{r.reply_text}"))
        return out


class SplitFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: Literal["dev", "test"]
    histories: list[History]


def load(split: str, data_dir: Path = DATA_DIR) -> list[History]:
    """The histories of one split, validated."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    path = data_dir / f"{split}.json"
    parsed = SplitFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
    if parsed.split != split:
        raise ValueError(f"{path} says it is the {parsed.split!r} split")
    return parsed.histories
