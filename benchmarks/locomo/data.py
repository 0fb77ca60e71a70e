"""Loading LoCoMo conversations as ``Memory`` sessions, and their QA items.

A LoCoMo sample has ``conversation`` (``speaker_a``, ``speaker_b``, ``session_N`` turn lists with ``speaker``,
``dia_id`` and ``text``, and ``session_N_date_time`` such as "1:56 pm on 8 May, 2023") and ``qa`` items
(``question``, ``answer``, ``evidence`` dia ids, ``category``). Both speakers are people; ``speaker_a`` is stored as
the user and ``speaker_b`` as the other party, each turn prefixed with the speaker's name so that questions about
either person find their words (or, with ``both_user``, both speakers as user turns). Categories (as in the released data): 1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial (no answer in the conversation; left out by default, as in most published results).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import load_list

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class QA:
    id: str
    sample_id: str
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]

    @property
    def category_name(self) -> str:
        return CATEGORIES.get(self.category, str(self.category))


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[dict[str, Any], ...]
    last_date: datetime
    qa: tuple[QA, ...]
    # Per session, the dia id of each stored message (same order): labels for scoring, never stored.
    dia_ids: tuple[tuple[str, ...], ...] = ()


def parse_locomo_date(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" -> datetime(2023, 5, 8, 13, 56)."""
    cleaned = " ".join(text.replace(",", "").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y", "%d %B %Y"):
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo date {text!r}")


def _conversation(raw: dict[str, Any], categories: set[int], both_user: bool = False) -> Conversation:
    conv = raw["conversation"]
    a, b = str(conv["speaker_a"]), str(conv["speaker_b"])
    numbers = sorted(int(m[1]) for key in conv if (m := _SESSION.match(key)))
    sessions = []
    dia_ids: list[tuple[str, ...]] = []
    last = datetime.min
    for n in numbers:
        turns = conv[f"session_{n}"]
        if not turns:
            continue
        when = parse_locomo_date(str(conv[f"session_{n}_date_time"]))
        last = max(last, when)
        kept = [t for t in turns if str(t.get("text", "")).strip()]
        messages = [
            {
                "role": "user" if both_user or t["speaker"] == a else "assistant",
                "content": f"{t['speaker']}: {t['text']}",
            }
            for t in kept
        ]
        sessions.append({"session_id": f"session_{n}", "date": when.isoformat(), "messages": messages})
        dia_ids.append(tuple(str(t.get("dia_id", "")) for t in kept))
    sample = str(raw.get("sample_id", "conv"))
    qa = tuple(
        QA(
            id=f"{sample}#{i}", sample_id=sample, question=str(item["question"]),
            answer=str(item.get("answer", item.get("adversarial_answer", ""))), category=int(item["category"]),
            evidence=tuple(str(e) for e in item.get("evidence", [])),
        )
        for i, item in enumerate(raw["qa"])
        if int(item["category"]) in categories
    )  # fmt: skip
    return Conversation(sample, a, b, tuple(sessions), last, qa, tuple(dia_ids))


def load(
    path: str | Path, categories: set[int] | None = None, *, both_user: bool = False
) -> list[Conversation]:
    """Conversations of a LoCoMo file (``.json`` or ``.json.gz``) with their QA items of ``categories``
    (default 1-4). ``both_user`` stores both speakers' turns as user messages (each still prefixed with its
    speaker's name) instead of speaker B as the other party."""
    raw = load_list(path, "LoCoMo", "conversations")
    return [_conversation(item, categories or {1, 2, 3, 4}, both_user) for item in raw]


_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = re.compile(r"[^\w\s]")


def normalize(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the usual SQuAD/LoCoMo normalisation)."""
    return " ".join(_ARTICLES.sub(" ", _PUNCT.sub(" ", text.lower())).split())


def token_f1(prediction: str, gold: str) -> float:
    """Token-overlap F1 between normalised prediction and gold (0 when either is empty)."""
    p, g = normalize(prediction).split(), normalize(gold).split()
    if not p or not g:
        return float(p == g)
    common: dict[str, int] = {}
    for t in g:
        common[t] = common.get(t, 0) + 1
    overlap = 0
    for t in p:
        if common.get(t, 0) > 0:
            overlap += 1
            common[t] -= 1
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(p), overlap / len(g)
    return 2 * precision * recall / (precision + recall)
