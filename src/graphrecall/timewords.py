"""Time expressions of Russian, Chinese, German, Spanish and French, read as the English phrase that means the same
("в прошлом месяце", "上个月", "letzten Monat", "el mes pasado", "le mois dernier" -> "last month"), so the
question's time range (``retrieve.timeparse``, against the question date) and an extracted item's date
(``extract.dates``, against the session date) resolve every language with one set of rules. Ground floor: both
use it.

Why tables of our own rather than a date parser: ``dateparser`` (the maintained multilingual one) was measured on
the phrases people use in these questions and missed "в прошлом месяце", "el mes pasado", "le mois dernier",
"三天前" and "hace tres días" (it finds points in time, not periods, and its search skips these forms), while its
hits add ~100 ms to a question. The phrases that matter are few per language: a number of units ago, last/this
week, month or year, the past N units, yesterday and today, last Saturday, a month by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_UNITS_EN = ("day", "week", "month", "year", "weekend")
_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS_EN = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
)  # fmt: skip


@dataclass(frozen=True)
class Language:
    """One language's words: numbers, units, weekdays and months as (pattern, English) pairs, and its phrases."""

    numbers: dict[str, int]
    units: tuple[tuple[str, str], ...]  # (regex of the unit's forms, English unit)
    weekdays: tuple[str, ...]  # regexes, Monday first
    months: tuple[str, ...]  # regexes, January first
    phrases: tuple[tuple[str, Callable[[re.Match[str], Language], str]], ...]

    def number(self, token: str | None) -> int:
        if not token:
            return 1
        token = token.strip()
        return int(token) if token.isdigit() else self.numbers.get(token, 1)

    def unit(self, token: str) -> str:
        return next(en for pattern, en in self.units if re.fullmatch(pattern, token))

    def weekday(self, token: str) -> str:
        return next(
            en
            for pattern, en in zip(self.weekdays, _WEEKDAYS_EN, strict=True)
            if re.fullmatch(pattern, token)
        )

    def month(self, token: str) -> str:
        return next(
            en for pattern, en in zip(self.months, _MONTHS_EN, strict=True) if re.fullmatch(pattern, token)
        )

    def any_unit(self) -> str:
        return "|".join(p for p, _ in self.units)


def _ago(m: re.Match[str], lang: Language) -> str:
    return f"{lang.number(m['n'])} {lang.unit(m['u'])}s ago"


def _past(m: re.Match[str], lang: Language) -> str:
    return f"the past {lang.number(m['n'])} {lang.unit(m['u'])}s"


def _last(m: re.Match[str], lang: Language) -> str:
    return f"last {lang.unit(m['u'])}"


def _this(m: re.Match[str], lang: Language) -> str:
    return f"this {lang.unit(m['u'])}"


def _last_weekday(m: re.Match[str], lang: Language) -> str:
    return f"last {lang.weekday(m['w'])}"


def _in_month(m: re.Match[str], lang: Language) -> str:
    return f"in {lang.month(m['m'])}"


def _fixed(english: str) -> Callable[[re.Match[str], Language], str]:
    return lambda m, lang: english


_RU_NUM = {"один": 1, "одну": 1, "одна": 1, "два": 2, "две": 2, "пару": 2, "пара": 2, "три": 3, "несколько": 3,
           "четыре": 4, "пять": 5, "шесть": 6, "семь": 7, "восемь": 8, "девять": 9, "десять": 10}  # fmt: skip
_RU_UNITS = (("дн[яей]|день|сутки", "day"), ("недел[юиьяе]|недель", "week"), ("месяц(?:а|ев|е)?", "month"),
             ("год(?:а|у)?|лет", "year"), ("выходны[ех]", "weekend"))  # fmt: skip
