"""Cues in a question that change where its evidence lives.

A question addressed to the assistant about what *it* said ("what did you recommend", "remind me of the list you
gave me") is answered by a reply, not by the user's turn: user-side signals then point at the wrong half of the
round. The Reader's classifier (``read.classify``) uses the same cue for its single-session-assistant category.
A question about someone else ("when did Melanie run a charity race?") has no reason to prefer the user's half
either: who said it is not known, so both halves weigh alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphrecall.text import language_of

ASSISTANT_CUE = re.compile(
    r"\b(our|the) (previous|earlier|last) (conversation|chat|discussion|game)|\byou made\b|\bremind me\b|"
    # "did you suggest" asks about the past; "can you suggest" asks for something new (the user's preferences matter)
    r"(?<!can )(?<!could )(?<!would )(?<!will )\byou (told|tell|suggested|suggest|recommended|recommend|mentioned|mention|provided|provide|gave|give|said|"
    r"say|listed|list|shared|share|came up with|come up with)\b|"
    r"\bwe discussed\b",
    re.IGNORECASE,
)


# A question about the present state of something that may have changed: its latest mention is the likely answer.
NOW_CUE = re.compile(
    r"\b(now|currently|current|nowadays|these days|at the moment|anymore|any more|still|latest|so far|in the end|"
    r"lately|these days|right now|at present)\b",
    re.IGNORECASE,
)


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# The same cues in other languages, read only for a question in that language (``text.language_of``), so an English
# question is judged exactly as before. Chinese has no word boundaries: its patterns match inside a run.
OTHER_CUES: dict[str, dict[str, re.Pattern[str]]] = {
    "ru": {
        "now": _rx(r"\b(сейчас|теперь|в данный момент|на данный момент|в настоящее время|до сих пор|всё ещё|все еще|"
                   r"по-прежнему|последн\w+|нынешн\w+|текущ\w+)\b"),
        "assistant": _rx(r"\b(ты|вы)\b[^?.!]{0,30}\b(сказал\w*|говорил\w*|(по)?совет\w+|(по)?рекомендовал\w*|"
                         r"упоминал\w*|упомянул\w*|предложил\w*|перечислил\w*|дал[аи]?)\b|\bнапомни(те)?\b|"
                         r"\bв (нашем|прошлом|предыдущем) (разговоре|чате)\b"),
        "first": _rx(r"\b(я|мне|меня|мной|мой|моя|моё|мое|мои|моего|моей|моих|моим|мы|нас|нам|наш|наша|наше|наши)\b"),
        "third": _rx(r"\b(он|она|они|его|её|ее|их|ему|ей|им|него|неё|нее|них|ним|ней)\b"),
    },
    "zh": {
        "now": _rx(r"现在|目前|如今|最近|当前|还在|仍然|依然|至今"),
        "assistant": _rx(r"你(之前|上次|刚才|以前)?(说|推荐|建议|提到|讲|列|给)(过|了|的)|提醒我|我们(之前|上次)?(聊|谈|讨论)(过|的)"),
        "first": _rx(r"我|咱们"),
        "third": _rx(r"他|她|它"),
    },
    "de": {
        "now": _rx(r"\b(jetzt|derzeit|aktuell|momentan|zurzeit|inzwischen|mittlerweile|immer noch|noch immer|"
                   r"neueste[nrsm]?|heutzutage)\b"),
        "assistant": _rx(r"\b(du hast|sie haben|hast du|haben sie)\b[^?.!]{0,40}\b(gesagt|empfohlen|vorgeschlagen|"
                         r"erwähnt|genannt|aufgelistet|gegeben)\b|\berinnere mich\b|\b(unserem|unseres) "
                         r"(letzten|vorigen|früheren) (gespräch|chat)\b"),
        "first": _rx(r"\b(ich|mir|mich|mein|meine|meinem|meinen|meiner|meines|wir|uns|unser|unsere|unserem|unseren)\b"),
        "third": _rx(r"\b(er|ihm|ihn|ihnen|sein|seine|seinem|seinen|seiner)\b"),
    },
    "es": {
        "now": _rx(r"\b(ahora|actualmente|todavía|aún|hoy en día|en este momento|ya no|últim[oa]s?)\b"),
        "assistant": _rx(r"\b(me |nos )?(dijiste|recomendaste|sugeriste|mencionaste|diste|contaste|propusiste)\b|"
                         r"\brecuérdame\b|\bnuestra (conversación|charla) (anterior|pasada)\b"),
        "first": _rx(r"\b(yo|me|mi|mis|mío|mía|conmigo|nosotros|nosotras|nuestro|nuestra|nuestros|nuestras)\b"),
        "third": _rx(r"\b(él|ella|ellos|ellas)\b"),
    },
    "fr": {
        "now": _rx(r"\b(maintenant|actuellement|en ce moment|toujours|encore|désormais|aujourd'hui|dernière?s?)\b"),
        "assistant": _rx(r"\b(tu m'as|vous m'avez|tu as|vous avez)\b[^?.!]{0,40}\b(dit|recommandé|conseillé|suggéré|"
                         r"mentionné|donné|proposé)\b|\brappelle-moi\b|\brappelez-moi\b|"
                         r"\bnotre (conversation|discussion) (précédente|dernière)\b"),
        "first": _rx(r"\b(je|j|me|m|moi|mon|ma|mes|nous|notre|nos)\b"),
        "third": _rx(r"\b(il|elle|ils|elles|lui)\b"),
    },
}  # fmt: skip


_ACCENTED = re.compile(r"[à-öø-ÿœß¿¡]", re.IGNORECASE)


def _cue(question: str, cue: str) -> bool:
    """Whether the question's own language (not English) says ``cue``. A question too short for the detector that
    still writes a letter English does not use ("¿qué me recomendaste?") is read in each Latin language."""
    lang = language_of(question)
    languages = ["de", "es", "fr"] if lang == "en" and _ACCENTED.search(question) else [lang]
    patterns = [OTHER_CUES[x][cue] for x in languages if x in OTHER_CUES]
    return any(p.search(question) for p in patterns)


def asks_about_now(question: str) -> bool:
    """True when the question asks how things are now, so a newer mention outranks an older one."""
    text = " ".join(question.split())
    return NOW_CUE.search(text) is not None or _cue(text, "now")


def without_now_cue(question: str) -> str:
    """The question without the words by which its own language (not English) says "now" ("ahora", "现在",
    "maintenant"), for its lexical lists.

    Why: those words say when, not what. As BM25 terms they match every round that happens to say "now" ("ahora
    tengo un gato" for "¿dónde vivo ahora?"), and in a small scope a rare shared word ranks first whatever it
    means. English's ("now") are in ``stopwords.txt`` and the rest of English's cue words stay as they were
    measured, so an English question's terms are unchanged."""
    text = " ".join(question.split())
    lang = language_of(text)
    languages = ["de", "es", "fr"] if lang == "en" and _ACCENTED.search(text) else [lang]
    patterns = [OTHER_CUES[x]["now"] for x in languages if x in OTHER_CUES]
    if not any(p.search(text) for p in patterns):
        return question  # unchanged, to the character: its terms are exactly those it had before
    for p in patterns:
        text = p.sub(" ", text)
    return " ".join(text.split())


def asks_about_assistant(question: str) -> bool:
    """True when the question asks what the assistant said, so its evidence is in a reply."""
    text = " ".join(question.split())
    return ASSISTANT_CUE.search(text) is not None or _cue(text, "assistant")


FIRST_PERSON = re.compile(
    r"\b(i|me|my|mine|myself|i'm|i've|i'd|i'll|we|us|our|ours|ourselves|we're|we've)\b", re.IGNORECASE
)
THIRD_PERSON = re.compile(
    r"\b(he|she|they|him|her|them|his|hers|their|theirs|he's|she's|they're)\b", re.IGNORECASE
)
_SENTENCE = re.compile(r"(?<=[.?!])\s+")


def asks_about_user(question: str) -> bool:
    """True when the question speaks in the first person (I, my, we, our...), so that what the user said about
    themselves is the likely evidence."""
    text = question.replace("\u2019", "'")
    return FIRST_PERSON.search(text) is not None or _cue(text, "first")


def asks_about_someone_else(question: str) -> bool:
    """True when the question is about another person and not the user: no first person, and a third-person
    pronoun or a name (a capitalized word that does not start a sentence: "when did Melanie run a race?"). A bare
    keyword query ("frisbee", "INV-88213") is about no one, so it is not."""
    text = question.replace("\u2019", "'")
    if asks_about_user(text):
        return False
    if THIRD_PERSON.search(text) or _cue(text, "third"):
        return True
    for sentence in _SENTENCE.split(text.strip()):
        words = sentence.split()[1:]
        if any(w[:1].isupper() and w[1:2].islower() for w in words):
            return True
    return False


@dataclass(frozen=True)
class Cues:
    """What one question says about where its evidence lives, read once per search. The candidate generators and
    post-fusion stages that a cue changes say so beside their own definition (``retrieve.lists``,
    ``retrieve.post``)."""

    about_assistant: bool  # asks what the assistant said: the evidence is in a reply
    about_someone_else: bool  # about another person: either half of a round may hold the evidence
    about_now: bool  # asks how things are now: a newer mention outranks an older one

    @classmethod
    def of(cls, question: str) -> Cues:
        return cls(
            about_assistant=asks_about_assistant(question),
            about_someone_else=asks_about_someone_else(question),
            about_now=asks_about_now(question),
        )
