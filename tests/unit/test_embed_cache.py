"""The content-hash embedding cache: identical text is embedded once, in memory and across processes (SQLite)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.embed import CachedEmbedder, Embedder, HashingEmbedder, TextKind, Vectors
from graphrecall.embed.base import Wrapper


class Counting(Wrapper):
    """Wraps an embedder and records every call that reaches it."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.calls: list[tuple[list[str], TextKind]] = []

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        self.calls.append((list(texts), kind))
        return self.inner.embed(texts, kind=kind)

    @property
    def texts_embedded(self) -> list[str]:
        return [t for texts, _ in self.calls for t in texts]


def test_identical_texts_are_embedded_once_and_rows_keep_input_order() -> None:
    inner = Counting(HashingEmbedder(32))
    cache = CachedEmbedder(inner)
    out = cache.embed(["dog", "cat", "dog"])
    assert sorted(inner.texts_embedded) == ["cat", "dog"]
    assert out.shape == (3, 32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, HashingEmbedder(32).embed(["dog", "cat", "dog"]))


def test_a_second_call_with_known_texts_does_not_reach_the_model() -> None:
    inner = Counting(HashingEmbedder(32))
    cache = CachedEmbedder(inner)
    first = cache.embed(["alpha", "beta"])
    second = cache.embed(["beta", "alpha"])
    assert len(inner.calls) == 1
    np.testing.assert_array_equal(second, first[::-1])
    assert (cache.hits, cache.misses) == (2, 2)


def test_only_the_unknown_texts_of_a_mixed_batch_are_embedded() -> None:
    inner = Counting(HashingEmbedder(32))
    cache = CachedEmbedder(inner)
    cache.embed(["alpha"])
    cache.embed(["alpha", "gamma"])
    assert inner.calls[-1] == (["gamma"], "document")


def test_query_and_document_vectors_are_cached_separately() -> None:
    inner = Counting(HashingEmbedder(32))
    cache = CachedEmbedder(inner)
    cache.embed(["where is my dog"], kind="document")
    cache.embed(["where is my dog"], kind="query")
    cache.embed(["where is my dog"], kind="query")
    assert [kind for _, kind in inner.calls] == ["document", "query"]


def test_vectors_persist_across_instances_through_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "vectors.sqlite"
    first = CachedEmbedder(Counting(HashingEmbedder(32)), path=path)
    expected = first.embed(["I adopted a puppy called Biscuit", "hello"])
    first.close()
    inner = Counting(HashingEmbedder(32))
    second = CachedEmbedder(inner, path=path)
    got = second.embed(["hello", "I adopted a puppy called Biscuit"])
    assert inner.calls == []
    np.testing.assert_array_equal(got, expected[::-1])
    second.close()


def test_another_embedder_never_reads_a_foreign_vector(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    CachedEmbedder(HashingEmbedder(32), path=path).embed(["hello"])
    inner = Counting(HashingEmbedder(64))
    out = CachedEmbedder(inner, path=path).embed(["hello"])
    assert inner.texts_embedded == ["hello"]
    assert out.shape == (1, 64)


def test_the_memory_cache_is_bounded_least_recently_used_first() -> None:
    inner = Counting(HashingEmbedder(32))
    cache = CachedEmbedder(inner, capacity=2)
    cache.embed(["a1"])
    cache.embed(["b1"])
    cache.embed(["a1"])  # touch: b1 is now the oldest
    cache.embed(["c1"])  # evicts b1
    cache.embed(["a1"])
    cache.embed(["b1"])
    assert inner.texts_embedded == ["a1", "b1", "c1", "b1"]


def test_an_empty_batch_gives_an_empty_matrix_without_a_model_call() -> None:
    inner = Counting(HashingEmbedder(32))
    out = CachedEmbedder(inner).embed([])
    assert out.shape == (0, 32)
    assert inner.calls == []


def test_the_cache_is_an_embedder_with_the_inner_identity() -> None:
    cache = CachedEmbedder(HashingEmbedder(48))
    assert isinstance(cache, Embedder)
    assert (cache.id, cache.dim) == ("hashing-48", 48)


@given(st.lists(st.sampled_from(["dog", "cat", "a b c", "ü", "", "dog "]), max_size=12), st.integers(0, 3))
def test_cached_results_equal_direct_results(texts: list[str], warm: int) -> None:
    direct = HashingEmbedder(32)
    cache = CachedEmbedder(HashingEmbedder(32), capacity=3)
    cache.embed(texts[:warm])
    np.testing.assert_array_equal(cache.embed(texts), direct.embed(texts))


def _fill(path: str, worker: int, batches: int) -> int:
    """One writer process: many small batches of new texts, each its own commit, into the shared file."""
    cache = CachedEmbedder(HashingEmbedder(16), path=path)
    for b in range(batches):
        cache.embed([f"worker {worker} batch {b} text {i}" for i in range(5)] + ["shared text"])
    cache.close()
    return cache.misses


def test_processes_writing_one_cache_file_at_once_lose_nothing(tmp_path: Path) -> None:
    """Ray tasks on one machine share the cache file: concurrent writers wait their turn (WAL, busy timeout)
    and every vector each of them computed is in the file afterwards."""
    import multiprocessing

    path = str(tmp_path / "shared.sqlite")
    workers, batches = 4, 30
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        misses = pool.starmap(_fill, [(path, w, batches) for w in range(workers)])
    assert all(m >= batches * 5 for m in misses)
    reader = Counting(HashingEmbedder(16))
    cache = CachedEmbedder(reader, path=path)
    texts = [
        f"worker {w} batch {b} text {i}" for w in range(workers) for b in range(batches) for i in range(5)
    ]
    cache.embed([*texts, "shared text"])
    assert reader.calls == []  # every text was found in the file
    cache.close()
