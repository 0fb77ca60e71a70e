"""Term normalization for full-text search.

Why this exists: Kuzu 0.11.3's FTS with a custom stopword table crashes the process on the first insert after the
index is built (measured, see docs/architecture.md), and its built-in stopword list is huge (it drops words such as
"hello"). So we do tokenization, stopwords and stemming ourselves and index a derived ``terms`` column with Kuzu's
``stemmer := 'none'``. Every term carries a one-letter prefix so no term can collide with Kuzu's built-in stopword
list. Queries go through the same function, which also makes them punctuation-safe: nothing but prefixed
alphanumeric terms ever reaches the FTS parser.
"""

from __future__ import annotations

import logging
import re
import time
from functools import lru_cache
from importlib import resources

import snowballstemmer

log = logging.getLogger(__name__)

TERM_PREFIX = "w"

# BM25 parameters of every BM25 computed outside Kuzu (the user-side list, the write log's tail): Kuzu's FTS
# defaults, so that all BM25 lists behave alike.
BM25_K1 = 1.2
BM25_B = 0.75

# A deliberately small list: function words only. Content words (even common ones such as "new", "work", "home")
# carry signal in personal-memory questions.
STOPWORDS: frozenset[str] = frozenset(
    (
        "a an and are as at be been being but by can could did do does doing for from had has have having he her hers "
        "him his how i if in into is it its itself just me my myself of on or our ours so than that the their theirs them "
        "then there these they this those to too us was we were what when where which while who whom why will with would "
        "you your yours yourself am also about any some very s t d ll m re ve don didn doesn isn wasn"
    ).split()
)


def _load_word_list(name: str) -> frozenset[str]:
    """One lower-case word per line, ``#`` comments and blank lines ignored (a data file shipped in the wheel)."""
    text = resources.files("graphrecall").joinpath(name).read_text(encoding="utf-8")
    words = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return frozenset(w for w in words if w)


# Words a *question* may hold that say nothing about its topic: function words, "now", "again", "remind me",
# "what did I say". Applied to queries only (``query_tokens``). Why not to indexed text as well: stores written
# before this list existed keep these words in their ``terms`` column, and a term only affects a ranking when a
# query sends it; dropping them on the query side therefore ranks old and new stores alike, while dropping them at
# index time too would change new stores' document lengths and nothing else. A superset of ``STOPWORDS``.
QUERY_STOPWORDS: frozenset[str] = STOPWORDS | _load_word_list("stopwords.txt")

# Scripts written without spaces between words (Chinese, Japanese kana and kanji, Korean): a run of them is one
# regex match, cut into overlapping character pairs below (``_grams``): the usual way to index such text without a
# dictionary segmenter, which would be a large model per language for what BM25 needs (shared pieces of words).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[0-9]+(?:[.,][0-9]+)*|[{_CJK}]+|[^\W\d_{_CJK}]+", re.UNICODE)
_CJK_RUN = re.compile(rf"[{_CJK}]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


# Latin-script languages other than English whose function words and stems are known (Snowball's algorithms and
# stop lists, ``stoplists/``). Cyrillic words are Russian's whatever the text (the script says it); a Latin word is
# English's unless the text is recognized as one of these.
LATIN_LANGUAGES: dict[str, str] = {
    "de": "german", "es": "spanish", "fr": "french", "it": "italian", "pt": "portuguese", "nl": "dutch",
}  # fmt: skip
LANGUAGES = ("en", "ru", *LATIN_LANGUAGES, "zh", "ja", "ko")
"""The languages the detector chooses among (``detect_language``)."""
LANGUAGE_NAMES = {
    "en": "English", "ru": "Russian", "de": "German", "es": "Spanish", "fr": "French", "it": "Italian",
    "pt": "Portuguese", "nl": "Dutch", "zh": "Chinese", "ja": "Japanese", "ko": "Korean",
}  # fmt: skip
"""Each of ``LANGUAGES`` by its English name, for prompts that name the language to write in."""


@lru_cache(maxsize=16)
def _stops(lang: str) -> frozenset[str]:
    return _load_word_list(f"stoplists/{lang}.txt")


@lru_cache(maxsize=16)
def _language_stemmer(name: str) -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer(name)


@lru_cache(maxsize=400_000)
def _stem_in(lang: str, word: str) -> str:
    return str(
        _language_stemmer(LATIN_LANGUAGES.get(lang, "russian" if lang == "ru" else "english")).stemWord(word)
    )


# Chinese function characters (particles, pronouns, the copula, common auxiliaries): a pair that holds one says
# nothing about the topic ("我的", "的猫"), so a run is cut at them before it is paired. Measured on the
# multilingual set with e5-small: Chinese R@1 0.556 -> 0.630 (dev 0.571 -> 0.571, MRR 0.726 -> 0.756; test 0.538
# -> 0.692), docs/benchmarks.md "Languages".
_CJK_STOP = re.compile("[的了是我你他她它们在吗呢吧啊这那和就都也很有个一不要会把被给还说过着]+")


def _grams(run: str) -> list[str]:
    """A run of CJK characters as its overlapping character pairs (a lone character as itself), cut first at
    function characters."""
    out: list[str] = []
    for part in _CJK_STOP.split(run):
        if part:
            out += [part] if len(part) == 1 else [part[i : i + 2] for i in range(len(part) - 1)]
    return out


def _russian(word: str, stopwords: frozenset[str]) -> str | None:
    word = word.replace("ё", "е")  # Snowball's Russian list and stemmer spell it so
    return None if word in stopwords or word in _stops("ru") else _stem_in("ru", word)


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS, *, lang: str | None = None) -> list[str]:
    """Lower-cased word and number tokens, ``stopwords`` removed, stemmed (no prefix), for every script.

    Numbers and English words are as they always were (an English store's terms do not change). A Cyrillic word is
    stemmed as Russian (Snowball) without Russian's function words; a run of Chinese, Japanese or Korean characters
    becomes its character pairs. The Latin words of a text in German, Spanish, French, Italian, Portuguese or Dutch
    (``lang``, else ``latin_language``) are stemmed in that language, without its function words, and each is also
    kept in its English form when that differs, so a short question whose language was not recognized (it is
    stemmed as English) still meets them."""
    language = lang if lang is not None else latin_language(text)
    foreign = language if language in LATIN_LANGUAGES else None
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        if tok in stopwords:
            continue
        if tok[0].isdigit():
            out.append(tok.replace(",", ""))
        elif not tok.isascii() and _CJK_RUN.match(tok):  # isascii first: most tokens skip both regexes
            out += _grams(tok)
        elif not tok.isascii() and _CYRILLIC.match(tok):
            stem = _russian(tok, stopwords)
            if stem:
                out.append(stem)
        elif foreign is not None:
            if tok in _stops(foreign):
                continue
            stem, english = _stem_in(foreign, tok), _stem(tok)
            out += [stem] if stem == english or lang is not None else [stem, english]
        else:
            out.append(_stem(tok))
    return out


