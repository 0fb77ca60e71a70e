"""BM25 over the user side of a candidate pool, computed in memory at query time.

Why: a fact the user stated is best found by the user's own words, while the round index (user and reply
together) lets a long reply on the same topic outrank the round where the user said it. A store-side index over
the user text alone would be the direct way, but a second FTS index written in the same transaction makes Kuzu
0.11.3 lose the writes that follow a rollback; scoring the ~100-round candidate pool here costs a few milliseconds
and, measured on LongMemEval dev, recovers the same gain. IDF comes from the pool, which is query-focused: terms
that every candidate shares weigh little, which is what separates candidates.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

from graphrecall.text import BM25_B as B
from graphrecall.text import BM25_K1 as K1
from graphrecall.text import query_tokens, tokenize


def pool_bm25(
    query: str,
    docs: Mapping[str, str],
    k1: float = K1,
    b: float = B,
    *,
    drop_query_stopwords: bool = True,
) -> list[tuple[str, float]]:
    """(doc id, BM25 score) for documents matching at least one query term, best first, ties by id. Query words
    without content ("now", "again", see ``graphrecall.text.QUERY_STOPWORDS``) are not terms."""
    terms = set(query_tokens(query, drop_query_stopwords=drop_query_stopwords))
    if not terms or not docs:
        return []
    toks = {doc_id: tokenize(text) for doc_id, text in docs.items()}
    n = len(toks)
    avg = sum(len(t) for t in toks.values()) / n or 1.0
    df: Counter[str] = Counter()
    for t in toks.values():
        df.update(terms.intersection(t))
    idf = {t: math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1.0) for t in terms}
    out: list[tuple[str, float]] = []
    for doc_id, t in toks.items():
        tf = Counter(x for x in t if x in terms)
        if not tf:
            continue
        norm = k1 * (1 - b + b * len(t) / avg)
        out.append((doc_id, sum(idf[w] * c * (k1 + 1) / (c + norm) for w, c in tf.items())))
    return sorted(out, key=lambda kv: (-kv[1], kv[0]))
