"""Parsing the reader's reply (NOTES / PREFERENCES / ANSWER / EVIDENCE sections) leniently.

Free text rather than structured output for the answer itself: tool calling and JSON mode do not mix well on
several providers, and small models write better answers in prose. The sections are parsed forgivingly: a reply
without markers is taken whole as the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SECTION = re.compile(
    r"^\s*\**\s*(NOTES|PREFERENCES|ANSWER|EVIDENCE)\s*\**\s*:\s*", re.IGNORECASE | re.MULTILINE
)
_ID = re.compile(r"\[([^\[\]\s,]+)\]")
_ABSTAIN = re.compile(
    r"^\W*(i (do not|don't|dont) know|i (cannot|can't|can not) (answer|tell|find|determine)|"
    r"(there is )?(not enough|no|insufficient) (information|evidence)|unknown\b|"
    r"i (have no|don't have|do not have) (any )?(information|record|memory))",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ParsedReply:
    answer: str
    notes: str = ""
    preferences: list[str] = field(default_factory=list)
    evidence_ids: list[str] = field(default_factory=list)
    mentioned_ids: list[str] = field(default_factory=list)

    @property
    def abstains(self) -> bool:
        return is_abstention(self.answer)


def is_abstention(text: str) -> bool:
    """Whether an answer declines ("I don't know", "not enough information"...)."""
    return bool(_ABSTAIN.search(text.strip()))


def parse_reply(text: str) -> ParsedReply:
    sections: dict[str, str] = {}
    marks = list(_SECTION.finditer(text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        sections.setdefault(m[1].upper(), text[m.end() : end].strip())
    answer = sections.get("ANSWER")
    if answer is None:
        head = text[: marks[0].start()] if marks else text
        answer = head.strip() or text.strip()
    prefs = [
        re.sub(r"^[-*•]\s*", "", line).strip()
        for line in sections.get("PREFERENCES", "").splitlines()
        if line.strip() and line.strip() not in "-*"
    ]
    return ParsedReply(
        answer=answer.strip(),
        notes=sections.get("NOTES", ""),
        preferences=prefs,
        evidence_ids=list(dict.fromkeys(_ID.findall(sections.get("EVIDENCE", "")))),
        mentioned_ids=list(dict.fromkeys(_ID.findall(text))),
    )
