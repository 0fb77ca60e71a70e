"""Full-text term normalization: what reaches Kuzu's FTS index and its query parser."""

from __future__ import annotations

import re
from importlib import resources

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from graphrecall.text import (
    NUMBER_PREFIX,
    QUERY_STOPWORDS,
    STOPWORDS,
    TERM_PREFIX,
    detect_language,
    index_terms,
    latin_language,
    message_language,
    query_terms,
    query_tokens,
    tokenize,
)

# One prefixed term: a word prefix then letters, or the number prefix then digits spelled as ASCII letters (Kuzu's
# FTS tokenizer drops digits, so none may reach it).
TERM = re.compile(rf"^(?:{TERM_PREFIX}[^\W\d_]+|{NUMBER_PREFIX}[a-k]+)$")

FTS_SYNTAX = "\"'()[]{}*?:+-!^~\\/|&;,.<>=@#$%`"


def test_stemming_merges_inflections() -> None:
    assert tokenize("running") == tokenize("runs") == tokenize("run")
    assert tokenize("Puppies") == tokenize("puppy")


def test_stopwords_are_dropped_but_content_words_kept() -> None:
    assert tokenize("What is the name of my dog?") == tokenize("name dog")
    assert tokenize("hello new work home") != []
    assert len(tokenize("hello new work home")) == 4
    assert all(t not in STOPWORDS for t in tokenize("I would have been there if you were"))


def test_tokens_are_lower_cased_and_numbers_keep_their_value() -> None:
    assert tokenize("BISCUIT") == tokenize("biscuit")
    assert tokenize("it cost 1,200 dollars") == [*tokenize("it cost"), "1200", *tokenize("dollars")]
    assert "3.5" in tokenize("version 3.5")


def test_index_terms_prefix_every_token_and_spell_numbers_without_digits() -> None:
    terms = index_terms("The XR-7734 router costs 3.5 pounds").split()
    assert all(TERM.match(t) for t in terms), terms
    assert not any(ch.isdigit() for t in terms for ch in t)
    assert len(terms) == len(tokenize("XR 7734 router costs 3.5 pounds"))


def test_distinct_numbers_stay_distinct_terms() -> None:
    codes = ["7734", "7743", "3.5", "35", "0", "1,000", "1000"]
    terms = [index_terms(c) for c in codes]
    assert terms[-2] == terms[-1]  # "1,000" is the number 1000
    assert len(set(terms[:-1])) == len(codes) - 1
    assert index_terms("7734") != index_terms("seven")


def test_query_terms_are_unique_and_keep_first_occurrence_order() -> None:
    q = query_terms("dog cat dog dogs bird")
    assert q.split() == list(dict.fromkeys(q.split()))
    assert q.split()[0] == index_terms("dog")
    assert q.split()[-1] == index_terms("bird")


def test_a_question_of_only_stopwords_or_punctuation_has_no_terms() -> None:
    assert query_terms("what is it?") == ""
    assert query_terms(FTS_SYNTAX) == ""
    assert query_terms("") == ""


def test_fts_syntax_never_survives_into_a_query() -> None:
    q = query_terms('"biscuit" AND (dog* OR -cat) name:rex ~fuzzy^2 \\ ; DROP TABLE')
    assert q
    for term in q.split():
        assert TERM.match(term), term
        assert not set(term) & set(FTS_SYNTAX.replace("_", ""))


@given(st.text())
@example("¹ ² ½ ٣")  # digits to str.isdigit() that are not ASCII digits
def test_any_unicode_question_yields_only_prefixed_word_terms(text: str) -> None:
    q = query_terms(text)
    assert q == q.strip()
    assert "  " not in q
    for term in q.split(" ") if q else []:
        assert TERM.match(term), (text, term)


@given(st.text())
@example("Я переехал в Москву, теперь живу в Москве")
@example("我现在住在上海，我的猫叫小白")
@example("Ich wohne jetzt in einer neuen Wohnung in München")
def test_queries_and_documents_are_normalized_identically(text: str) -> None:
    """A question matches a stored round exactly when they share a normalized term, whatever the wording; the
    query side only leaves out the terms of query stopwords, and for a text in a Latin language other than English
    the English forms that stored texts keep beside their own (for questions not recognized as that language)."""
    stored = set(index_terms(text).split())
    asked = set(query_terms(text).split())
    everything = set(query_terms(text, drop_query_stopwords=False).split())
    assert asked <= everything <= stored
    if latin_language(text) is None:
        assert everything == stored
        assert stored - asked <= {index_terms(w) for w in QUERY_STOPWORDS}


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=80))
def test_tokenize_is_deterministic_and_drops_every_stopword(text: str) -> None:
    tokens = tokenize(text)
    assert tokens == tokenize(text)
    assert all(tokens)
    assert tokenize(" ".join(STOPWORDS) + " " + text) == tokens