_RU_N = "(?P<n>\\d+|" + "|".join(_RU_NUM) + ")"
RUSSIAN = Language(
    numbers=_RU_NUM,
    units=_RU_UNITS,
    weekdays=("понедельник", "вторник", "сред[ау]", "четверг", "пятниц[ау]", "суббот[ау]", "воскресенье"),
    months=(
        "январ[ьея]",
        "феврал[ьея]",
        "март[ае]?",
        "апрел[ьея]",
        "ма[йея]",
        "июн[ьея]",
        "июл[ьея]",
        "август[ае]?",
        "сентябр[ьея]",
        "октябр[ьея]",
        "ноябр[ьея]",
        "декабр[ьея]",
    ),
    phrases=(
        (rf"(?:{_RU_N}\s+)?(?P<u>{'|'.join(p for p, _ in _RU_UNITS)})\s+назад", _ago),
        (rf"за\s+последни[ехй]\s+{_RU_N}\s+(?P<u>{'|'.join(p for p, _ in _RU_UNITS)})", _past),
        (r"позавчера", _fixed("day before yesterday")),
        (r"вчера", _fixed("yesterday")),
        (r"сегодня", _fixed("today")),
        (r"(?:на|в)\s+прошл(?:ой|ом|ые|ую)\s+(?P<u>недел[юе]|месяце|году|выходные)", _last),
        (r"(?:на|в)\s+эт(?:ой|ом|у)\s+(?P<u>недел[юе]|месяце|году)", _this),
        (
            r"в\s+прошл(?:ый|ую|ое)\s+(?P<w>понедельник|вторник|среду|четверг|пятницу|субботу|воскресенье)",
            _last_weekday,
        ),
        (
            r"(?:в|с)\s+(?P<m>январе|феврале|марте|апреле|мае|июне|июле|августе|сентябре|октябре|ноябре|декабре)",
            _in_month,
        ),
    ),
)

_ZH_NUM = {
    "一": 1,
    "两": 2,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
    "几": 3,
}
_ZH_UNITS = (("天|日", "day"), ("个?星期|周|个?礼拜", "week"), ("个月", "month"), ("年", "year"))
CHINESE = Language(
    numbers=_ZH_NUM,
    units=_ZH_UNITS,
    weekdays=("一", "二", "三", "四", "五", "六", "[日天]"),
    months=(
        "一|1",
        "二|2",
        "三|3",
        "四|4",
        "五|5",
        "六|6",
        "七|7",
        "八|8",
        "九|9",
        "十|10",
        "十一|11",
        "十二|12",
    ),
    phrases=(
        (r"(?P<n>\d+|[一两二三四五六七八九十几])\s*(?P<u>天|日|个?星期|周|个?礼拜|个月|年)(?:以)?前", _ago),
        (r"(?:过去|最近)的?\s*(?P<n>\d+|[一两二三四五六七八九十几])\s*(?P<u>天|个?星期|周|个月|年)", _past),
        (r"前天", _fixed("day before yesterday")),
        (r"昨天", _fixed("yesterday")),
        (r"今天", _fixed("today")),
        (r"(?:上个?|上一个?)(?:星期|周|礼拜)(?P<w>[一二三四五六日天])", _last_weekday),
        (r"上个?(?P<u>月|星期|周|礼拜)", lambda m, lang: "last month" if m["u"] == "月" else "last week"),
        (r"去年", _fixed("last year")),
        (
            r"(?:这个?|本)(?P<u>月|星期|周|礼拜)",
            lambda m, lang: "this month" if m["u"] == "月" else "this week",
        ),
        (r"今年", _fixed("this year")),
        (
            r"(?<![\d一二三四五六七八九十个])(?P<m>十[一二]|[一二三四五六七八九十]|1[0-2]|[1-9])月(?:份)?",
            _in_month,
        ),
    ),
)

