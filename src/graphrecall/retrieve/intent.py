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


def asks_about_now(question: str) -> bool:
    """True when the question asks how things are now, so a newer mention outranks an older one."""
    return NOW_CUE.search(" ".join(question.split())) is not None


def asks_about_assistant(question: str) -> bool:
    """True when the question asks what the assistant said, so its evidence is in a reply."""
    return ASSISTANT_CUE.search(" ".join(question.split())) is not None


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
    return FIRST_PERSON.search(question.replace("\u2019", "'")) is not None


def asks_about_someone_else(question: str) -> bool:
    """True when the question is about another person and not the user: no first person, and a third-person
    pronoun or a name (a capitalized word that does not start a sentence: "when did Melanie run a race?"). A bare
    keyword query ("frisbee", "INV-88213") is about no one, so it is not."""
    text = question.replace("\u2019", "'")
    if asks_about_user(text):
        return False
    if THIRD_PERSON.search(text):
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
