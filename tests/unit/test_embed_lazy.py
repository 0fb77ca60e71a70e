"""The default embedder knows its id and size without loading weights, and loads them once, on the first embed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from graphrecall.embed import bundled_model_path
from graphrecall.embed.lazy import LoadOnce, load_count, on_load
from graphrecall.embed.modelinfo import KNOWN, ModelInfo, read_model_info
from graphrecall.embed.sentence import LOAD_WHAT, SentenceTransformerEmbedder


def test_the_bundled_model_states_its_size_and_window_in_its_config_files() -> None:
    assert read_model_info(bundled_model_path()) == ModelInfo(dim=384, max_tokens=256)


def test_building_the_default_embedder_and_asking_its_id_and_size_loads_nothing() -> None:
    before = load_count(LOAD_WHAT)
    emb = SentenceTransformerEmbedder()
    assert (emb.id, emb.dim, emb.max_tokens) == ("sentence-transformers/all-MiniLM-L6-v2", 384, 256)
    assert load_count(LOAD_WHAT) == before


def _model_dir(
    tmp_path: Path, modules: list[dict[str, object]], configs: dict[str, dict[str, object]]
) -> Path:
    root = tmp_path / "model"
    root.mkdir()
    (root / "modules.json").write_text(json.dumps(modules))
    for sub, config in configs.items():
        (root / sub).mkdir()
        (root / sub / "config.json").write_text(json.dumps(config))
    return root


def test_a_dense_layer_after_pooling_sets_the_size(tmp_path: Path) -> None:
    modules = [
        {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]
    pooling = {"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True}
    path = _model_dir(tmp_path, modules, {"1_Pooling": pooling, "2_Dense": {"out_features": 256}})
    assert read_model_info(path) == ModelInfo(dim=256, max_tokens=None)


def test_two_pooling_modes_concatenate(tmp_path: Path) -> None:
    modules = [{"idx": 0, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    pooling = {
        "word_embedding_dimension": 384,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": True,
    }
    assert read_model_info(_model_dir(tmp_path, modules, {"1_Pooling": pooling})) == ModelInfo(dim=768)


def test_a_module_of_unknown_effect_means_the_model_must_be_loaded_to_know(tmp_path: Path) -> None:
    modules = [
        {"idx": 0, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 1, "path": "2_Custom", "type": "my_package.Projection"},
    ]
    path = _model_dir(tmp_path, modules, {"1_Pooling": {"word_embedding_dimension": 384}})
    assert read_model_info(path) is None
    assert read_model_info(tmp_path / "nothing-here") is None
    assert read_model_info("sentence-transformers/all-MiniLM-L6-v2") == KNOWN["all-MiniLM-L6-v2"]


def test_load_once_loads_once_under_concurrent_first_calls_and_tells_listeners_once() -> None:
    calls: list[int] = []
    heard: list[str] = []

    def slow_load() -> object:
        time.sleep(0.05)
        calls.append(1)
        return object()

    loader: LoadOnce[object] = LoadOnce(slow_load, what="test thing")
    remove = on_load(heard.append)
    try:
        results: list[object] = []
        threads = [threading.Thread(target=lambda: results.append(loader.get())) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        remove()
    assert len(calls) == 1 and heard == ["test thing"] and load_count("test thing") == 1
    assert len({id(r) for r in results}) == 1 and loader.loaded
    loader.get()
    assert heard == ["test thing"]


def test_a_failed_load_is_retried_on_the_next_call() -> None:
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("not yet")
        return "ok"

    loader: LoadOnce[str] = LoadOnce(flaky, what="flaky thing")
    with pytest.raises(RuntimeError):
        loader.get()
    assert not loader.loaded
    assert loader.get() == "ok" and len(attempts) == 2
