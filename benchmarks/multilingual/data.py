"""Loading the multilingual test set (``tests/data/multilingual/{dev,test}.json``, see its README).

The set is the small-store format with languages and two more labels, so the models extend the small-store ones
(``benchmarks/smallstore/data.py``: same sessions, rounds, question date, gold ids checked against session ids) and
add what a hand-written multilingual file gets wrong most easily: a label left out (every label is required, so
a forgotten ``relative_date`` is an error, not a silent ``false``), a ``gold_round`` past the end of its session, an
id used twice, a question marked cross-lingual whose gold session is in its own language. Every error names the
file, the history and the question or session it is in (``DataError``), instead of a pydantic path of list indexes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, model_validator

from benchmarks.smallstore import data as smallstore

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "multilingual"
SPLITS: tuple[str, ...] = ("dev", "test")
MIN_SESSIONS, MAX_SESSIONS = 5, 12
_CODE = r"[a-z]{2}"
LANGUAGE = re.compile(rf"^{_CODE}$")  # ISO 639-1
LANGUAGES = re.compile(rf"^{_CODE}(\+{_CODE})*$")  # "ru", or "en+ru" for a person who switches


class DataError(ValueError):
    """A test-set file that is not what the README promises; the message names the file and the item."""


def languages(spec: str) -> set[str]:
    """The codes in a language field: ``"en+ru"`` -> ``{"en", "ru"}``."""
    return set(spec.split("+"))


class Session(smallstore.Session):
    model_config = ConfigDict(extra="forbid")
    language: str | None = Field(
        default=None,
        pattern=LANGUAGES.pattern,
        description="the language(s) it is written in; required in a mixed history, else the history's",
    )


class Question(smallstore.Question):
    model_config = ConfigDict(extra="forbid")
    language: str = Field(pattern=LANGUAGE.pattern, description="the one language the question is asked in")
    gold_round: int = Field(ge=0, description="round index inside gold[0]")
    changed: bool = Field(description="the answer changed over time; the newest session stating it is gold")
    relative_date: bool = Field(
        description='the question or its answer involves a relative date ("last month")'
    )
    cross_lingual: bool = Field(description="asked in a language that gold[0] is not written in")


class History(smallstore.History):
    model_config = ConfigDict(extra="forbid")
    language: str = Field(pattern=LANGUAGES.pattern)
    # narrower item types than the small-store lists (pydantic validates them; mypy sees list invariance)
    sessions: list[Session] = Field(min_length=MIN_SESSIONS, max_length=MAX_SESSIONS)  # type: ignore[assignment]
    questions: list[Question] = Field(min_length=1)  # type: ignore[assignment]

    def session_language(self, session_id: str) -> str:
        s = next(s for s in self.sessions if s.session_id == session_id)
        return s.language or self.language

    @model_validator(mode="after")
    def _labels_agree_with_sessions(self) -> History:
        mine = languages(self.language)
        for s in self.sessions:
            if s.language is None and len(mine) > 1:
                raise ValueError(f"session {s.session_id}: a session of a mixed history needs its language")
            if s.language is not None and not languages(s.language) <= mine:
                raise ValueError(
                    f"session {s.session_id}: language {s.language!r} is not one of the history's ({self.language})"
                )
        question_ids = [q.id for q in self.questions]
        repeated = sorted({i for i in question_ids if question_ids.count(i) > 1})
        if repeated:
            raise ValueError(f"question ids {repeated} are used more than once")
        by_id = {s.session_id: s for s in self.sessions}
        for q in self.questions:
            if q.gold[0] not in by_id:
                continue  # the small-store validator names it
            if len(set(q.gold)) != len(q.gold):
                raise ValueError(f"question {q.id}: gold {q.gold} names a session twice")
            first = by_id[q.gold[0]]
            n_rounds = sum(m.role == "user" for m in first.messages)
            if q.gold_round >= n_rounds:
                raise ValueError(
                    f"question {q.id}: gold_round {q.gold_round} but {first.session_id} has {n_rounds} round(s)"
                )
            said_in = languages(self.session_language(first.session_id))
            if q.cross_lingual != (q.language not in said_in):
                raise ValueError(
                    f"question {q.id}: cross_lingual is {q.cross_lingual} but it is asked in {q.language!r} "
                    f"and {first.session_id} is in {'+'.join(sorted(said_in))!r}"
                )
        return self


def _where(raw: dict[str, Any], loc: Sequence[int | str]) -> str:
    """'question m01-q3' for a pydantic location like ('questions', 2, 'language'), by the item's own id."""
    if len(loc) >= 2 and loc[0] in ("questions", "sessions") and isinstance(loc[1], int):
        items = raw.get(loc[0])
        item = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
        key = "id" if loc[0] == "questions" else "session_id"
        name = item.get(key) if isinstance(item, dict) else None
        label = f"{loc[0][:-1]} {name}" if name else f"{loc[0][:-1]} #{loc[1] + 1}"
        rest = ".".join(str(x) for x in loc[2:])
        return f"{label}: {rest}" if rest else label
    return ".".join(str(x) for x in loc)


def _history(raw: Any, index: int, path: Path) -> History:
    if not isinstance(raw, dict):
        raise DataError(f"{path}: history #{index + 1} is not an object")
    name = f"history {raw.get('id') or f'#{index + 1}'}"
    try:
        return History.model_validate(raw)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            where = _where(raw, err["loc"])
            msg = (
                str(err["msg"])
                .removeprefix("Value error, ")
                .removeprefix(f"{name}, ")
                .removeprefix(f"{name}: ")
            )
            problems.append(f"{where}: {msg}" if where else msg)
        raise DataError(f"{path}: {name}: " + "; ".join(problems)) from None


def load(split: str, data_dir: Path = DATA_DIR) -> list[History]:
    """The histories of one split, validated; a ``DataError`` names the file and the item at fault."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    path = data_dir / f"{split}.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: {e}") from None
    if (
        not isinstance(raw, dict)
        or set(raw) != {"split", "histories"}
        or not isinstance(raw["histories"], list)
    ):
        raise DataError(f'{path}: expected an object with "split" and a list of "histories"')
    if raw["split"] != split:
        raise DataError(f"{path} says it is the {raw['split']!r} split")
    histories = [_history(h, i, path) for i, h in enumerate(raw["histories"])]
    for kind, ids in (
        ("history", [h.id for h in histories]),
        ("session", [s.session_id for h in histories for s in h.sessions]),
        ("question", [q.id for h in histories for q in h.questions]),
    ):
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise DataError(f"{path}: {kind} ids {repeated} are used more than once")
    return histories


def load_splits(splits: Sequence[str], data_dir: Path = DATA_DIR) -> list[tuple[str, History]]:
    """(split, history) for each split asked for; a history id in two splits is an error (the split is by history)."""
    out = [(split, h) for split in splits for h in load(split, data_dir)]
    seen: dict[str, str] = {}
    for split, h in out:
        if h.id in seen:
            raise DataError(f"{data_dir}: history {h.id} is in both {seen[h.id]}.json and {split}.json")
        seen[h.id] = split
    return out
