"""Similarity thresholds per model (``embed.profile``): the mapping's shape, where profiles come from (identity,
shipped, computed and cached, untrusted), and that every cosine threshold of the configuration is translated."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from graphrecall.config import ConsolidationConfig, RetrievalConfig
from graphrecall.embed import HashingEmbedder
from graphrecall.embed import profile as mp
from graphrecall.embed.base import TextKind, Vectors
from graphrecall.embed.e5 import E5_ID
from graphrecall.extract.extractor import ExtractionConfig


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GRAPHRECALL_CACHE_DIR", str(tmp_path / "cache"))
    mp.forget_profiles()
    yield
    mp.forget_profiles()


class Renamed:
    """A model-free embedder under another model's name, counting the texts it embeds."""

    def __init__(self, inner: object, id: str) -> None:
        self.inner, self._id, self.texts = inner, id, 0

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return int(self.inner.dim)  # type: ignore[attr-defined]

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        self.texts += len(texts)
        out: Vectors = self.inner.embed(texts, kind=kind)  # type: ignore[attr-defined]
        return out


class Noise:
    """Vectors that say nothing about the texts: a broken model."""

    id, dim = "noise", 16

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        v = np.random.default_rng(0).normal(size=(len(texts), 16))
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_the_reference_model_and_the_hashing_embedder_keep_every_threshold() -> None:
    for e in (HashingEmbedder(64), Renamed(HashingEmbedder(64), mp.REFERENCE_ID)):
        p = mp.profile_of(e)
        assert p.is_identity and p.source == "identity"
        assert [p.translate(t) for t in (-1.0, 0.35, 0.6, 0.95, 1.0)] == [-1.0, 0.35, 0.6, 0.95, 1.0]
    assert isinstance(mp.profile_of(HashingEmbedder(64)), mp.ModelProfile)


def test_e5_small_is_shipped_and_its_scale_is_monotone_with_fixed_ends() -> None:
    e5 = Renamed(HashingEmbedder(64), E5_ID)
    p = mp.profile_of(e5)
    assert p.source == "shipped" and e5.texts == 0  # nothing embedded at run time
    assert p.rank_agreement is not None and p.rank_agreement > 0.9
    grid = np.linspace(-1.0, 1.0, 201)
    mapped = [p.translate(float(t)) for t in grid]
    assert all(b >= a for a, b in itertools.pairwise(mapped))
    assert mapped[0] == -1.0 and mapped[-1] == 1.0
    # e5 puts unrelated statements at 0.75-0.85: MiniLM's thresholds land above that, in order
    assert (
        0.8
        < p.translate(0.35)
        < p.translate(0.5)
        < p.translate(0.6)
        < p.translate(0.85)
        < p.translate(0.95)
        < 1
    )
    for t in (0.35, 0.6, 0.92, 0.95):
        assert p.to_reference(p.translate(t)) == pytest.approx(t, abs=1e-6)


def test_the_shipped_profiles_were_measured_on_the_shipped_reference_set() -> None:
    data = mp.shipped()
    assert data["reference_set"] == mp.reference_digest()
    assert len(data["reference_scores"]) == len(mp.reference_pairs()) >= 250
    kinds = {p.kind for p in mp.reference_pairs()}
    assert {"unrelated", "paraphrase", "near_identical", "same_topic", "update", "same_entity"} <= kinds
    assert {p.lang for p in mp.reference_pairs()} >= {"en", "de", "fr", "es", "ru"}


def test_another_model_is_measured_once_and_then_read_from_the_cache(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = Renamed(HashingEmbedder(256), "sentence-transformers/some-other-model")
    p = mp.profile_of(first)
    assert p.source == "computed" and not p.is_identity and first.texts > 250
    assert mp.profile_of(first) is p  # once per process
    mp.forget_profiles()
    again = Renamed(HashingEmbedder(256), "sentence-transformers/some-other-model")
    q = mp.profile_of(again)
    assert q.source == "cached" and again.texts == 0
    assert q.translate(0.6) == pytest.approx(p.translate(0.6))
    [cached] = list(mp.cache_dir().glob("*.json"))
    assert json.loads(cached.read_text())["embedder"] == "sentence-transformers/some-other-model"


def test_a_model_that_ranks_the_reference_pairs_at_random_keeps_the_reference_thresholds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = mp.profile_of(Noise())
    assert p.source == "untrusted" and p.is_identity and p.translate(0.6) == 0.6
    assert "ranks the reference pairs unlike" in caplog.text
    mp.forget_profiles()
    assert mp.profile_of(Noise()).source == "untrusted"  # cached as such: not measured again


def test_every_cosine_threshold_of_the_configuration_is_listed() -> None:
    """A new threshold must be translated where it is used and listed in ``profile.THRESHOLDS``."""
    configs = {c.__name__: c for c in (ExtractionConfig, ConsolidationConfig, RetrievalConfig)}
    for name, cls in configs.items():
        looks_like_one = {
            f
            for f, info in cls.model_fields.items()
            if info.annotation in (float, "float") and ("similarity" in f or f.startswith("entity_"))
        }
        assert looks_like_one == set(mp.THRESHOLDS[name]), name


def test_spearman() -> None:
    assert mp.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert mp.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert mp.spearman([1, 1, 2, 2], [1, 1, 2, 2]) == pytest.approx(1.0)
    assert np.isnan(mp.spearman([1, 1, 1], [1, 2, 3]))
