"""Long texts embedded in full: split into passages that fit the model's window, embedded together, pooled.

Why: a sentence-transformer reads at most its window (all-MiniLM-L6-v2: 256 tokens, about 1,000 characters of
English) and silently drops the rest, so a long message (a pasted document, a long story) was searchable by its
opening only. Here a text longer than a window is cut at sentence ends into passages that each fit, every passage
is embedded in the same batched call as the other texts, and the text's vector is the normalized mean of its
passage vectors: what the whole text is about, with every part of it counted.

Why one pooled vector and not one vector per passage: a round then keeps exactly one user-side vector, so the
write-ahead log's entries, the derived vector index (exact scan and usearch tiers), erase and rebuild stay one row
per round. A per-passage index ranks a detail buried in a long text higher (max instead of mean); it needs a
multi-row vector index and is left for when long documents are a use case we measure (docs/architecture.md).

Why a cap: a 1 MB message would be ~1,300 passages and a minute of CPU inside one write. Beyond ``MAX_PASSAGES``,
that many passages spread evenly over the text stand for it (the embedding then samples the text; BM25 still
indexes every word).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from graphrecall.embed.base import Embedder, TextKind, Vectors, layers, normalize_rows

CHARS_PER_TOKEN = 3
"""Characters per model token assumed when sizing a passage: English prose averages ~4 per MiniLM word piece, digits,
code and non-English text fewer; 3 keeps nearly every passage inside the window without counting tokens."""
MAX_PASSAGES = 64
"""At most this many passages per text (64 windows: ~50k characters are embedded in full)."""

_BREAK = re.compile(r"(?<=[.!?…;:])\s+|\n+")


def passage_chars(embedder: Embedder) -> int | None:
    """The longest text, in characters, that ``embedder`` reads whole; ``None`` when it reads any length (or does
    not say). The window comes from ``max_tokens`` (``SentenceTransformerEmbedder`` knows it from the model's
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


def passage_texts(embedder: Embedder, texts: Sequence[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """What ``embed_in_full`` sends to the model for ``texts`` (each text, or its passages in its place), and the
    span of each text in that list."""
    limit = passage_chars(embedder)
    if limit is None or all(len(t) <= limit for t in texts):
        return list(texts), [(i, i + 1) for i in range(len(texts))]
    flat: list[str] = []
    spans: list[tuple[int, int]] = []
    for t in texts:
        parts = spread(split_passages(t, limit), MAX_PASSAGES) if len(t) > limit else [t]
        parts = parts or [t]  # an all-space text embeds as itself
        spans.append((len(flat), len(flat) + len(parts)))
        flat.extend(parts)
    return flat, spans


def embed_in_full(embedder: Embedder, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
    """``embedder.embed(texts)``, except that a text longer than the embedder's window is embedded as the
    normalized mean of its passages' vectors (``split_passages``, at most ``MAX_PASSAGES``, ``spread``). One
    ``embed`` call for all texts and passages, so batching (and a cache in front of the model) work as before."""
    flat, spans = passage_texts(embedder, texts)
    vecs = embedder.embed(flat, kind=kind)
    if len(flat) == len(texts):
        return vecs
    pooled = np.stack([vecs[a:b].mean(axis=0) for a, b in spans]) if spans else vecs[:0]
    return normalize_rows(pooled)