# -- query stopwords: words a question holds that say nothing about its topic -----------------------------------


def test_the_query_stopword_list_ships_with_the_package_and_extends_the_index_list() -> None:
    shipped = resources.files("graphrecall").joinpath("stopwords.txt").read_text(encoding="utf-8")
    assert "now" in shipped.split()
    assert STOPWORDS < QUERY_STOPWORDS
    assert len(QUERY_STOPWORDS) > 200  # a real list of function words, not a hand-picked few
    assert all(w == w.lower().strip() and w.isalpha() for w in QUERY_STOPWORDS)


@pytest.mark.parametrize(
    ("question", "content"),
    [
        ("where do I live now?", "live"),
        ("what's my dog called again?", "dog called"),
        ("remind me what I said about work", "work"),
        ("what did I say I'd cook on Friday?", "cook Friday"),
        ("Where do I work nowadays?", "work"),
        ("could you tell me what my new job is", "new job"),
    ],
)
def test_a_question_sends_only_its_content_words(question: str, content: str) -> None:
    assert query_terms(question) == query_terms(content)
    assert query_tokens(question) == tokenize(content)


def test_common_content_words_are_never_query_stopwords() -> None:
    for word in (
        "work",
        "live",
        "home",
        "new",
        "name",
        "called",
        "cook",
        "job",
        "first",
        "last",
        "go",
        "far",
    ):
        assert word not in QUERY_STOPWORDS, word
        assert query_terms(word) == index_terms(word)


def test_the_stored_terms_are_unchanged_so_old_and_new_stores_index_alike() -> None:
    # Indexing keeps "now" (as every store written before the list did); a query never sends it, so those stored
    # terms cannot decide a ranking in any store, old or new.
    assert index_terms("we live in Denver now").split() == [index_terms(w) for w in ("live", "Denver", "now")]
    assert index_terms("now") not in query_terms("where do I live now?").split()


def test_turning_the_list_off_restores_the_old_query() -> None:
    assert query_terms("where do I live now?", drop_query_stopwords=False) == " ".join(
        index_terms(w) for w in ("live", "now")
    )


# -- every script: Russian inflections, Chinese without spaces, the Latin languages' own stems --------------------
def shared(question: str, said: str) -> set[str]:
    return set(query_terms(question).split()) & set(index_terms(said).split())


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("где я живу в Москве?", "Я переехал в Москву в марте"),  # Москве / Москву: one stem
        ("как зовут мою кошку?", "Мою кошку зовут Мурка"),
        ("我的猫叫什么名字？", "我的猫叫小白，很可爱"),  # no spaces: character pairs meet
        ("Wo arbeite ich jetzt?", "Seit Mai arbeite ich bei einer Bank in Frankfurt"),
        ("¿Dónde trabajo ahora?", "Ahora trabajo en una panadería en Sevilla"),
        ("Où est-ce que j'habite maintenant ?", "J'habite à Lyon depuis le mois dernier"),
    ],
)
def test_a_question_meets_what_was_said_in_its_language(question: str, said: str) -> None:
    assert shared(question, said)


def test_russian_function_words_are_not_terms_and_stems_merge_cases() -> None:
    assert tokenize("в Москве") == tokenize("Москва") == tokenize("из Москвы")
    assert tokenize("и в на не что") == []


def test_chinese_is_cut_into_overlapping_pairs_and_english_beside_it_is_unchanged() -> None:
    assert tokenize("猫叫小白") == ["猫叫", "叫小", "小白"]
    assert tokenize("我的猫叫小白") == ["猫叫", "叫小", "小白"]  # function characters cut the run first
    assert tokenize("猫") == ["猫"]
    assert tokenize("my cat 小白") == ["cat", "小白"]


