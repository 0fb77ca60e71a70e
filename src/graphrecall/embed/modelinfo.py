"""What a sentence-transformers model is, read from its small config files instead of its weights.

Opening a store needs the embedder's ``id`` and ``dim`` (they are checked against each database's Meta node), but
loading the weights costs seconds and hundreds of MB and pulls in PyTorch. A model directory already states its
output size (``1_Pooling/config.json``, or a ``Dense`` layer's ``out_features``) and its window
(``sentence_bert_config.json``), so commands that never embed can open a store without the model. The figures
read here are checked against the loaded model when it does load (``SentenceTransformerEmbedder``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ModelInfo:
    """``dim``: length of the sentence vector; ``max_tokens``: the window (longer inputs are cut), if known."""

    dim: int
    max_tokens: int | None = None


# Hub names with no local directory to read (a model given by name is downloaded, so nothing is on disk yet).
KNOWN: dict[str, ModelInfo] = {"all-MiniLM-L6-v2": ModelInfo(dim=384, max_tokens=256)}

_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_mean_tokens",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_model_info(model: str | Path) -> ModelInfo | None:
    """The model's output size and window from its directory (or ``KNOWN`` for a bare hub name); ``None`` when
    neither says, in which case the caller must load the model to find out."""
    path = Path(str(model))
    if not path.is_dir():
        return KNOWN.get(path.name)
    modules = _json(path / "modules.json")
    if not isinstance(modules, list):
        return None
    dim: int | None = None
    for module in sorted(modules, key=lambda m: int(m.get("idx", 0)) if isinstance(m, dict) else 0):
        if not isinstance(module, dict):
            return None
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        config = _json(path / str(module.get("path", "")) / "config.json")
        if kind == "Pooling" and isinstance(config, dict):
            width = config.get("word_embedding_dimension")
            modes = sum(1 for m in _POOLING_MODES if config.get(m)) or 1
            dim = int(width) * modes if isinstance(width, int) else None
        elif kind == "Dense" and isinstance(config, dict):
            out = config.get("out_features")
            dim = int(out) if isinstance(out, int) else None
        elif kind not in ("Transformer", "Normalize"):
            return None  # a module whose effect on the size we do not know: load the model instead
    if dim is None:
        return None
    bert = _json(path / "sentence_bert_config.json")
    window = bert.get("max_seq_length") if isinstance(bert, dict) else None
    return ModelInfo(dim=dim, max_tokens=int(window) if isinstance(window, int) else None)
