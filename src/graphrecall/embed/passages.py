"""Long texts embedded in full: a vector pooled from window-sized pieces, and a vector per short passage.

Why: a sentence-transformer reads at most its window (all-MiniLM-L6-v2: 256 tokens, about 1,000 characters of
English) and silently drops the rest, so a long message (a pasted document, a long story) was searchable by its
opening only; and even a text it reads whole is one vector for everything it says, so one detail among several
topics is diluted. Every piece below is embedded in the same batched call as the other texts:
- a text longer than the window is cut at sentence ends into windows (pieces that fit the window): its vector is
  the normalized mean of theirs (what the whole text is about, every part counted), so a round keeps exactly one
  user-side vector wherever one is expected (restatement checks, the tail, the reply-less round);
- a text longer than ``PASSAGE_FROM_CHARS`` (300; ``Settings.passage_from_chars``) or than the window is also cut
  into passages of a sentence or two, stored beside the round (``Passage`` rows, the ``round_passage`` derived
  index), so search scores a round by the best of its vector and its passages' (less a penalty), and a detail is
  found although the whole text's vector dilutes it.

Why not pool the short passages instead of embedding windows too: the mean of ~20 sentence vectors lies near the
centroid of everything, so long turns drew near every question; on LongMemEval dev that pushed a gold session from
rank 8 to 22 and cost session recall_all@10 0.008 (docs/benchmarks.md). So a text with passages has its tokens
embedded twice: 1.6x the embedding time of the user side of LongMemEval's turns.

Why caps: a 1 MB message would be ~7,000 passages and a minute of CPU inside one write. Beyond ``MAX_WINDOWS`` or
``MAX_PASSAGES``, that many pieces spread evenly over the text stand for it (the embedding then samples the text;
BM25 still indexes every word).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from graphrecall.embed.base import Embedder, TextKind, Vectors, layers, normalize_rows

CHARS_PER_TOKEN = 3
"""Characters per model token assumed when sizing a passage: English prose averages ~4 per MiniLM word piece, digits,
code and non-English text fewer; 3 keeps nearly every passage inside the window without counting tokens."""
PASSAGE_MAX_CHARS = 150
"""A long text's passages hold at most this many characters (a sentence or two; fewer when the model's window is
smaller). Why so short: a passage is found by its best match, and a detail in a short passage is most of it. On long
messages built around a known LongMemEval evidence turn, the message ranked first among ~230 turns for 0.643 of the
questions with 150-character passages, 0.524 with 250, 0.333 with 400 and 0.143 with window-sized ones
(``benchmarks/perf/passages.py``, docs/benchmarks.md)."""
MAX_PASSAGES = 128
"""At most this many passages per text (~19k characters have a passage each)."""
PASSAGE_FROM_CHARS = 300
"""A text longer than this many characters gets passages even when the model reads it whole (``Settings.
passage_from_chars``; a text longer than the window always does). Why below the window: a turn of a few sentences
about several things is diluted too. Measured (docs/benchmarks.md "Long messages"): LoCoMo dev evidence recall@10
0.709 -> 0.720, LongMemEval dev session ndcg@10 0.961 -> 0.965; from 200 characters LongMemEval turn ndcg@10 gains
0.011 more but the user side costs 2.0x the embedding time instead of 1.6x."""
MAX_WINDOWS = 64
"""At most this many windows are pooled into a text's vector (~48k characters are embedded in full)."""

_BREAK = re.compile(r"(?<=[.!?…;:])\s+|\n+")


def passage_chars(embedder: Embedder) -> int | None:
    """The longest text, in characters, that ``embedder`` reads whole (a longer one is cut into windows);
    ``None`` when it reads any length (or does not say). The window comes from ``max_tokens`` (``SentenceTransformerEmbedder`` knows it from the model's
    files before loading it), looked up through wrappers such as ``CachedEmbedder``."""
    for layer in layers(embedder):
        tokens = getattr(layer, "max_tokens", None)
        if isinstance(tokens, int) and tokens > 2:
            return (tokens - 2) * CHARS_PER_TOKEN  # [CLS] and [SEP] take two
    return None