def test_a_german_text_keeps_its_own_stems_and_the_english_forms_for_unrecognized_questions() -> None:
    said = set(index_terms("Wir haben ein neues Haus mit drei Schlafzimmern gekauft").split())
    assert {"wschlafzimm", "wschlafzimmern"} <= said  # German's stem, and the English stemmer's form
    assert "whaben" not in said and "whab" not in said  # German's function words go
    assert set(query_terms("Wie viele Schlafzimmer hat das Haus?").split()) & said  # recognized: German stems
    assert set(query_terms("schlafzimmern").split()) & said  # one word, not recognized: the English path


def test_english_text_is_not_sent_to_the_language_detector() -> None:
    before = latin_language.cache_info().misses
    assert latin_language("I adopted a beagle puppy called Biscuit last weekend") is None
    assert detect_language("Thanks so much, that helps a lot.") == "en"
    assert latin_language.cache_info().misses == before + 1


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Я переехал в Москву и теперь работаю в банке", "ru"),
        ("我上个月搬到了上海，现在在一家银行工作", "zh"),
        ("Letzten Monat bin ich nach Hamburg umgezogen", "de"),
        ("El mes pasado me mudé a Valencia con mi pareja", "es"),
        ("Le mois dernier, j'ai déménagé à Lyon avec ma femme", "fr"),
        ("Last month I moved to Denver with my partner", "en"),
    ],
)
def test_the_detector_names_the_language_of_a_sentence(text: str, lang: str) -> None:
    assert detect_language(text) == lang


# -- the language stored with each message (``Message.lang``) ----------------------------------------------------
@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Я переехал в Москву и теперь работаю в банке", "ru"),
        ("我上个月搬到了上海，现在在一家银行工作", "zh"),
        ("先週、子犬を飼い始めました。名前はビスケットです。", "ja"),
        ("Letzten Monat bin ich nach Hamburg umgezogen", "de"),
        ("El mes pasado me mudé a Valencia con mi pareja", "es"),
        ("Le mois dernier, j'ai déménagé à Lyon avec ma femme", "fr"),
        ("Last month I moved to Denver with my partner", "en"),
        ("I adopted a beagle puppy called Biscuit last weekend", "en"),  # English asks the detector too
        ("How do you say 猫 in Chinese?", "en"),  # mixed: the main language, not the first script seen
        ("Last month I moved to Denver. " * 200, "en"),  # a long text: its opening decides
    ],
)
def test_a_message_is_stored_with_its_language(text: str, lang: str) -> None:
    assert message_language(text) == lang


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "ok",  # fewer than three letters: too short
        "?!",
        "12345 678",
        "Да",
        "Thanks!",  # three letters and more, but the detector is not sure
        "Przeprowadziłem się do Warszawy w zeszłym miesiącu.",  # Polish: not one of the languages it chooses among
    ],
)
def test_a_message_too_short_or_unsure_has_no_language(text: str) -> None:
    assert message_language(text) == ""


def test_english_terms_are_what_they_were_before_languages_were_stored() -> None:
    # Written down once (before ``Message.lang``): the stored language changes nothing in a round's terms, and an
    # English store's BM25 index stays the same term for term (benchmarks/rankings compares whole rankings).
    assert index_terms("I adopted a beagle puppy called Biscuit last weekend!") == (
        "wadopt wbeagl wpuppi wcall wbiscuit wlast wweekend"
    )
    assert index_terms("We moved from Munich to Berlin in 2023; the flat costs 1,250.50 EUR.") == (
        "wmove wmunich wberlin ncacd wflat wcost nbcfakfa weur"
    )
    assert query_terms("Where did I move to last month?") == "wmove wlast wmonth"


def test_a_detector_that_cannot_load_stores_no_language_and_is_not_retried_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from graphrecall import text

    calls: list[str] = []

    def full_disk(sample: str) -> str:
        calls.append(sample)
        raise OSError(27, "File too large")  # py3langid unpacks its model into a temporary file

    monkeypatch.setattr(text, "detect_language", full_disk)
    monkeypatch.setattr(text, "_detector_unavailable_until", 0.0)
    assert message_language("Last month I moved to Denver with my partner") == ""
    assert message_language("Letzten Monat bin ich nach Hamburg umgezogen") == ""
    assert len(calls) == 1  # the second message did not try again
    monkeypatch.setattr(text, "_detector_unavailable_until", 0.0)  # the retry delay is over
    monkeypatch.undo()
    assert message_language("Last month I moved to Denver with my partner") == "en"
