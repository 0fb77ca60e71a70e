"""A deterministic feature-hashing embedder: fast, dependency-free, meaningless beyond word overlap.

For unit tests only: it makes tests independent of model weights while still giving related texts related
vectors (shared words and word pairs hash to shared dimensions).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

import numpy as np

from graphrecall.embed.base import TextKind, Vectors, normalize_rows
from graphrecall.text import tokenize


class HashingEmbedder:
    def __init__(self, dim: int = 64) -> None:
        if dim < 8:
            raise ValueError(f"dim must be at least 8, got {dim}")
        self._dim = dim

    @property
    def id(self) -> str:
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _bucket(self, feature: str) -> tuple[int, float]:
        h = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(h, "little")
        return value % self._dim, (1.0 if (value >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            toks = tokenize(text)
            feats = toks + [a + " " + b for a, b in itertools.pairwise(toks)]
            for f in feats:
                i, sign = self._bucket(f)
                out[row, i] += sign
        return normalize_rows(out)