def split_passages(text: str, max_chars: int) -> list[str]:
    """``text`` as consecutive passages of at most ``max_chars`` characters, cut at sentence or line ends where it
    can and at spaces (or anywhere) where one sentence is longer than a passage. Every non-space character of the
    text is in exactly one passage, in order."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    pieces: list[str] = []
    start = 0
    for m in _BREAK.finditer(text):
        if m.start() > start:
            pieces.append(text[start : m.start()])
        start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    passages: list[str] = []
    current = ""
    for piece in (p for s in pieces for p in _cut(s, max_chars)):
        if current and len(current) + 1 + len(piece) <= max_chars:
            current = f"{current} {piece}"
        else:
            if current:
                passages.append(current)
            current = piece
    if current:
        passages.append(current)
    return passages


def _cut(sentence: str, max_chars: int) -> list[str]:
    """A sentence longer than ``max_chars`` cut at the last space before each limit (mid-word when it has none)."""
    out: list[str] = []
    rest = sentence.strip()
    while len(rest) > max_chars:
        at = rest.rfind(" ", 0, max_chars + 1)
        at = at if at > 0 else max_chars
        out.append(rest[:at].rstrip())
        rest = rest[at:].lstrip()
    if rest:
        out.append(rest)
    return out


def spread(passages: Sequence[str], limit: int) -> list[str]:
    """At most ``limit`` of ``passages``, evenly spaced from the first to the last, in order."""
    if len(passages) <= limit:
        return list(passages)
    if limit == 1:
        return [passages[0]]
    step = (len(passages) - 1) / (limit - 1)
    return [passages[round(i * step)] for i in range(limit)]


def passage_texts(
    embedder: Embedder, texts: Sequence[str], *, passages: bool = True, from_chars: int = PASSAGE_FROM_CHARS
) -> tuple[list[str], list[tuple[int, int]], list[tuple[int, int] | None]]:
    """What the model is sent for ``texts``: each text that fits the window as itself, in place of a longer one its
    windows (window-sized passages, at most ``MAX_WINDOWS``: their mean is its vector); and, unless ``passages`` is
    false, after a text longer than ``from_chars`` (or the window) its passages of at most ``PASSAGE_MAX_CHARS`` (at
    most ``MAX_PASSAGES``). Returns that list, the span of each text's vector pieces in it, and the span of its
    passages (``None`` when it has fewer than two)."""
    limit = passage_chars(embedder)
    start = limit if limit is None or not passages else min(limit, from_chars)
    if start is None or limit is None or all(len(t) <= start for t in texts):
        return list(texts), [(i, i + 1) for i in range(len(texts))], [None] * len(texts)
    size = min(limit, PASSAGE_MAX_CHARS)
    flat: list[str] = []
    spans: list[tuple[int, int]] = []
    part_spans: list[tuple[int, int] | None] = []
    for t in texts:
        windows = (spread(split_passages(t, limit), MAX_WINDOWS) if len(t) > limit else []) or [t]
        spans.append((len(flat), len(flat) + len(windows)))
        flat.extend(windows)
        if not passages or len(t) <= start:
            part_spans.append(None)
        elif size >= limit:  # a window no longer than a passage: the windows are the passages
            part_spans.append(spans[-1] if len(windows) > 1 else None)
        else:
            parts = spread(split_passages(t, size), MAX_PASSAGES)
            part_spans.append((len(flat), len(flat) + len(parts)) if len(parts) > 1 else None)
            if len(parts) > 1:
                flat.extend(parts)
    return flat, spans, part_spans


def embed_in_full(embedder: Embedder, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
    """``embedder.embed(texts)``, except that a text longer than the embedder's window is embedded as the
    normalized mean of its windows' vectors (``split_passages``, at most ``MAX_WINDOWS``, ``spread``). One
    ``embed`` call for all texts and windows, so batching (and a cache in front of the model) work as before."""
    flat, spans, _ = passage_texts(embedder, texts, passages=False)
    vecs = embedder.embed(flat, kind=kind)
    return vecs if len(flat) == len(texts) else _pooled(vecs, spans)


def embed_passages(
    embedder: Embedder,
    texts: Sequence[str],
    *,
    kind: TextKind = "document",
    from_chars: int = PASSAGE_FROM_CHARS,
) -> tuple[Vectors, list[Vectors | None]]:
    """``embed_in_full``'s vectors, and per text its passage vectors ((passages, dim), unit length) when it is
    longer than ``from_chars`` or the window and has two passages or more, else ``None``. One ``embed`` call."""
    flat, spans, part_spans = passage_texts(embedder, texts, from_chars=from_chars)
    vecs = embedder.embed(flat, kind=kind)
    if len(flat) == len(texts):
        return vecs, [None] * len(texts)
    parts: list[Vectors | None] = [
        None if ps is None else normalize_rows(vecs[ps[0] : ps[1]]) for ps in part_spans
    ]
    return _pooled(vecs, spans), parts


def passage_vectors(
    embedder: Embedder, texts: Sequence[str], *, from_chars: int = PASSAGE_FROM_CHARS
) -> list[Vectors | None]:
    """Per text, the passage vectors ``embed_passages`` would keep for it (``None`` where it keeps none), without
    embedding the texts' own windows: for rounds whose vector is stored already (``Memory.backfill_passages``)."""
    flat, _, part_spans = passage_texts(embedder, texts, from_chars=from_chars)
    wanted = [ps for ps in part_spans if ps is not None]
    if not wanted:
        return [None] * len(texts)
    vecs = embedder.embed([t for a, b in wanted for t in flat[a:b]])
    out: list[Vectors | None] = []
    at = 0
    for ps in part_spans:
        if ps is None:
            out.append(None)
            continue
        n = ps[1] - ps[0]
        out.append(normalize_rows(vecs[at : at + n]))
        at += n
    return out


def _pooled(vecs: Vectors, spans: Sequence[tuple[int, int]]) -> Vectors:
    pooled = np.stack([vecs[a:b].mean(axis=0) for a, b in spans]) if spans else vecs[:0]
    return normalize_rows(pooled)
