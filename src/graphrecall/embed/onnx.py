"""ONNX Runtime inference for sentence-transformers models: the same vectors, about three times faster per query.

Why: at search time the query embedding sits on the critical path, and for one ~15-token input PyTorch's
per-operator overhead dominates (all-MiniLM-L6-v2: 14-16 ms on 2 cores; ONNX Runtime: ~5 ms; docs/benchmarks.md).

How: the loaded sentence-transformers model is exported once (transformer, mean pooling and L2 normalization in one
graph) to a cache directory, under a key made of the model's files and the exporter's version. Every load checks
the ONNX vectors against PyTorch on probe sentences (a padded batch included), so a stale or corrupt file is never
used: it is exported again, and if that does not give the same vectors either, ``OnnxUnavailable`` says why and the
caller stays on PyTorch. Only pipelines of the form Transformer -> mean Pooling (-> Normalize) are exported;
``onnxruntime`` and ``onnx`` (the ``onnx`` extra) are imported lazily.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphrecall.embed.base import Vectors, normalize_rows

log = logging.getLogger(__name__)

EXPORT_VERSION = 1  # bump when the exported graph changes, so cached files are not reused
PROBES = (
    "I moved to Berlin last month and started a new job.",
    "ok",
    "What did you recommend for my back pain when I sat at my desk all day, and how often should I take a break?",
)
TOLERANCE = 1e-4  # largest absolute difference per vector component accepted between ONNX and PyTorch


class OnnxUnavailable(RuntimeError):
    """The ONNX path cannot serve this model here (a missing package, an unsupported pipeline, a failed check)."""


def default_cache_dir() -> Path:
    """``$GRAPHRECALL_CACHE_DIR/onnx``, else ``~/.cache/graphrecall/onnx``."""
    base = os.environ.get("GRAPHRECALL_CACHE_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "graphrecall") / "onnx"


class OnnxEncoder:
    """Tokenize (under a lock: Hugging Face tokenizers refuse concurrent calls) and run the exported graph."""

    def __init__(self, session: Any, tokenizer: Any, max_length: int, path: Path) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._max_length = max_length
        self._lock = threading.Lock()
        self.path = path

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> Vectors:
        # Longest first, as sentence-transformers does, so each batch pads to similar lengths.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches: list[np.ndarray] = []
        for start in range(0, len(order), batch_size):
            with self._lock:
                enc = self._tokenizer(
                    [texts[i] for i in order[start : start + batch_size]],
                    padding=True,
                    truncation=True,
                    max_length=self._max_length,
                    return_tensors="np",
                )
            feeds = {
                "input_ids": enc["input_ids"].astype(np.int64),
                "attention_mask": enc["attention_mask"].astype(np.int64),
            }
            batches.append(self._session.run(None, feeds)[0])
        vecs = np.concatenate(batches) if batches else np.zeros((0, 0), dtype=np.float32)
        out = np.empty_like(vecs)
        out[order] = vecs  # back to the callers' order
        return normalize_rows(out)


def check_pipeline(model: Any) -> None:
    """Raise ``OnnxUnavailable`` unless the model is Transformer -> mean Pooling, optionally -> Normalize."""
    names = [type(m).__name__ for m in model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise OnnxUnavailable(
            f"only Transformer -> Pooling (-> Normalize) pipelines are exported, not {names}"
        )
    pooling = model[1].get_config_dict()
    mode = pooling.get("pooling_mode")
    if mode is None:  # older sentence-transformers: one boolean per mode
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
        mode = "mean" if modes == ["pooling_mode_mean_tokens"] else ",".join(modes)
    if mode != "mean":
        raise OnnxUnavailable(f"only mean pooling is exported, not {mode!r}")


def load(
    model: Any, model_dir: Path, cache_dir: Path | None = None, *, threads: int | None = None
) -> OnnxEncoder:
    """An encoder for ``model`` (a loaded SentenceTransformer whose files are in ``model_dir``), exported if needed.
    ``threads``: ONNX Runtime's threads per call (default: its own choice, one per core)."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise OnnxUnavailable(f"onnxruntime is not installed ({e}); pip install 'graphrecall[onnx]'") from e
    check_pipeline(model)
    cache = cache_dir or default_cache_dir()
    path = cache / f"{model_dir.name}-{_cache_key(model_dir)}.onnx"
    problem = ""
    for attempt in ("cached", "fresh"):
        if attempt == "fresh" or not path.exists():
            _export(model, path)
        try:
            session = ort.InferenceSession(
                str(path), _options(ort, threads), providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # a truncated or foreign file
            problem = f"cannot load {path}: {type(e).__name__}: {e}"
        else:
            encoder = OnnxEncoder(session, model.tokenizer, int(model.max_seq_length or 512), path)
            diff = _max_difference(model, encoder)
            if diff <= TOLERANCE:
                return encoder
            problem = f"{path} differs from PyTorch by {diff:.2g} (> {TOLERANCE})"
        if attempt == "cached":
            log.warning("%s; exporting it again", problem)
    raise OnnxUnavailable(problem)


def _cache_key(model_dir: Path) -> str:
    import torch

    h = hashlib.sha256(f"v{EXPORT_VERSION} torch {torch.__version__}".encode())
    for f in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"{f.relative_to(model_dir)} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _export(model: Any, path: Path) -> None:
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
        import torch
    except ImportError as e:
        raise OnnxUnavailable(
            f"exporting needs the onnx package ({e}); pip install 'graphrecall[onnx]'"
        ) from e

    class Pooled(torch.nn.Module):
        def __init__(self, transformer: Any) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=1)

    path.parent.mkdir(parents=True, exist_ok=True)
    wrapper = Pooled(model[0].auto_model).eval()
    sample = model.tokenizer(["an example sentence"], return_tensors="pt")
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's warnings are about shapes we make dynamic below
            torch.onnx.export(
                wrapper,
                (sample["input_ids"], sample["attention_mask"]),
                tmp,
                input_names=["input_ids", "attention_mask"],
                output_names=["sentence_embedding"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(tmp, path)  # atomic: a concurrent loader sees the old file or the whole new one
        log.info("exported %s for ONNX Runtime", path)
    except Exception as e:
        Path(tmp).unlink(missing_ok=True)
        raise OnnxUnavailable(f"ONNX export failed: {type(e).__name__}: {e}") from e


def _options(ort: Any, threads: int | None = None) -> Any:
    opts = ort.SessionOptions()
    if threads:
        # One thread per call where the caller runs several calls side by side (a server's micro-batcher, one
        # call per core): a call split over cores that are all busy waits at each operator for its slowest part.
        opts.intra_op_num_threads = threads
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    # No busy-waiting after a run: a search embeds its query while Kuzu answers BM25 on the other core, and
    # spinning workers took that core (1k rounds: BM25 3 -> 12 ms, search p50 25 -> 26 ms with spinning on).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


def _max_difference(model: Any, encoder: OnnxEncoder) -> float:
    ref = normalize_rows(
        model.encode(list(PROBES), convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
    )
    got = np.concatenate([encoder.encode(list(PROBES)), encoder.encode(PROBES[:1])])
    ref = np.concatenate([ref, ref[:1]])
    return float(np.abs(got - ref).max())
