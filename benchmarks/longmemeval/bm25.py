"""Plain Okapi BM25 (k1=1.5, b=0.75) with lower-case word tokens: the baseline the retriever has to beat.

Deliberately naive (no stemming, no stopwords) and independent of the library, so that it measures what a simple
lexical retriever over the same rounds achieves.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class BM25:
    def __init__(self, docs: Sequence[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(tokenize(d)) for d in docs]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg_len = (sum(self.lengths) / len(docs)) if docs else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        # The "+1" inside the log keeps idf positive for terms in more than half of the documents.
        self.idf = {t: math.log((n - d + 0.5) / (d + 0.5) + 1.0) for t, d in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = set(tokenize(query))
        out = []
        for tf, length in zip(self.tfs, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / self.avg_len) if self.avg_len else self.k1
            out.append(sum(self.idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in terms if t in tf))
        return out

    def rank(self, query: str, k: int) -> list[int]:
        """Indices of the top-k documents, best first; ties by document order."""
        s = self.scores(query)
        return sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]
