"""The embedding micro-batcher (``embed.batching``): concurrent callers share model calls, each gets its own rows
in its own order, a model error reaches every caller of the batch, queries and documents never share a call, and
a lone caller never waits for company. No timings are asserted: an inner embedder that blocks until told makes
the overlap certain."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from graphrecall.embed import BatchingEmbedder, CachedEmbedder, HashingEmbedder
from graphrecall.embed.base import TextKind, Vectors, Wrapper, layers
from graphrecall.embed.passages import passage_chars
from graphrecall.server.metrics import batching_lines

JOIN_S = 30  # only a hang would take this long


class Gate(Wrapper):
    """A recording inner embedder; while ``hold`` is set, each call blocks until ``release``."""

    def __init__(self, *, fail_on: str | None = None) -> None:
        super().__init__(HashingEmbedder(32))
        self.calls: list[tuple[TextKind, list[str]]] = []
        self.started = threading.Semaphore(0)
        self.hold = threading.Event()
        self.go = threading.Event()
        self.fail_on = fail_on
        self.max_tokens = 128
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        with self._lock:
            self.calls.append((kind, list(texts)))
        self.started.release()
        if self.hold.is_set():
            assert self.go.wait(JOIN_S)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"model failed on {self.fail_on}")
        return self.inner.embed(texts, kind=kind)


def run_in_threads(
    batcher: BatchingEmbedder, jobs: Sequence[tuple[list[str], TextKind]]
) -> tuple[list[threading.Thread], dict[int, Vectors | BaseException]]:
    results: dict[int, Vectors | BaseException] = {}

    def one(i: int, texts: list[str], kind: TextKind) -> None:
        try:
            results[i] = batcher.embed(texts, kind=kind)
        except BaseException as e:
            results[i] = e

    threads = [threading.Thread(target=one, args=(i, t, k)) for i, (t, k) in enumerate(jobs)]
    for t in threads:
        t.start()
    return threads, results


def wait_queued(batcher: BatchingEmbedder, kind: TextKind, n: int) -> None:
    """Until ``n`` calls of ``kind`` wait in the queue (each caller appends itself before it can block)."""
    pause = threading.Event()  # never set: a sleep
    for _ in range(JOIN_S * 100):
        with batcher._cond:
            if len(batcher._queues[kind]) >= n:
                return
        pause.wait(0.01)
    raise AssertionError(f"{n} {kind} calls never queued")


def busy_batcher(gate: Gate, **kw: object) -> tuple[BatchingEmbedder, threading.Thread]:
    """A batcher whose one model slot is taken by a held call of the text ``first``."""
    batcher = BatchingEmbedder(gate, max_in_flight=1, **kw)  # type: ignore[arg-type]
    gate.hold.set()
    first = threading.Thread(target=batcher.embed, args=(["first"],))
    first.start()
    assert gate.started.acquire(timeout=JOIN_S)
    return batcher, first


def test_callers_that_arrive_while_the_model_is_busy_share_one_call_and_get_their_own_rows_in_order() -> None:
    gate = Gate()
    batcher, first = busy_batcher(gate)
    jobs: list[tuple[list[str], TextKind]] = [
        (["a1", "a2"], "document"),
        (["b1"], "document"),
        (["c1", "c2", "c3"], "document"),
    ]
    threads, results = run_in_threads(batcher, jobs)
    wait_queued(batcher, "document", 3)
    gate.go.set()
    for t in [first, *threads]:
        t.join(JOIN_S)
    assert len(gate.calls) == 2  # the held call, then everything that queued behind it
    assert sorted(gate.calls[1][1]) == ["a1", "a2", "b1", "c1", "c2", "c3"]
    for i, (texts, kind) in enumerate(jobs):
        got = results[i]
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, gate.inner.embed(texts, kind=kind))
    assert (batcher.calls, batcher.texts) == (2, 7)


def test_a_model_error_reaches_every_caller_of_the_batch_and_the_next_batch_still_works() -> None:
    gate = Gate(fail_on="bad")
    batcher, first = busy_batcher(gate)
    jobs: list[tuple[list[str], TextKind]] = [
        (["x"], "document"),
        (["bad"], "document"),
        (["y", "z"], "document"),
    ]
    threads, results = run_in_threads(batcher, jobs)
    wait_queued(batcher, "document", 3)
    gate.go.set()
    for t in [first, *threads]:
        t.join(JOIN_S)
    assert len(gate.calls) == 2
    for i in range(3):
        err = results[i]
        assert isinstance(err, RuntimeError) and "model failed on bad" in str(err)
    gate.hold.clear()
    np.testing.assert_array_equal(batcher.embed(["x"]), gate.inner.embed(["x"]))
    with batcher._cond:
        assert batcher._in_flight == 0 and not any(batcher._queues.values())


def test_queries_and_documents_never_share_a_call() -> None:
    gate = Gate()
    batcher, first = busy_batcher(gate)
    jobs: list[tuple[list[str], TextKind]] = [(["q1"], "query"), (["d1"], "document"), (["q2"], "query")]
    threads, results = run_in_threads(batcher, jobs)
    wait_queued(batcher, "query", 2)
    wait_queued(batcher, "document", 1)
    gate.go.set()
    for t in [first, *threads]:
        t.join(JOIN_S)
    later = sorted((kind, sorted(texts)) for kind, texts in gate.calls[1:])
    assert later == [("document", ["d1"]), ("query", ["q1", "q2"])]
    for i, (texts, kind) in enumerate(jobs):
        np.testing.assert_array_equal(results[i], gate.inner.embed(texts, kind=kind))  # type: ignore[arg-type]


def test_a_batch_holds_at_most_max_texts_and_only_whole_calls_first_come_first_served() -> None:
    gate = Gate()
    batcher, first = busy_batcher(gate, max_texts=4)
    jobs: list[tuple[list[str], TextKind]] = [([f"t{i}a", f"t{i}b", f"t{i}c"], "document") for i in range(3)]
    threads: list[threading.Thread] = []
    for n, job in enumerate(jobs):  # one at a time, so the queue's order is known
        threads += run_in_threads(batcher, [job])[0]
        wait_queued(batcher, "document", n + 1)
    gate.go.set()
    for t in [first, *threads]:
        t.join(JOIN_S)
    assert [texts for _, texts in gate.calls[1:]] == [texts for texts, _ in jobs]  # 3 + 3 > 4: one call each


def test_a_lone_caller_does_not_wait_for_company_and_large_calls_bypass_the_queue() -> None:
    gate = Gate()
    batcher = BatchingEmbedder(gate, max_texts=4, window_s=0.5)
    done = threading.Thread(target=batcher.embed, args=(["alone"],))
    done.start()
    done.join(JOIN_S)  # a leader that waited for a full batch forever would hang here
    assert not done.is_alive()
    assert gate.calls == [("document", ["alone"])]
    big = [f"text {i}" for i in range(9)]
    np.testing.assert_array_equal(batcher.embed(big), gate.inner.embed(big))
    assert (batcher.calls, batcher.texts) == (1, 1)  # the big call went straight through
    assert batcher.embed([]).shape[0] == 0


def test_a_full_batch_does_not_wait_for_the_window() -> None:
    gate = Gate()
    batcher = BatchingEmbedder(gate, max_texts=2, window_s=3600.0)
    out = batcher.embed(["one", "two"])  # already max_texts: a window of an hour must not apply
    assert out.shape == (2, 32)


def test_the_model_is_seen_through_the_batcher() -> None:
    gate = Gate()
    batcher = BatchingEmbedder(gate)
    assert (batcher.id, batcher.dim, batcher.max_tokens, batcher.inner) == (gate.id, 32, 128, gate)
    assert passage_chars(batcher) == passage_chars(gate)
    with pytest.raises(ValueError):
        BatchingEmbedder(gate, max_texts=0)


def test_a_symmetric_model_takes_queries_and_documents_in_one_call() -> None:
    gate = Gate()
    batcher, first = busy_batcher(gate, symmetric=True)
    jobs: list[tuple[list[str], TextKind]] = [(["q1"], "query"), (["d1", "d2"], "document")]
    threads, results = run_in_threads(batcher, jobs)
    wait_queued(batcher, "document", 2)  # one queue for both kinds
    gate.go.set()
    for t in [first, *threads]:
        t.join(JOIN_S)
    assert [sorted(texts) for _, texts in gate.calls[1:]] == [["d1", "d2", "q1"]]
    for i, (texts, _) in enumerate(jobs):
        np.testing.assert_array_equal(results[i], gate.inner.embed(texts))  # type: ignore[arg-type]


def test_the_server_batches_the_default_model_under_its_cache_and_symmetric_and_can_be_told_not_to() -> None:
    from graphrecall.embed import CachedEmbedder, SentenceTransformerEmbedder, lazy
    from graphrecall.server.serve import server_embedder

    loads = lazy.load_count()
    on = server_embedder(None, in_flight=3)
    assert isinstance(on, CachedEmbedder) and isinstance(on.inner, BatchingEmbedder)
    assert on.inner.symmetric and on.inner.max_in_flight == 3
    assert isinstance(on.inner.inner, SentenceTransformerEmbedder) and on.inner.inner._onnx_threads == 1
    off = server_embedder(None, batching=False)
    assert isinstance(off, CachedEmbedder) and isinstance(off.inner, SentenceTransformerEmbedder)
    hashing = server_embedder("hashing:16")
    assert (
        isinstance(hashing, BatchingEmbedder) and not hashing.symmetric
    )  # the test embedder keeps the kinds
    assert lazy.load_count() == loads  # building them loads no model


def test_the_server_metrics_find_the_batcher_through_a_cache() -> None:
    batcher = BatchingEmbedder(HashingEmbedder(8))
    outer = CachedEmbedder(batcher)
    assert [type(x).__name__ for x in layers(outer)] == [
        "CachedEmbedder",
        "BatchingEmbedder",
        "HashingEmbedder",
    ]
    outer.embed(["one", "two"])
    text = batching_lines(outer)
    assert (
        "graphrecall_embed_batches_total 1\n" in text and "graphrecall_embed_batched_texts_total 2\n" in text
    )
    assert batching_lines(HashingEmbedder(8)) == ""  # no batcher: no lines
