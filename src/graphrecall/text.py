"""Term normalization for full-text search.

Why this exists: Kuzu 0.11.3's FTS with a custom stopword table crashes the process on the first insert after the
index is built (measured, see docs/architecture.md), and its built-in stopword list is huge (it drops words such as
"hello"). So we do tokenization, stopwords and stemming ourselves and index a derived ``terms`` column with Kuzu's
``stemmer := 'none'``. Every term carries a one-letter prefix so no term can collide with Kuzu's built-in stopword
list. Queries go through the same function, which also makes them punctuation-safe: nothing but prefixed
alphanumeric terms ever reaches the FTS parser.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import snowballstemmer

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

_TOKEN = re.compile(r"[0-9]+(?:[.,][0-9]+)*|[^\W\d_]+", re.UNICODE)
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Lower-cased word and number tokens, ``stopwords`` removed, stemmed (no prefix)."""
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        if tok in stopwords:
            continue
        if tok[0].isdigit():
            out.append(tok.replace(",", ""))
        else:
            out.append(_stem(tok))
    return out


def query_tokens(text: str, *, drop_query_stopwords: bool = True) -> list[str]:
    """A question's tokens as ``tokenize`` makes them, without the words of ``QUERY_STOPWORDS`` (unless told not
    to: ``drop_query_stopwords=False`` reproduces the ranking from before the list, for comparison)."""
    return tokenize(text, QUERY_STOPWORDS if drop_query_stopwords else STOPWORDS)


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
