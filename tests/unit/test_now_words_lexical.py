"""``retrieve.intent.without_now_cue``: the words by which a question says "now" in its own language are left out of
what its lexical lists read. They say when, not what: as BM25 terms they match any round that says "now" about
something else, which in a small scope ranks first on that word alone."""

from __future__ import annotations

import pytest

from graphrecall.retrieve.intent import asks_about_now, without_now_cue
from graphrecall.text import query_terms


@pytest.mark.parametrize(
    ("question", "now_word", "topic_word"),
    [
        ("¿Dónde vive mi hermano ahora?", "ahora", "hermano"),
        ("我的医生现在是谁？", "现在", "医生"),
        ("Qui est mon coiffeur maintenant ?", "maintenant", "coiffeur"),
        ("Wo trainiert meine Tochter derzeit?", "derzeit", "Tochter"),
        ("Какая у меня сейчас машина?", "сейчас", "машина"),
    ],
)
def test_the_now_word_leaves_the_lexical_query_and_the_topic_stays(
    question: str, now_word: str, topic_word: str
) -> None:
    assert asks_about_now(question)  # the cue is still read from the question itself
    lexical = without_now_cue(question)
    assert now_word not in lexical and topic_word in lexical
    before, after = set(query_terms(question).split()), set(query_terms(lexical).split())
    assert after and after <= before  # nothing added; the topic's terms are still there


@pytest.mark.parametrize(
    "question",
    [
        "Where do I live now?",
        "What am I currently reading?",
        "Is my sister still in Oslo?",
        "what  did   I  cook   on Sunday?",  # not a question about now: not even its spaces change
    ],
)
def test_an_english_question_is_left_exactly_as_it_was(question: str) -> None:
    """English's "now" is a query stopword already (``stopwords.txt``), and its other cue words stay as measured."""
    assert without_now_cue(question) == question


def test_a_question_without_a_now_word_is_unchanged() -> None:
    assert without_now_cue("¿Cómo se llama mi gata?") == "¿Cómo se llama mi gata?"
