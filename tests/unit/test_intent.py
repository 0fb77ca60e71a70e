"""Which questions ask what the assistant said (their evidence is in a reply)."""

from __future__ import annotations

import pytest

from graphrecall.retrieve.intent import (
    NOW_CUE,
    asks_about_assistant,
    asks_about_now,
    asks_about_someone_else,
    asks_about_user,
)


@pytest.mark.parametrize(
    "question",
    [
        "What exercises did you suggest for my back?",
        "I remember you told me about the refineries. Which processes were used?",
        "Can you remind me what was the 7th job in the list you provided?",
        "In our previous chat, what name did we settle on?",
        "What did you recommend last time?",
    ],
)
def test_questions_about_what_the_assistant_said(question: str) -> None:
    assert asks_about_assistant(question)


@pytest.mark.parametrize(
    "question",
    [
        "Can you suggest a hotel for my upcoming trip to Miami?",
        "Could you recommend some books I might like?",
        "What is my dog's name?",
        "How many days ago did I buy a smoker?",
    ],
)
def test_requests_and_questions_about_the_user_are_not(question: str) -> None:
    assert not asks_about_assistant(question)


@pytest.mark.parametrize(
    "question",
    ["Where do I live now?", "What car do I have at the moment?", "how much have I saved so far?",
     "Do I still play the cello?", "What's my current job?", "what was wrong with my car in the end?"],
)  # fmt: skip
def test_questions_about_the_present_state_are_recognized(question: str) -> None:
    assert asks_about_now(question)


@pytest.mark.parametrize(
    "question",
    ["Where did we go for our anniversary?", "What's my husband's name?", "Which restaurant did you suggest?",
     "I know a shortcut: snow"],
)  # fmt: skip
def test_other_questions_are_not(question: str) -> None:
    assert not asks_about_now(question)


@pytest.mark.parametrize(
    "question",
    [
        "Where do I live now?",
        "What's my dog called again?",
        "How many days passed between our trip and the wedding?",
        "I’m trying to remember the name of the restaurant",  # a typographic apostrophe
        "Did we ever book the flights?",
    ],
)
def test_questions_in_the_first_person_are_about_the_user(question: str) -> None:
    assert asks_about_user(question)


@pytest.mark.parametrize(
    "question",
    [
        "When did Melanie run a charity race?",
        "What did Caroline say about adoption?",
        "How long did Alex marinate the BBQ ribs?",
        "What did they bring to the party?",
        "Is she still at the bakery? When did he start there?",
    ],
)
def test_questions_about_someone_else(question: str) -> None:
    assert not asks_about_user(question) and asks_about_someone_else(question)


@pytest.mark.parametrize(
    "question",
    [
        "frisbee",  # a keyword query is about no one
        "INV-88213",
        "Ideas for a birthday gift?",  # "I" inside a word is not the pronoun
        "How long did it take to move to the new apartment?",
        "What did Melanie tell me about her race?",  # the first person wins: the user was told
    ],
)
def test_keyword_queries_and_questions_about_the_user_are_not_about_someone_else(question: str) -> None:
    assert not asks_about_someone_else(question)


# -- the same cues in other languages, read only for a question in that language -------------------------------------
@pytest.mark.parametrize(
    "question",
    ["где я сейчас живу?", "我现在住在哪里？", "wo wohne ich jetzt?", "¿dónde vivo ahora?",
     "où est-ce que j'habite maintenant ?", "кто мой начальник до сих пор?"],
)  # fmt: skip
def test_a_question_about_now_is_recognized_in_its_language(question: str) -> None:
    assert asks_about_now(question)


@pytest.mark.parametrize(
    "question",
    ["что ты мне посоветовал почитать?", "你之前推荐过什么书？", "welches Buch hast du mir empfohlen?",
     "¿qué libro me recomendaste?", "quel livre tu m'as recommandé ?", "напомни, что мы обсуждали"],
)  # fmt: skip
def test_a_question_to_the_assistant_is_recognized_in_its_language(question: str) -> None:
    assert asks_about_assistant(question)


@pytest.mark.parametrize(
    ("question", "about_user", "about_someone_else"),
    [("где живёт моя сестра?", True, False), ("когда она переехала в Москву?", False, True),
     ("我的猫叫什么？", True, False), ("她什么时候搬家的？", False, True),
     ("Wann ist er umgezogen?", False, True), ("Wo wohnt meine Schwester?", True, False)],
)  # fmt: skip
def test_who_a_question_is_about_in_its_language(
    question: str, about_user: bool, about_someone_else: bool
) -> None:
    assert asks_about_user(question) is about_user
    assert asks_about_someone_else(question) is about_someone_else


@pytest.mark.parametrize("question", ["what did I buy in the café?", "where is my son now?", "je suis là"])
def test_english_questions_are_judged_by_the_english_cues_alone(question: str) -> None:
    """Another language's words in an English question (a café, "son", "je") change nothing."""
    import re

    english_now = NOW_CUE.search(question) is not None
    assert asks_about_now(question) is english_now or not re.search(r"[a-z]", question)