# -- which language a text is in --------------------------------------------------------------------------------------
_LATIN_WORD = re.compile(r"[a-zà-öø-ÿœß]+")
_NON_ASCII_LATIN = re.compile(r"[à-öø-ÿœß]")
# Function words of the other Latin languages that are not English words: a text with two of them (or with a
# letter English does not use) is worth asking the detector about; any other text stays on the English path, which
# also spares every English text the detector's model (1.5 s to load).
_ENGLISH_LOOKALIKES = frozenset(
    "a an as at be by de die do en es go had hat he i in is it la le me mine no of on or "
    "over per so son the to um un us was will war man bin come con dos den ton vie".split()
)


@lru_cache(maxsize=1)
def _cues() -> frozenset[str]:
    words: set[str] = set()
    for lang in LATIN_LANGUAGES:
        words |= _stops(lang)
    return frozenset(words - STOPWORDS - QUERY_STOPWORDS - _ENGLISH_LOOKALIKES)


@lru_cache(maxsize=1)
def _identifier() -> object:
    """py3langid's identifier (a naive Bayes over byte n-grams, model inside the wheel), restricted to
    ``LANGUAGES``, with normalized probabilities."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGES))
    return identifier


DETECT_MIN_PROBABILITY = 0.9
"""Below this the detector's choice is not trusted (``'Haha ok'`` is Portuguese at 0.25): the text keeps the
English path."""


def warm_up() -> None:
    """Load the language identifier now (~1 s, once per process) rather than in the first write or question that
    needs it; the HTTP server calls this before it accepts requests."""
    _identifier()


def detect_language(text: str) -> str | None:
    """The text's language among ``LANGUAGES`` (ISO 639-1), or ``None`` when the detector is not sure."""
    if not text.strip():
        return None
    lang, probability = _identifier().classify(text)  # type: ignore[attr-defined]
    return str(lang) if probability >= DETECT_MIN_PROBABILITY else None


# A stored message's language is detected from its opening: py3langid's cost grows with the text (~100 us for a
# sentence, ~270 us for 500 characters, ~2 ms for 5,000 on one core) and its answer does not change past a few
# hundred characters of the same language.
MESSAGE_LANGUAGE_CHARS = 500
_THREE_LETTERS = re.compile(r"[^\W\d_](?:.*?[^\W\d_]){2}", re.DOTALL)
# py3langid unpacks its model (68 MB) into a temporary file to load it: with the disk full (or a file size limit)
# that fails, and a write must not fail for want of a language. The message is stored with '' and the model is not
# tried again for this long (each try costs ~1.3 s).
DETECTOR_RETRY_S = 60.0
_detector_unavailable_until = 0.0


