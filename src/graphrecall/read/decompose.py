"""Rule-based decomposition of compound questions into sub-questions that are retrieved separately.

"How many days passed between X and Y?" needs the evidence for X *and* the evidence for Y, which usually sit in
different sessions; one embedding of the whole question tends to find only one of them. Each sub-question is
searched on its own and the ranked lists are fused (RRF) with the original question's list. Rules, not an LLM:
the shapes are few and regular, and a wrong split costs only some extra retrieval, never the original list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["between", "order", "gap", "sum", "none"]

_ART = r"(?:the |a |an |my )?"
_DAY = r"(?:the (?:day|date|time) (?:when |that )?)?"
_BETWEEN = re.compile(rf"\bbetween {_DAY}(?P<a>.+?) and {_DAY}(?P<b>.+?)[?.!]*$", re.IGNORECASE)
_ORDER = re.compile(
    r"\b(?:did|do|have) i (?P<verb>[\w' -]+?) (?:first|earlier|last|most recently)\b,?\s*"
    rf"{_ART}(?P<a>.+?),? or {_ART}(?P<b>.+?)[?.!]*$",
    re.IGNORECASE,
)
_ORDER_LOOSE = re.compile(
    rf"\b(?:first|earlier|most recently|last),\s*{_ART}(?P<a>.+?),? or {_ART}(?P<b>.+?)[?.!]*$",
    re.IGNORECASE,
)
_GAP = re.compile(
    r"^how (?:many|much) (?:days|weeks|months|years|time)\s+(?:had |have )?(?:passed )?(?P<dir>before|after) "
    r"(?P<a>.+?) did i (?P<b>.+?)[?.!]*$",
    re.IGNORECASE,
)
_TAKE = re.compile(
    r"^how (?:many|much) (?:days|weeks|months|years|time) did it take (?:for )?(?:me )?(?:to )?(?P<b>.+?) "
    r"(?:after|since) (?P<a>.+?)[?.!]*$",
    re.IGNORECASE,
)
_SUM = re.compile(
    r"\btotal (?P<measure>(?:number|amount|cost|distance|price|time) of )?(?:money )?(?P<a>.+?) and "
    rf"{_ART}(?P<b>.+?)(?: combined| in total| altogether)?[?.!]*$",
    re.IGNORECASE,
)
_SPENT = re.compile(
    rf"\b(?P<verb>spent|spend|paid|pay|earned|raised) (?:on|for) {_ART}(?P<a>.+?) and {_ART}(?P<b>.+?)"
    r"(?: combined| in total| altogether)?[?.!]*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Decomposition:
    """Sub-questions (empty when the question is not compound) and which rule produced them."""

    kind: Kind
    sub_questions: list[str] = field(default_factory=list)

    @property
    def compound(self) -> bool:
        return bool(self.sub_questions)


def _clean(part: str) -> str:
    return " ".join(part.strip(" ,;:'\"").split())


def _pair(kind: Kind, a: str, b: str, prefix: str = "") -> Decomposition:
    a, b = _clean(a), _clean(b)
    if not a or not b or a.lower() == b.lower():
        return Decomposition("none")
    return Decomposition(kind, [f"{prefix}{a}".strip(), f"{prefix}{b}".strip()])


def decompose(question: str) -> Decomposition:
    """Split a compound question into the parts whose evidence must be found separately."""
    q = " ".join(question.split())
    if m := _BETWEEN.search(q):
        return _pair("between", m["a"], m["b"])
    if m := _ORDER.search(q):
        return _pair("order", m["a"], m["b"], prefix=f"I {m['verb'].strip()} ")
    if m := _ORDER_LOOSE.search(q):
        return _pair("order", m["a"], m["b"])
    if m := _GAP.search(q):
        return _pair("gap", m["a"], f"I {m['b']}")
    if m := _TAKE.search(q):
        return _pair("gap", m["a"], m["b"])
    if m := _SPENT.search(q):
        return _pair("sum", m["a"], m["b"], prefix=f"{m['verb']} on ")
    if m := _SUM.search(q):
        return _pair("sum", m["a"], m["b"], prefix=m["measure"] or "")
    return Decomposition("none")
