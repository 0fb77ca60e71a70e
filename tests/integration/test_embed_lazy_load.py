"""The default embedder's size, read from config files before loading, is checked against the loaded model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrecall.embed import bundled_model_path
from graphrecall.embed.sentence import SentenceTransformerEmbedder
from graphrecall.errors import EmbedderMismatch


@pytest.mark.slow
def test_config_files_that_disagree_with_the_loaded_model_are_refused(tmp_path: Path) -> None:
    """The size read from the config files is checked when the model loads (here: a copy whose pooling config
    claims 512 while the weights give 384)."""
    src = bundled_model_path()
    copy = tmp_path / "model"
    copy.mkdir()
    for item in src.iterdir():
        if item.name != "1_Pooling":
            (copy / item.name).symlink_to(item)
    (copy / "1_Pooling").mkdir()
    pooling = json.loads((src / "1_Pooling" / "config.json").read_text())
    (copy / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "word_embedding_dimension": 512}))
    emb = SentenceTransformerEmbedder(copy, backend="torch")
    assert emb.dim == 512
    with pytest.raises(EmbedderMismatch, match="512"):
        emb.embed(["hello"])