def message_language(text: str) -> str:
    """The language a message is in, as stored with it (``Message.lang``): one of ``LANGUAGES`` (ISO 639-1), or
    ``''`` when the text is too short to tell (fewer than three letters: "ok", "?!") or the detector is not sure
    (``DETECT_MIN_PROBABILITY``: "Thanks!", "Yes please", a text in a language it does not choose among, such as
    Polish or Turkish). Unlike ``language_of`` (a question's language, English unless the text says otherwise,
    script first), every text asks the detector, over its first ``MESSAGE_LANGUAGE_CHARS`` characters: an English
    message is ``'en'`` because the detector says so, and a message mixing scripts takes its main language
    ("How do you say 猫?" is English). A Cyrillic text in another language than Russian reads as ``'ru'`` (the
    detector chooses among ``LANGUAGES`` only), as ``tokenize`` treats it. Deterministic: the same text always gets
    the same language, so an import detects again what an export held. Never raises: a detector that cannot be
    loaded (``DETECTOR_RETRY_S``) gives ``''``, with a warning."""
    global _detector_unavailable_until
    sample = text[:MESSAGE_LANGUAGE_CHARS]
    if not _THREE_LETTERS.search(sample) or time.monotonic() < _detector_unavailable_until:
        return ""
    try:
        return detect_language(sample) or ""
    except (OSError, MemoryError) as e:
        _detector_unavailable_until = time.monotonic() + DETECTOR_RETRY_S
        log.warning(
            "the language detector could not be loaded (%s): messages are stored without a language for the next "
            "%.0f s",
            e,
            DETECTOR_RETRY_S,
        )
        return ""


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_HANGUL = re.compile(r"[\uac00-\ud7af]")


def language_of(text: str) -> str:
    """The language a short text (a question) is in, by its script first: Cyrillic is Russian, kana Japanese,
    Hangul Korean, Han Chinese; Latin text is ``latin_language``'s, else English. Cheap, and English stays English
    whenever the text gives no reason to think otherwise."""
    cyrillic = len(_CYRILLIC.findall(text))
    if cyrillic and cyrillic >= len(_LATIN_WORD.findall(text.lower())):
        return "ru"
    if _KANA.search(text):
        return "ja"
    if _HANGUL.search(text):
        return "ko"
    if _HAN.search(text):
        return "zh"
    return latin_language(text) or "en"


@lru_cache(maxsize=1024)
def latin_language(text: str) -> str | None:
    """The language whose stems a text's Latin words take: one of ``LATIN_LANGUAGES``, or ``None`` (English)."""
    lowered = text.lower()
    words = _LATIN_WORD.findall(lowered)
    if len(words) < 2:
        return None
    if not _NON_ASCII_LATIN.search(lowered) and len(_cues().intersection(words)) < 2:
        return None
    lang = detect_language(text)
    return lang if lang in LATIN_LANGUAGES else None


def query_tokens(text: str, *, drop_query_stopwords: bool = True) -> list[str]:
    """A question's tokens as ``tokenize`` makes them, without the words of ``QUERY_STOPWORDS`` (unless told not
    to: ``drop_query_stopwords=False`` reproduces the ranking from before the list, for comparison). A question in
    a Latin language other than English is stemmed in that language only (stored texts keep both forms)."""
    stops = QUERY_STOPWORDS if drop_query_stopwords else STOPWORDS
    return tokenize(text, stops, lang=latin_language(text) or "en")


NUMBER_PREFIX = "n"
# Kuzu 0.11.3's FTS tokenizer drops digits ("w88213" is indexed as "w"), so numbers are spelled with letters:
# "3.5" -> "ndkf". The distinct prefix keeps them apart from words.
_DIGITS_AS_LETTERS = str.maketrans("0123456789.", "abcdefghijk")


def _term(token: str) -> str:
    if token[0] in "0123456789":  # not str.isdigit(): "¹" is a digit to Python but a letter token here
        return NUMBER_PREFIX + token.translate(_DIGITS_AS_LETTERS)
    return TERM_PREFIX + token


def index_terms(text: str) -> str:
    """The string stored in a ``terms`` column: prefixed normalized tokens separated by spaces."""
    return " ".join(_term(t) for t in tokenize(text))


def query_terms(text: str, *, drop_query_stopwords: bool = True) -> str:
    """A question as an OR query for Kuzu FTS: unique terms, original order, empty if nothing is left."""
    seen: dict[str, None] = {}
    for t in query_tokens(text, drop_query_stopwords=drop_query_stopwords):
        seen.setdefault(_term(t), None)
    return " ".join(seen)
