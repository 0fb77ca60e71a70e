"""The ONNX Runtime path of the default embedder: the same vectors as PyTorch, exported once, checked on every load,
and a clean fallback to PyTorch whenever it cannot serve."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from graphrecall.embed import onnx
from graphrecall.embed.sentence import ONNX_MAX_TEXTS, SentenceTransformerEmbedder
from graphrecall.errors import InvalidInput, NotAvailable

TEXTS = [
    "I moved to Berlin last month.",
    "x",
    "Könntest du mir ein gutes Restaurant in Lissabon empfehlen? 🍝",
    "What did you suggest for my lower back after sitting at my desk all day? " * 40,  # past 256 tokens
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("onnx")
    SentenceTransformerEmbedder(onnx_cache=path).embed(["warm up: export once"])
    return path


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return SentenceTransformerEmbedder(backend="torch").embed(TEXTS)


def test_onnx_and_pytorch_give_the_same_vectors(cache: Path, torch_vectors: np.ndarray) -> None:
    emb = SentenceTransformerEmbedder(onnx_cache=cache)
    assert emb.backend == "onnx"
    assert emb._onnx is not None
    batch = emb._onnx.encode(TEXTS)  # one padded batch, the long text truncated
    singles = np.stack([emb.embed([t])[0] for t in TEXTS])
    assert np.abs(batch - torch_vectors).max() < 1e-5
    assert np.abs(singles - torch_vectors).max() < 1e-5
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_small_calls_run_on_onnx_and_large_batches_on_pytorch(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emb = SentenceTransformerEmbedder(onnx_cache=cache)
    assert emb._load() is not None and emb._onnx is not None
    calls: list[int] = []
    real = emb._onnx.encode
    monkeypatch.setattr(emb._onnx, "encode", lambda texts, bs=32: calls.append(len(texts)) or real(texts, bs))
    emb.embed(["a question"])
    many = emb.embed([f"message number {i}" for i in range(ONNX_MAX_TEXTS + 1)])
    assert calls == [1]
    assert many.shape == (ONNX_MAX_TEXTS + 1, emb.dim)


def test_a_second_embedder_reuses_the_exported_file(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_export(*_: object) -> None:
        raise AssertionError("exported again although a checked file was cached")

    monkeypatch.setattr(onnx, "_export", no_export)
    assert SentenceTransformerEmbedder(onnx_cache=cache).backend == "onnx"


def test_a_corrupt_cached_file_is_exported_again(
    cache: Path, tmp_path: Path, torch_vectors: np.ndarray, caplog: pytest.LogCaptureFixture
) -> None:
    copy = tmp_path / "onnx"
    shutil.copytree(cache, copy)
    (model_file,) = copy.glob("*.onnx")
    model_file.write_bytes(b"not an onnx model")
    with caplog.at_level(logging.WARNING, logger="graphrecall.embed.onnx"):
        emb = SentenceTransformerEmbedder(onnx_cache=copy)
        assert emb.backend == "onnx"
    assert "exporting it again" in caplog.text
    assert model_file.stat().st_size > 1_000_000
    assert np.abs(emb.embed(TEXTS[:2]) - torch_vectors[:2]).max() < 1e-5


def test_without_onnxruntime_auto_falls_back_to_pytorch_and_onnx_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with caplog.at_level(logging.INFO, logger="graphrecall.embed.sentence"):
        auto = SentenceTransformerEmbedder(onnx_cache=tmp_path)
        assert auto.backend == "torch"
    assert "onnxruntime is not installed" in caplog.text
    assert auto.embed(["still works"]).shape == (1, 384)
    with pytest.raises(NotAvailable, match="onnxruntime is not installed"):
        SentenceTransformerEmbedder(backend="onnx", onnx_cache=tmp_path).embed(["x"])
    assert not list(tmp_path.iterdir())


def test_the_torch_backend_never_exports(tmp_path: Path) -> None:
    emb = SentenceTransformerEmbedder(backend="torch", onnx_cache=tmp_path)
    emb.embed(["hello"])
    assert emb.backend == "torch"
    assert not list(tmp_path.iterdir())


def test_the_backend_comes_from_the_environment_and_a_bad_name_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GRAPHRECALL_EMBED_BACKEND", "torch")
    assert SentenceTransformerEmbedder()._backend == "torch"
    monkeypatch.setenv("GRAPHRECALL_EMBED_BACKEND", "tensorflow")
    with pytest.raises(InvalidInput, match="embedder backend: must be one of auto, onnx, torch"):
        SentenceTransformerEmbedder()
