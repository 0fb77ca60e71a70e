"""The part of a long text that bears on a question: a window of whole sentences around the best-matching one.

Why: a round is a user turn plus the assistant's reply, and replies run long (LongMemEval's average 1.7k
characters, often far more). Packed whole, five to eight rounds fill a 2,000-token context and the evidence of a
multi-session question, spread over several sessions, does not fit. The user turn usually holds what the user said
about themselves; of the reply, a reader needs the sentences that share the question's content words. This module
picks them, lexically (the same tokens, stopwords and stems as BM25, no model), so it is cheap and predictable.

Everything here is pure: text in, text out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graphrecall.text import query_tokens, tokenize

CHARS_PER_TOKEN = 4
"""The context's token estimate (``context.estimate_tokens``): about four characters per token."""

ELLIPSIS = "…"
USER_SHARE = 0.7
"""Of a round cut to fit, the user's messages may take up to 70% of the room, whole when they fit."""
MIN_TURN_CHARS = 40  # no message is cut below this, whatever its share

_ROLE_LINE = re.compile(r"^(user|assistant|system|tool|document): ", re.MULTILINE)
_USER_SIDE = ("user", "document")  # ``ingest.USER_SIDE``: a document passage is read like the user's words
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")


@dataclass(frozen=True)
class Turn:
    """One message of a round as stored in its text (``role: text`` per message, messages joined by newlines)."""

    role: str
    text: str


def split_turns(text: str) -> list[Turn]:
    """A round's text back into its messages; empty when the text has no ``role:`` line (not a round's text).
    Text before the first such line (not written by ``ingest.build_rounds``, but possible in a hit built
    elsewhere) counts as a user turn, so nothing is lost."""
    marks = list(_ROLE_LINE.finditer(text))
    if not marks:
        return []
    turns: list[Turn] = []
    if text[: marks[0].start()].strip():
        turns.append(Turn("user", text[: marks[0].start()].rstrip("\n")))
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        end = nxt.start() if nxt is not None else len(text)
        turns.append(Turn(m.group(1), text[m.end() : end].rstrip("\n")))
    return turns


def _sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the sentences (or lines) of ``text``, whitespace excluded."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if text[start : m.start()].strip():
            spans.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def question_terms(question: str) -> frozenset[str]:
    """The content terms of a question (stemmed, question stopwords dropped): what a sentence must share with it."""
    return frozenset(query_tokens(question))


def excerpt(text: str, terms: frozenset[str], max_chars: int) -> str:
    """``text`` itself when it fits ``max_chars``; otherwise the window of whole sentences around the sentence
    sharing the most ``terms`` (ties: the earliest; no match: the opening), grown forward then backward while it
    fits, with ``…`` where text was cut. A single sentence longer than the cap is cut around its first matching
    word. The result is never longer than ``max_chars`` (ellipses included) and is a plain substring of ``text``
    apart from them."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    if len(text) <= max_chars:
        return text
    spans = _sentences(text)
    if not spans:
        return ""
    scores = [len(terms.intersection(tokenize(text[s:e]))) for s, e in spans]
    best = max(range(len(spans)), key=lambda i: (scores[i], -i))
    budget = max_chars - 2 * (len(ELLIPSIS) + 1)  # room for both marks, each with its space
    if budget < 1:
        return text[: max_chars - len(ELLIPSIS)] + ELLIPSIS if max_chars > len(ELLIPSIS) else text[:max_chars]
    lo = hi = best
    s, e = spans[best]
    if e - s > budget:
        return _cut_sentence(text, s, e, terms, budget)
    while True:  # grow: next sentence first (what follows a match explains it), then the previous one
        grown = False
        if hi + 1 < len(spans) and spans[hi + 1][1] - spans[lo][0] <= budget:
            hi += 1
            grown = True
        if lo > 0 and spans[hi][1] - spans[lo - 1][0] <= budget:
            lo -= 1
            grown = True
        if not grown:
            break
    body = text[spans[lo][0] : spans[hi][1]]
    head = ELLIPSIS + " " if lo > 0 or text[: spans[lo][0]].strip() else ""
    tail = " " + ELLIPSIS if hi < len(spans) - 1 or text[spans[hi][1] :].strip() else ""
    out = head + body + tail
    return out if len(out) <= max_chars else out[: max_chars - len(ELLIPSIS)] + ELLIPSIS


def round_excerpt(text: str, terms: frozenset[str], max_chars: int) -> tuple[str, bool]:
    """A round's text within ``max_chars``, and whether that is a part of it: whole if it fits. Otherwise every
    message keeps its ``role:`` line; the user's messages come first, whole up to ``USER_SHARE`` of the room (what
    the user said is the memory; the reply is mostly advice), the other messages share the rest, and each message
    that does not fit its share is cut to its best window by ``excerpt``. Messages of one side share their side's
    room by length. Text that is not a round's (no ``role:`` line) is cut to its best window as a whole."""
    if len(text) <= max_chars:
        return text, False
    turns = split_turns(text)
    if not turns:
        return excerpt(text, terms, max_chars), True
    room = max_chars - sum(len(t.role) + 3 for t in turns)  # "role: " and the joining newline
    user_len = sum(len(t.text) for t in turns if t.role in _USER_SIDE)
    other_len = sum(len(t.text) for t in turns if t.role not in _USER_SIDE)
    user_room = min(user_len, int(room * USER_SHARE)) if other_len else room
    other_room = room - user_room
    lines = []
    for t in turns:
        side_len, side_room = (user_len, user_room) if t.role in _USER_SIDE else (other_len, other_room)
        cap = max(MIN_TURN_CHARS, side_room * len(t.text) // max(1, side_len))
        lines.append(f"{t.role}: {excerpt(t.text, terms, cap) if t.text else ''}")
    body = "\n".join(lines)
    if len(body) > max_chars:  # the per-message floors overshot: cut the whole
        body = excerpt(body, terms, max_chars)
    return body, True


def _cut_sentence(text: str, start: int, end: int, terms: frozenset[str], budget: int) -> str:
    """A window of ``budget`` characters of one over-long sentence, starting a little before its first matching
    word (or at its start)."""
    anchor = start
    for m in re.finditer(r"\w+", text[start:end]):
        if terms.intersection(tokenize(m.group(0))):
            anchor = start + m.start()
            break
    lo = max(start, min(anchor - budget // 4, end - budget))
    hi = min(end, lo + budget)
    head = ELLIPSIS + " " if lo > 0 else ""
    tail = " " + ELLIPSIS if hi < len(text.rstrip()) else ""
    return head + text[lo:hi].strip() + tail
