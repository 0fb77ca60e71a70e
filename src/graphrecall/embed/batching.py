"""Concurrent small embed calls share one model call: a micro-batcher for servers.

Why: under load a server embeds one query per search and two texts per written turn, each from its own worker
thread. One ONNX Runtime call costs far less per text when it carries several (all-MiniLM-L6-v2 on 2 cores,
measured with ``embed.onnx``: ~6.3-7.3 ms of CPU per text alone, ~2.8-3.1 ms per text in a call of 8), so calls
that overlap in time are merged. A library user embedding from one thread gains nothing and does not pay either.

How: calls of at most ``max_texts`` texts queue per ``kind`` (queries and documents never share a call: an
asymmetric model embeds them differently), or in one queue when ``symmetric`` says the model ignores the kind. The first caller of a batch leads it: it waits until the batch holds
``max_texts`` texts, or ``window_s`` has passed, or (with ``window_s`` 0, the default) not at all; then, once fewer
than ``max_in_flight`` model calls are running, it embeds the whole batch in one call and hands every caller its
own rows. Callers that arrive while the model is busy wait for it anyway, so they join the next batch instead of
starting another call: batches grow with the load by themselves, and an idle embedder adds no delay. A model
error is raised in every caller of that batch. Larger calls (bulk ingest) go straight to the inner embedder,
which already batches them, and bypass the queue.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphrecall.embed.base import Embedder, TextKind, Vectors, Wrapper

# ``SentenceTransformerEmbedder`` runs calls of up to 8 texts on ONNX Runtime and larger ones on PyTorch (slower
# for small batches), so a merged call stays within that.
DEFAULT_MAX_TEXTS = 8


@dataclass(eq=False)
class _Call:
    """One caller's texts, and, once its batch ran, its rows or the batch's error."""

    texts: Sequence[str]
    kind: TextKind
    done: bool = False
    result: Vectors | None = None
    error: BaseException | None = None


class BatchingEmbedder(Wrapper):
    """An ``Embedder`` that merges concurrent small ``embed`` calls into one call of ``inner`` (see the module
    docstring). ``inner``, ``id``, ``dim`` and ``max_tokens`` are the inner embedder's, so wrappers above it
    (``CachedEmbedder``) and passage splitting see the model through it.

    ``symmetric``: the model embeds queries and documents alike (``SentenceTransformerEmbedder`` ignores the
    kind), so both may share a call.

    ``calls`` and ``texts`` count the inner calls and texts that went through the queue (not the bypass):
    ``texts / calls`` is the mean batch size."""

    def __init__(
        self,
        inner: Embedder,
        *,
        max_texts: int = DEFAULT_MAX_TEXTS,
        window_s: float = 0.0,
        max_in_flight: int = 1,
        symmetric: bool = False,
    ) -> None:
        if max_texts < 1 or max_in_flight < 1 or window_s < 0:
            raise ValueError("max_texts and max_in_flight must be >= 1 and window_s >= 0")
        super().__init__(inner)
        self.max_texts = max_texts
        self.window_s = window_s
        self.max_in_flight = max_in_flight
        self.symmetric = symmetric
        self._cond = threading.Condition()
        self._queues: dict[TextKind, list[_Call]] = {"document": [], "query": []}
        self._leading: dict[TextKind, bool] = {"document": False, "query": False}
        self._in_flight = 0
        self.calls = 0
        self.texts = 0

    @property
    def max_tokens(self) -> int | None:
        tokens = getattr(self.inner, "max_tokens", None)
        return tokens if isinstance(tokens, int) else None

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        if not texts or len(texts) > self.max_texts:
            return self.inner.embed(texts, kind=kind)
        call = _Call(list(texts), kind)
        if self.symmetric:
            kind = "document"  # one queue; the model is called with that kind, which it ignores
        with self._cond:
            queue = self._queues[kind]
            queue.append(call)
            self._cond.notify_all()  # a leader waiting for a fuller batch counts again
            while not call.done:
                if call in queue and not self._leading[kind]:
                    self._lead(kind)  # returns with the lock held; runs a batch that may or may not hold ours
                else:
                    self._cond.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def _lead(self, kind: TextKind) -> None:
        """With the lock held: gather a batch from the head of ``kind``'s queue, run it without the lock, hand
        out the rows (or the error), and return with the lock held again."""
        self._leading[kind] = True
        queue = self._queues[kind]
        try:
            deadline = time.monotonic() + self.window_s
            while True:
                full = _count(queue) >= self.max_texts
                left = deadline - time.monotonic()
                if self._in_flight < self.max_in_flight and (full or left <= 0):
                    break
                # Waiting here costs nothing extra: either the window is still open, or the model is busy and
                # this batch could not start anyway (notified when a call ends or a caller joins).
                self._cond.wait(left if left > 0 and not full else None)
            batch = _take(queue, self.max_texts)
            self._in_flight += 1
        finally:
            self._leading[kind] = False
            self._cond.notify_all()  # another caller may lead the next batch meanwhile
        self._cond.release()
        try:
            flat = [t for c in batch for t in c.texts]
            error: BaseException | None = None
            try:
                vecs = self.inner.embed(flat, kind=kind)
            except BaseException as e:  # every caller of the batch gets it (KeyboardInterrupt included)
                error = e
        finally:
            self._cond.acquire()
        self._in_flight -= 1
        self.calls += 1
        self.texts += sum(len(c.texts) for c in batch)
        start = 0
        for c in batch:
            if error is None:
                c.result = np.asarray(vecs[start : start + len(c.texts)])
                start += len(c.texts)
            else:
                c.error = error
            c.done = True
        self._cond.notify_all()


def _count(queue: list[_Call]) -> int:
    return sum(len(c.texts) for c in queue)


def _take(queue: list[_Call], max_texts: int) -> list[_Call]:
    """Whole calls from the head of ``queue`` (first come, first served) while they fit in ``max_texts``; at least
    one."""
    taken = 0
    n = 0
    while n < len(queue) and (n == 0 or taken + len(queue[n].texts) <= max_texts):
        taken += len(queue[n].texts)
        n += 1
    batch = queue[:n]
    del queue[:n]
    return batch
