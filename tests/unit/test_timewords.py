"""Time phrases of Russian, Chinese, German, Spanish and French mean what their English twins mean: each is
resolved against the same question date to the same range as the English phrase (``retrieve.timewords``)."""

from __future__ import annotations

from datetime import datetime

import pytest

from graphrecall.retrieve.timeparse import parse_time_range

ASKED = datetime(2024, 6, 15, 12, 0)  # a Saturday

SAME_AS = {
    "what did I do last month?": [
        "что я делал в прошлом месяце?", "我上个月做了什么？", "was habe ich letzten Monat gemacht?",
        "¿qué hice el mes pasado?", "qu'est-ce que j'ai fait le mois dernier ?",
    ],
    "where did I go two weeks ago?": [
        "куда я ездил две недели назад?", "我两个星期前去了哪里？", "wohin bin ich vor zwei Wochen gefahren?",
        "¿adónde fui hace dos semanas?", "où suis-je allé il y a deux semaines ?",
    ],
    "what did I buy three days ago?": [
        "что я купил три дня назад?", "我三天前买了什么？", "was habe ich vor drei Tagen gekauft?",
        "¿qué compré hace tres días?", "qu'ai-je acheté il y a trois jours ?",
    ],
    "what did I eat yesterday?": ["что я ел вчера?", "我昨天吃了什么？", "was habe ich gestern gegessen?",
                                  "¿qué comí ayer?", "qu'est-ce que j'ai mangé hier ?"],
    "what happened last week?": ["что было на прошлой неделе?", "上周发生了什么？", "was war letzte Woche?",
                                 "¿qué pasó la semana pasada?", "que s'est-il passé la semaine dernière ?"],
    "where was I last Saturday?": ["где я был в прошлую субботу?", "上周六我在哪里？", "wo war ich letzten Samstag?",
                                   "¿dónde estuve el sábado pasado?", "où étais-je samedi dernier ?"],
    "what did I do in May?": ["что я делал в мае?", "我5月份做了什么？", "was habe ich im Mai gemacht?",
                              "¿qué hice en mayo?", "qu'ai-je fait en mai ?"],
    "what did I read in the past 3 days?": ["что я читал за последние 3 дня?", "我过去3天读了什么？",
                                            "was habe ich in den letzten 3 Tagen gelesen?",
                                            "¿qué leí en los últimos 3 días?",
                                            "qu'ai-je lu au cours des 3 derniers jours ?"],
    "where did I live last year?": ["где я жил в прошлом году?", "去年我住在哪里？", "wo habe ich letztes Jahr gewohnt?",
                                    "¿dónde viví el año pasado?", "où habitais-je l'année dernière ?"],
    "what am I doing this week?": ["что я делаю на этой неделе?", "我这个星期做什么？", "was mache ich diese Woche?",
                                   "¿qué hago esta semana?", "que fais-je cette semaine ?"],
}  # fmt: skip
CASES = [(english, other) for english, others in SAME_AS.items() for other in others]


@pytest.mark.parametrize(("english", "other"), CASES, ids=[o for _, o in CASES])
def test_a_phrase_resolves_to_the_range_of_its_english_twin(english: str, other: str) -> None:
    want = parse_time_range(english, ASKED)
    got = parse_time_range(other, ASKED)
    assert want is not None and got is not None, (english, other)
    assert (got.start, got.end) == (want.start, want.end)
    assert got.expression and got.expression in other.lower()  # the words as written, for the trace


@pytest.mark.parametrize(
    "question",
    ["как зовут мою кошку?", "我的猫叫什么？", "wie heißt meine Katze?", "¿cómo se llama mi gato?",
     "comment s'appelle mon chat ?", "what is my cat called?"],
)  # fmt: skip
def test_a_question_without_a_time_phrase_has_no_range(question: str) -> None:
    assert parse_time_range(question, ASKED) is None


def test_english_is_read_first_and_unchanged() -> None:
    r = parse_time_range("what did I do last month, el mes pasado?", ASKED)
    assert r is not None and r.expression == "last month"
