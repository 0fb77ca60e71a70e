"""What the retrieval benchmarks (LongMemEval, LoCoMo) ask of a filled ``Memory`` besides a plain search.

Two probes, shared so both benchmarks measure the same thing:

- ``variant_searchers``: search one ingested scope with other ``RetrievalConfig`` overrides, so several settings
  are scored over identical stores (ingest once, search many). This is the only place a benchmark reaches below
  ``Memory``, through the explicit ``graphrecall.testing`` seam.
- ``context_probe``: which rounds and sessions ``Memory.context`` puts in front of a reader at each token budget
  (public API; beside it the earlier whole-round packing over the same hits), because a retriever that ranks the
  evidence 8th helps nobody if the context stops at 6.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from graphrecall import Memory, testing
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.embed import Embedder, TextKind, Vectors
from graphrecall.embed.base import Wrapper
from graphrecall.embed.cache import cache_key
from graphrecall.llm import LLM
from graphrecall.models import Context, Scope
from graphrecall.retrieve.context import build_context
from graphrecall.retrieve.retriever import HybridRetriever

# (scope, query, k, question_date) -> round ids, best first
VariantSearch = Callable[[Scope, str, int, datetime | None], list[str]]


def variant_searchers(
    mem: Memory, base: RetrievalConfig, variants: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, VariantSearch]]:
    """One search function per named override set, each over ``mem``'s stores with ``base`` + overrides.

    The variant retrievers share ``mem``'s embedder and reranker, and see what ``Memory.search`` would see: the
    same cutoff for the question date, and the scope's write log flushed into Kuzu first."""
    out: list[tuple[str, VariantSearch]] = []
    for name, overrides in variants.items():
        retriever = variant_retriever(mem, base, overrides)

        def search(
            scope: Scope, query: str, k: int, qd: datetime | None, _r: HybridRetriever = retriever
        ) -> list[str]:
            cutoff = mem.recall(scope, qd).cutoff
            mem.flush()
            with testing.database(mem, scope) as db:
                return [h.id for h in _r.search(db, query, k, cutoff=cutoff)]

        out.append((name, search))
    return out


def variant_retriever(mem: Memory, base: RetrievalConfig, overrides: Mapping[str, Any]) -> HybridRetriever:
    """A retriever with ``base`` + ``overrides`` that shares ``mem``'s embedder and reranker."""
    config = RetrievalConfig.model_validate(base.model_dump() | dict(overrides))
    return HybridRetriever(mem.embedder, config, testing.retriever(mem).reranker)


def context_probe(
    mem: Memory,
    scope: Scope,
    query: str,
    question_date: datetime | str | None,
    budgets: Sequence[int],
    evidence_texts: Sequence[str] = (),
) -> dict[str, dict[str, Any]]:
    """For each budget, the round ids and session ids inside ``Memory.context``, the tokens it used, the ids shown
    in part and, given the texts of the evidence messages, the share of them shown in full (verbatim, so that an
    excerpt that elides an answer counts against it). Under ``"whole"`` the same for the earlier packing (whole
    rounds best-first, ``packing="whole"``) over the same hits, so that both are compared in one run."""
    out: dict[str, dict[str, Any]] = {}
    hits = mem.search(scope, query, k=CONTEXT_K, question_date=question_date) if budgets else []
    cutoff = mem.recall(scope, question_date).cutoff
    for budget in budgets:
        ctx = mem.context(scope, query, token_budget=budget, k=CONTEXT_K, question_date=question_date)
        whole = build_context(query, hits, budget, question_date=cutoff.question_date, packing="whole")
        out[str(budget)] = _inside(ctx, evidence_texts) | {"whole": _inside(whole, evidence_texts)}
    return out


CONTEXT_K = 30  # ``Memory.context``'s default number of hits


def _inside(ctx: Context, evidence_texts: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "rounds": [h.id for h in ctx.hits],
        "sessions": list(dict.fromkeys(h.session_id for h in ctx.hits)),
        "tokens": ctx.token_count,
        "excerpted": list(ctx.excerpted),
    }
    if evidence_texts:
        row["evidence_shown"] = sum(t.strip() in ctx.text for t in evidence_texts) / len(evidence_texts)
    return row


def covers_all(inside: Collection[str], gold: Collection[str]) -> float:
    """1.0 when every gold item is inside (and there is at least one gold item), else 0.0."""
    return 1.0 if gold and set(gold) <= set(inside) else 0.0


class SeededEmbedder(Wrapper):
    """An embedder that first looks texts up, read-only, in another run's ``CachedEmbedder`` file.

    Two benchmark runs over the same data on one machine (e.g. before/after a change, in two checkouts) embed the
    same texts; with this, the second run reuses what the first already computed without ever writing to the
    first run's file. Keys follow ``CachedEmbedder``'s (``graphrecall.embed.cache.cache_key``); a key scheme change only
    costs misses, never wrong vectors, since a miss falls through to the model."""

    def __init__(self, inner: Embedder, seed: Path) -> None:
        if not seed.exists():
            raise FileNotFoundError(f"--embed-seed {seed} does not exist")
        super().__init__(inner)
        self._db = sqlite3.connect(f"file:{seed}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        self.seeded = 0

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        keys = [cache_key(self.inner.id, kind, t) for t in texts]
        found: dict[bytes, Vectors] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                try:
                    rows = self._db.execute(f"SELECT k, v FROM vec WHERE k IN ({marks})", chunk).fetchall()
                except sqlite3.Error:  # the other run's file is busy or not yet created: fall through
                    rows = []
                for k, blob in rows:
                    found[bytes(k)] = np.frombuffer(blob, dtype=np.float32).copy()
        todo = [i for i, k in enumerate(keys) if k not in found]
        self.seeded += len(texts) - len(todo)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if todo:
            out[todo] = self.inner.embed([texts[i] for i in todo], kind=kind)
        for i, k in enumerate(keys):
            if k in found:
                out[i] = found[k]
        return out


@contextlib.contextmanager
def temporary_store(
    prefix: str, embedder: Embedder, settings: Settings, llm: LLM | None = None
) -> Iterator[Memory]:
    """A ``Memory`` on a new temporary root, removed on exit: one per task of a batch run, so that nothing is left
    behind even where the worker process is killed rather than closed (Ray ends a job's workers that way). The
    embedder (the expensive part) is the caller's and outlives the store."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with Memory.open(
            root, embedder=embedder, settings=settings.model_copy(update={"root": root}), llm=llm
        ) as mem:
            yield mem
    finally:
        shutil.rmtree(root, ignore_errors=True)
