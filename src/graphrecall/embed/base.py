"""The embedder seam: anything that turns texts into unit-length float32 vectors of a fixed dimension."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
TextKind = Literal["document", "query"]


@runtime_checkable
class Embedder(Protocol):
    """``id`` names the model (stored in each database's Meta node); ``dim`` is the vector length.

    ``embed`` returns an array of shape ``(len(texts), dim)``, rows L2-normalized so that a dot product is the
    cosine similarity. ``kind`` lets asymmetric models treat queries and documents differently; symmetric models
    ignore it.
    """

    @property
    def id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors: ...


class Wrapper:
    """Base of an embedder around another one (``inner``): a cache, a batcher, a recorder. It answers for the model
    it wraps, so its ``id`` and ``dim`` are the inner one's, and ``layers`` walks through it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dim(self) -> int:
        return self.inner.dim


def layers(embedder: object, depth: int = 8) -> Iterator[object]:
    """``embedder`` and the embedders it wraps (``.inner``: ``CachedEmbedder``, ``BatchingEmbedder``), outermost
    first, at most ``depth`` of them: how a caller finds what one layer knows (the model's window, the batcher's
    counters) whatever wraps it."""
    layer: object | None = embedder
    for _ in range(depth):  # wrappers around wrappers, but never a cycle
        if layer is None:
            return
        yield layer
        layer = getattr(layer, "inner", None)


def normalize_rows(x: npt.NDArray[np.floating]) -> Vectors:
    """L2-normalize rows; zero rows stay zero instead of becoming NaN."""
    arr = np.asarray(x, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (arr / norms).astype(np.float32, copy=False)
    return out
