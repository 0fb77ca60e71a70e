"""Rule-based question analysis: which kind of memory question is this, and so which Reader mode and budget.

The categories are LongMemEval's, because they map to distinct reading strategies: preference questions want
synthesis (recommendations grounded in what the user likes), assistant questions want the assistant's own words,
temporal ones need dates and arithmetic, multi-session ones need aggregation over many sessions (a bigger context
budget), knowledge-update ones need the latest value. Rules are ordered from the most to the least specific cue;
an optional LLM fallback handles questions no rule claims (``classify(..., llm=...)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from graphrecall import timewords
from graphrecall.retrieve.intent import ASSISTANT_CUE, asks_about_assistant, asks_about_now
from graphrecall.text import language_of

if TYPE_CHECKING:
    from graphrecall.llm import LLM


class QuestionType(StrEnum):
    single_session_user = "single-session-user"
    single_session_assistant = "single-session-assistant"
    single_session_preference = "single-session-preference"
    multi_session = "multi-session"
    knowledge_update = "knowledge-update"
    temporal_reasoning = "temporal-reasoning"


ReaderMode = Literal["recall", "synthesis"]


@dataclass(frozen=True)
class QuestionPlan:
    """What the Reader should do with a question."""

    type: QuestionType
    mode: ReaderMode
    token_budget: int
    k: int
    rule: str


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_RULES: list[tuple[QuestionType, str, re.Pattern[str]]] = [
    (
        QuestionType.single_session_assistant,
        "asks what the assistant said",
        ASSISTANT_CUE,  # shared with the retriever, which then leans on reply-side signals
    ),
    (
        QuestionType.single_session_preference,
        "asks for a recommendation",
        _rx(
            r"\bany (suggestions?|recommendations?|tips|ideas|advice)\b|\bcan you (suggest|recommend)\b|"
            r"\bcould you (suggest|recommend)\b|\bwhat should i\b|\bcould there be a reason\b|\brecommend some\b|"
            r"\bsuggest (a|an|some)\b|\bideas for\b"
        ),
    ),
    (
        QuestionType.temporal_reasoning,
        "asks about order or elapsed time",
        _rx(
            r"\b\w+ ago\b|\bdays? (before|after|passed|had passed)\b|\b(weeks|months|days|years) (passed|had passed)\b|"
            r"\bpassed between\b|\bwhich \w+(?: \w+)? did i \w+ first\b|\bfirst,? (the )?.+ or\b|\border of\b|"
            r"\bmost recently, an? \b|\bhow old was i when\b|\blast week\b|\bpast weekend\b|\blast weekend\b.*\bwhich\b|"
            r"\bhow long had i been\b|\bhave i been accepted\b|\bhow many days did it take for me to find\b|"
            r"\bwhat was the first\b|\bwhen i (realized|attended|signed|started attending)\b"
        ),
    ),
    (
        QuestionType.multi_session,
        "asks to aggregate across sessions",
        _rx(
            r"\bin total\b|\btotal\b|\bcombined\b|\baltogether\b|\bhow many different\b|\bhow much more\b|"
            r"\bpercentage\b|\bboth\b|\bsave by\b|\bcompared to\b|\bthe most\b|\bhow many \w+ (did|have) i "
            r"(attend|visit|acquire|replace)|\bin the past (few|three|two|\d+) months\b|\bthis year\b|"
            r"\bhow old will\b|\bhow much did i save\b|\bhow many days did (i|it take)\b|\bwhat time did i\b|"
            r"\bwhich \w+ did i\b.*\bat\b|\bhow many \w+ services\b|\bmovie festivals\b"
        ),
    ),
    (
        QuestionType.knowledge_update,
        "asks for the current or latest value",
        _rx(
            r"\bcurrently\b|\bnow\b|\bmost recent(ly)?\b|\bstill\b|\binitially\b|\bsince (i )?start(ed|ing)\b|"
            r"\bhow long have i (been|had)\b|\bhow often do i\b|\bhow many \w+(?: \w+)? have i\b|"
            r"\bhave i (tried|seen|completed|added)\b|\bdid i (finish|attend)\b|\bdo i dedicate\b|"
            r"\bwhere did i get\b|\bwhen i just started\b|\bfirst three months\b|\bam i planning\b|"
            r"\bi was pre-approved\b|\bdo i have other\b|\bdid i mostly\b|\bdid i earn\b"
        ),
    ),
]

_BUDGETS: dict[QuestionType, tuple[int, int]] = {
    QuestionType.single_session_user: (2000, 10),
    QuestionType.single_session_assistant: (3000, 10),
    QuestionType.single_session_preference: (3000, 15),
    QuestionType.multi_session: (6000, 30),
    QuestionType.knowledge_update: (3000, 15),
    QuestionType.temporal_reasoning: (4000, 20),
}


# The same rules' cues in other languages, read only for a question in that language (``text.language_of``): an
# English question is classified exactly as before. What the cue modules already know is reused: the assistant and
# "now" cues (``retrieve.intent``), and the time phrases (``timewords``) for temporal questions.
_OTHER_RULES: dict[QuestionType, dict[str, re.Pattern[str]]] = {
    QuestionType.single_session_preference: {
        "ru": _rx(r"\b(посоветуй|посоветуйте|порекомендуй|порекомендуйте|что мне (стоит|лучше|выбрать)|подскажи|"
                  r"есть (идеи|советы))"),
        "zh": _rx(r"推荐|建议|我应该|有什么好的"),
        "de": _rx(r"\b(empfiehl|empfehlen sie|kannst du mir .* empfehlen|was soll ich|hast du (tipps|ideen|vorschläge))"),
        "es": _rx(r"\b(recomiéndame|recomiendas|me recomiendas|sugiéreme|qué debería|alguna (idea|sugerencia|recomendación))"),
        "fr": _rx(r"\b(recommande|recommandez|conseille|conseillez|suggère|que devrais-je|des idées)"),
    },
    QuestionType.temporal_reasoning: {
        "ru": _rx(r"\bназад\b|сколько (дней|недель|месяцев|лет) (прошло|назад)|\bчто было раньше\b|\bв каком порядке\b"),
        "zh": _rx(r"前|多久|几天|先后|顺序|哪个先"),
        "de": _rx(r"\bvor \w+ (tagen|wochen|monaten|jahren)\b|\bwie lange\b|\bwas (war|kam) zuerst\b|\breihenfolge\b"),
        "es": _rx(r"\bhace \w+ (días|semanas|meses|años)\b|\bcuánto tiempo\b|\bqué fue primero\b|\borden\b"),
        "fr": _rx(r"\bil y a \w+ (jours|semaines|mois|ans)\b|\bcombien de temps\b|\bqu'est-ce qui est venu en premier\b|"
                  r"\bordre\b"),
    },
    QuestionType.multi_session: {
        "ru": _rx(r"\b(всего|в сумме|в общей сложности|сколько (всего|разных)|вместе)\b"),
        "zh": _rx(r"总共|一共|总计|加起来|多少个"),
        "de": _rx(r"\b(insgesamt|zusammen|wie viele verschiedene|gesamt)\b"),
        "es": _rx(r"\b(en total|en conjunto|cuántos distintos|sumando)\b"),
        "fr": _rx(r"\b(au total|en tout|combien de différents|ensemble)\b"),
    },
}  # fmt: skip


def _other_language(qtype: QuestionType, question: str, lang: str) -> bool:
    if qtype is QuestionType.single_session_assistant:
        return asks_about_assistant(question)
    if qtype is QuestionType.knowledge_update:
        return asks_about_now(question)
    if qtype is QuestionType.temporal_reasoning and timewords.in_english(question) is not None:
        return True
    pattern = _OTHER_RULES.get(qtype, {}).get(lang)
    return pattern is not None and pattern.search(question) is not None


def classify_rules(question: str) -> tuple[QuestionType, str] | None:
    """The first rule that matches, or None when no rule claims the question."""
    q = " ".join(question.split())
    lang = language_of(q)
    for qtype, why, pattern in _RULES:
        if pattern.search(q) or (lang != "en" and _other_language(qtype, q, lang)):
            return qtype, why
    return None


def plan_for(qtype: QuestionType, rule: str = "") -> QuestionPlan:
    budget, k = _BUDGETS[qtype]
    mode: ReaderMode = "synthesis" if qtype is QuestionType.single_session_preference else "recall"
    return QuestionPlan(type=qtype, mode=mode, token_budget=budget, k=k, rule=rule)


def classify(question: str) -> QuestionPlan:
    """Rule-based plan; questions no rule claims are single-session-user (a fact the user stated once)."""
    found = classify_rules(question)
    if found is None:
        return plan_for(QuestionType.single_session_user, "default: a fact stated once")
    return plan_for(*found)


class _LLMClassification(BaseModel):
    """Which kind of memory question this is."""

    type: QuestionType = Field(
        description="single-session-user: a fact the user stated; single-session-assistant: something the "
        "assistant said; single-session-preference: asks for a recommendation or advice; multi-session: aggregates "
        "or counts across conversations; knowledge-update: the current/latest value of something that changed; "
        "temporal-reasoning: dates, order of events or elapsed time"
    )


def classify_with_llm(question: str, llm: LLM) -> QuestionPlan:
    """Rules first; only a question no rule claims goes to ``llm`` (one structured call). A model failure falls
    back to the rule default, so classification never blocks answering."""
    found = classify_rules(question)
    if found is not None:
        return plan_for(*found)
    from graphrecall.llm import LLMError
    from graphrecall.prompts import load_prompt

    prompt = load_prompt("reader_classify").render(question=question)
    try:
        result, _ = llm.parse_sync(prompt, _LLMClassification, purpose="classify")
    except LLMError:
        return plan_for(QuestionType.single_session_user, "default: a fact stated once (LLM fallback failed)")
    return plan_for(result.type, "LLM fallback")