_DE_NUM = {"ein": 1, "eine": 1, "einem": 1, "einer": 1, "einen": 1, "zwei": 2, "paar": 2, "drei": 3, "vier": 4,
           "fünf": 5, "sechs": 6, "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "einigen": 3}  # fmt: skip
_DE_UNITS = (("tag(?:e|en)?", "day"), ("wochen?", "week"), ("monat(?:e|en)?", "month"), ("jahr(?:e|en)?", "year"),
             ("wochenende", "weekend"))  # fmt: skip
_DE_N = "(?P<n>\\d+|" + "|".join(_DE_NUM) + ")"
GERMAN = Language(
    numbers=_DE_NUM,
    units=_DE_UNITS,
    weekdays=("montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag|sonnabend", "sonntag"),
    months=(
        "januar",
        "februar",
        "märz",
        "april",
        "mai",
        "juni",
        "juli",
        "august",
        "september",
        "oktober",
        "november",
        "dezember",
    ),
    phrases=(
        (rf"vor\s+(?:ein(?:em|er)?\s+paar\s+)?{_DE_N}?\s*(?P<u>{'|'.join(p for p, _ in _DE_UNITS)})\b", _ago),
        (
            rf"(?:in\s+den\s+|während\s+der\s+)?letzten\s+{_DE_N}\s+(?P<u>{'|'.join(p for p, _ in _DE_UNITS)})\b",
            _past,
        ),
        (r"vorgestern", _fixed("day before yesterday")),
        (r"gestern", _fixed("yesterday")),
        (r"\bheute\b", _fixed("today")),
        (
            r"(?:letzte[nrsm]?|vorige[nrsm]?)\s+(?P<w>montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag)",
            _last_weekday,
        ),
        (r"(?:letzte[nrsm]?|vorige[nrsm]?)\s+(?P<u>woche|monat|jahr|wochenende)\b", _last),
        (r"(?:diese[nrsm]?)\s+(?P<u>woche|monat|jahr)\b", _this),
        (
            r"\b(?:im|seit)\s+(?P<m>januar|februar|märz|april|mai|juni|juli|august|september|oktober|november|dezember)",
            _in_month,
        ),
    ),
)

_ES_NUM = {"un": 1, "una": 1, "uno": 1, "dos": 2, "par": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6,
           "siete": 7, "ocho": 8, "nueve": 9, "diez": 10, "unos": 3, "unas": 3}  # fmt: skip
_ES_UNITS = (("días?", "day"), ("semanas?", "week"), ("mes(?:es)?", "month"), ("años?", "year"),
             ("fin(?:es)? de semana", "weekend"))  # fmt: skip
_ES_N = "(?P<n>\\d+|" + "|".join(_ES_NUM) + ")"
SPANISH = Language(
    numbers=_ES_NUM,
    units=_ES_UNITS,
    weekdays=("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
    months=(
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "se?tiembre",
        "octubre",
        "noviembre",
        "diciembre",
    ),
    phrases=(
        (rf"hace\s+(?:un\s+par\s+de\s+)?{_ES_N}?\s*(?P<u>{'|'.join(p for p, _ in _ES_UNITS)})", _ago),
        (
            rf"(?:en\s+)?(?:los|las)\s+últim[oa]s\s+{_ES_N}\s+(?P<u>{'|'.join(p for p, _ in _ES_UNITS)})",
            _past,
        ),
        (r"anteayer|antier", _fixed("day before yesterday")),
        (r"\bayer\b", _fixed("yesterday")),
        (r"\bhoy\b", _fixed("today")),
        (r"(?:el\s+)?(?P<w>lunes|martes|miércoles|jueves|viernes|sábado|domingo)\s+pasado", _last_weekday),
        (r"(?:la|el)\s+(?P<u>semana|mes|año|fin de semana)\s+pasad[oa]", _last),
        (r"est[ea]\s+(?P<u>semana|mes|año)\b", _this),
        (
            r"\b(?:en|desde)\s+(?P<m>enero|febrero|marzo|abril|mayo|junio|julio|agosto|se?tiembre|octubre|noviembre|"
            r"diciembre)",
            _in_month,
        ),
    ),
)

_FR_NUM = {"un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "six": 6, "sept": 7, "huit": 8,
           "neuf": 9, "dix": 10, "quelques": 3}  # fmt: skip
_FR_UNITS = (("jours?", "day"), ("semaines?", "week"), ("mois", "month"), ("ans?|années?", "year"),
             ("week-ends?|weekends?", "weekend"))  # fmt: skip
_FR_N = "(?P<n>\\d+|" + "|".join(_FR_NUM) + ")"
FRENCH = Language(
    numbers=_FR_NUM,
    units=_FR_UNITS,
    weekdays=("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    months=(
        "janvier",
        "février",
        "mars",
        "avril",
        "mai",
        "juin",
        "juillet",
        "août",
        "septembre",
        "octobre",
        "novembre",
        "décembre",
    ),
    phrases=(
        (rf"il\s+y\s+a\s+{_FR_N}?\s*(?P<u>{'|'.join(p for p, _ in _FR_UNITS)})", _ago),
        (
            rf"(?:au\s+cours\s+des|ces|pendant\s+les|les)\s+{_FR_N}\s+derni(?:ers|ères)\s+"
            rf"(?P<u>{'|'.join(p for p, _ in _FR_UNITS)})",
            _past,
        ),
        (r"avant-hier", _fixed("day before yesterday")),
        (r"\bhier\b", _fixed("yesterday")),
        (r"aujourd'hui|aujourd’hui", _fixed("today")),
        (r"(?P<w>lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche)\s+derni(?:er|ère)", _last_weekday),
        (r"(?:la|le|l')\s*(?P<u>semaine|mois|année|an|week-end)\s+(?:derni(?:er|ère)|passée?)", _last),
        (r"(?:cette|ce|cet)\s+(?P<u>semaine|mois|année)", _this),
        (
            r"\b(?:en|depuis|au\s+mois\s+de)\s+(?P<m>janvier|février|mars|avril|mai|juin|juillet|août|septembre|"
            r"octobre|novembre|décembre)",
            _in_month,
        ),
    ),
)

LANGUAGES: dict[str, Language] = {
    "ru": RUSSIAN, "zh": CHINESE, "de": GERMAN, "es": SPANISH, "fr": FRENCH,
}  # fmt: skip
_COMPILED = [
    (re.compile(p, re.IGNORECASE), build, lang, code)
    for code, lang in LANGUAGES.items()
    for p, build in lang.phrases
]
# One search per language before its phrases are tried one by one: most questions hold no phrase of any language,
# and one alternation is several times cheaper than each phrase's search (named groups become plain ones here, as
# two phrases may name a group alike). Russian and Chinese phrases need their script, so they are skipped without it.
_SCRIPT = {"ru": re.compile(r"[\u0400-\u04ff]"), "zh": re.compile(r"[\u3400-\u9fff]")}
_ANY = {
    code: re.compile(
        "|".join(f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', p)})" for p, _ in lang.phrases), re.IGNORECASE
    )
    for code, lang in LANGUAGES.items()
}


def in_english(question: str) -> tuple[str, str] | None:
    """The first time phrase of another language in ``question``: (the English phrase it means, the words as
    written), or ``None``."""
    text = question.lower()
    candidates = {
        code for code, any_phrase in _ANY.items()
        if (code not in _SCRIPT or _SCRIPT[code].search(text)) and any_phrase.search(text)
    }  # fmt: skip
    if not candidates:
        return None
    best: tuple[int, str, str] | None = None
    for pattern, build, lang, code in _COMPILED:
        if code not in candidates:
            continue
        m = pattern.search(text)
        if m and (best is None or m.start() < best[0]):
            try:
                best = (m.start(), build(m, lang), m[0])
            except StopIteration:  # a form the unit or name tables do not know: not a time phrase after all
                continue
    return None if best is None else (best[1], best[2])
