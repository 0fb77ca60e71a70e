"""Similarity thresholds per model: a ``ModelProfile`` maps a cosine on the reference scale (the bundled MiniLM's)
onto the active embedder's own scale.

Why: every similarity threshold of the configuration (``THRESHOLDS`` names them) was read off all-MiniLM-L6-v2,
where unrelated sentences score about 0.1 and rewordings 0.85-0.99. multilingual-e5-small puts unrelated sentences
at 0.75-0.85 and rewordings at 0.95-1.0: under its vectors MiniLM's 0.6 ("worth versioning against") holds for
nearly every pair, and 0.95 ("the same fact") for fewer rewordings than under MiniLM. A threshold only means
something relative to the model.

How: a fixed reference set of text pairs (``reference_pairs.json``, shipped: unrelated statements, paraphrases,
near-identical rewrites, same topic with another fact, updates of one attribute, the same and different entity
names; mostly English, some German, French, Spanish and Russian) is scored by a model; its profile is the
distribution of those cosines, kept as 21 quantiles (every 5%). A threshold ``t`` written on the reference scale
becomes the value that the same share of reference pairs reaches under the active model (quantile matching:
``translate``), interpolated linearly between quantiles, with -1 and 1 fixed. The same share of the reference set
is above the threshold under either model, so the labelled pairs at the top (near-identical rewrites, paraphrases)
anchor high thresholds such as 0.95, not the spread of unrelated pairs alone. MiniLM's profile is the identity.

Where profiles come from:
- shipped (``profiles.json``) for ``minilm`` and ``e5-small``: nothing is computed at run time;
- the ``hashing`` test embedder: the identity (it has no semantics to calibrate);
- any other model: computed at first use (one embedding call over ~290 texts) and cached on disk under
  ``$GRAPHRECALL_CACHE_DIR/profiles`` (else ``~/.cache/graphrecall/profiles``), keyed by model id and the digest
  of the reference set. A model whose reference scores do not rank the pairs like MiniLM's (Spearman below
  ``MIN_RANK_AGREEMENT``: a broken or a fake model) gets the identity, with a warning, rather than thresholds
  that would merge everything.

Configuration values stay on the reference scale, including values a caller sets: the code translates them at the
point of use (``translate``). A threshold measured on the model's own cosines converts back with ``to_reference``.
``python -m benchmarks.thresholds`` prints the profiles and the decisions' agreement between models, and rewrites
``profiles.json`` after the reference set changes (``--write-profiles``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from graphrecall.embed.base import Embedder

log = logging.getLogger(__name__)

REFERENCE_ID = "sentence-transformers/all-MiniLM-L6-v2"
"""The model whose cosines the configuration's thresholds are written in."""
QUANTILES = 21
"""Quantiles kept per profile (0%, 5%, ..., 100%): each step holds ~13 reference pairs."""
MIN_RANK_AGREEMENT = 0.6
"""Spearman correlation between a model's and MiniLM's reference scores below which its profile is not trusted
(e5-small: 0.93)."""
BATCH = 64

THRESHOLDS: dict[str, tuple[str, ...]] = {
    "ExtractionConfig": (
        "entity_auto",
        "entity_ambiguous",
        "version_min_similarity",
        "version_min_similarity_shared",
        "known_fact_min_similarity",
    ),
    "ConsolidationConfig": ("min_similarity", "near_exact_similarity"),
    "RetrievalConfig": ("restatement_similarity",),
}
"""Every cosine threshold of the configuration, by config class: all on the reference scale, translated where they
are used (extract.extractor, extract.known, extract.consolidate, retrieve.post). ``passage_penalty`` and
``reply_penalty`` are not thresholds but differences in a max over cosines; they are not translated (docs/embedders.md,
"Thresholds per model")."""


@dataclass(frozen=True)
class ReferencePair:
    kind: str
    lang: str
    a: str
    b: str


@cache
def reference_pairs() -> tuple[ReferencePair, ...]:
    """The shipped reference set, in file order."""
    raw = json.loads(_read("reference_pairs.json"))
    return tuple(ReferencePair(p["kind"], p["lang"], p["a"], p["b"]) for p in raw)


@cache
def reference_digest() -> str:
    """What a stored profile was measured on: the reference set's content, hashed."""
    return hashlib.sha256(_read("reference_pairs.json").encode()).hexdigest()[:16]


def _read(name: str) -> str:
    return resources.files("graphrecall.embed").joinpath(name).read_text(encoding="utf-8")


def quantiles(scores: Sequence[float]) -> list[float]:
    """The ``QUANTILES`` quantiles of ``scores`` (rounded to 4 decimals, as stored)."""
    qs = np.quantile(np.asarray(scores, dtype=np.float64), np.linspace(0.0, 1.0, QUANTILES))
    return [round(float(x), 4) for x in qs]


def _curve(xs: Sequence[float], ys: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Matching quantiles as a piecewise-linear curve with the ends of the cosine range fixed (-1 and 1 map onto
    themselves; a quantile at an end gives way to it), strictly increasing in x as ``np.interp`` needs (a run of
    equal quantiles keeps its first point)."""
    x, y = np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    inner = (x > -1.0) & (x < 1.0) & (y > -1.0) & (y < 1.0)
    x = np.concatenate(([-1.0], x[inner], [1.0]))
    y = np.concatenate(([-1.0], y[inner], [1.0]))
    keep = np.concatenate(([True], np.diff(x) > 0))
    return x[keep], y[keep]


@dataclass(frozen=True)
class ModelProfile:
    """One model's cosine distribution over the reference set (``model``) beside MiniLM's (``reference``), both as
    ``QUANTILES`` quantiles; ``source`` says where it came from (identity, shipped, computed, cached, untrusted)."""

    embedder_id: str
    reference: tuple[float, ...] = ()
    model: tuple[float, ...] = ()
    source: str = "identity"
    rank_agreement: float | None = None

    @property
    def is_identity(self) -> bool:
        return not self.model

    def translate(self, threshold: float) -> float:
        """``threshold`` (a cosine on the reference scale) on this model's scale: the cosine above which the same
        share of reference pairs lies."""
        if self.is_identity:
            return threshold
        x, y = _curve(self.reference, self.model)
        return float(np.interp(threshold, x, y))

    def to_reference(self, cosine: float) -> float:
        """The inverse: a cosine of this model written on the reference scale (for a threshold measured on this
        model's own cosines, to put into the configuration)."""
        if self.is_identity:
            return cosine
        x, y = _curve(self.model, self.reference)
        return float(np.interp(cosine, x, y))

    def as_json(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder_id,
            "reference_set": reference_digest(),
            "quantiles": list(self.model),
            "rank_agreement": self.rank_agreement,
        }


# -- where profiles come from ---------------------------------------------------------------------------------------
@cache
def shipped() -> dict[str, Any]:
    """``profiles.json``: MiniLM's score per reference pair and the quantiles of the bundled models."""
    data: dict[str, Any] = json.loads(_read("profiles.json"))
    return data


def reference_scores() -> list[float]:
    """MiniLM's cosine for each reference pair, in file order (shipped)."""
    data = shipped()
    if data.get("reference_set") != reference_digest():
        raise RuntimeError(
            "embed/profiles.json was measured on another reference set: run python -m benchmarks.thresholds "
            "--write-profiles"
        )
    return [float(x) for x in data["reference_scores"]]


def profile_from(embedder_id: str, scores: Sequence[float], source: str) -> ModelProfile:
    """A model's profile from its cosine on each reference pair (file order); untrusted (the identity, with the
    reason logged) when its scores rank the pairs unlike MiniLM's."""
    ref = reference_scores()
    if len(scores) != len(ref):
        raise ValueError(f"{len(scores)} scores for {len(ref)} reference pairs")
    agreement = spearman(scores, ref)
    if not agreement >= MIN_RANK_AGREEMENT:  # NaN (constant scores) too
        log.warning(
            "embedder %s ranks the reference pairs unlike %s (Spearman %.2f < %.2f): its similarity thresholds "
            "are left on the reference scale",
            embedder_id,
            REFERENCE_ID,
            agreement,
            MIN_RANK_AGREEMENT,
        )
        return ModelProfile(embedder_id, source="untrusted", rank_agreement=round(agreement, 4))
    return ModelProfile(
        embedder_id,
        tuple(quantiles(ref)),
        tuple(quantiles(scores)),
        source,
        round(agreement, 4),
    )


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(x: Sequence[float]) -> np.ndarray:
        arr = np.asarray(x, dtype=np.float64)
        order = np.argsort(arr, kind="stable")
        r = np.empty(len(arr))
        r[order] = np.arange(len(arr), dtype=np.float64)
        for value in np.unique(arr):  # ties share their mean rank
            tied = arr == value
            if tied.sum() > 1:
                r[tied] = r[tied].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def pair_scores(embedder: Embedder, pairs: Sequence[ReferencePair] | None = None) -> list[float]:
    """The embedder's cosine for each pair (stored-text side: ``kind="document"``), in order."""
    pairs = reference_pairs() if pairs is None else pairs
    texts = list(dict.fromkeys(t for p in pairs for t in (p.a, p.b)))
    vecs = np.concatenate([embedder.embed(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)])
    row = {t: i for i, t in enumerate(texts)}
    return [round(float(vecs[row[p.a]] @ vecs[row[p.b]]), 4) for p in pairs]


def cache_dir() -> Path:
    """``$GRAPHRECALL_CACHE_DIR/profiles``, else ``~/.cache/graphrecall/profiles``."""
    base = os.environ.get("GRAPHRECALL_CACHE_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "graphrecall") / "profiles"


def _cache_file(embedder_id: str) -> Path:
    key = hashlib.sha256(f"{embedder_id}\x00{reference_digest()}".encode()).hexdigest()[:24]
    return cache_dir() / f"{key}.json"


def _cached(embedder_id: str) -> ModelProfile | None:
    path = _cache_file(embedder_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("embedder") != embedder_id or data.get("reference_set") != reference_digest():
        return None
    if not data.get("quantiles"):
        return ModelProfile(embedder_id, source="untrusted", rank_agreement=data.get("rank_agreement"))
    return ModelProfile(
        embedder_id,
        tuple(quantiles(reference_scores())),
        tuple(float(x) for x in data["quantiles"]),
        "cached",
        data.get("rank_agreement"),
    )


def _store(profile: ModelProfile) -> None:
    path = _cache_file(profile.embedder_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(profile.as_json()) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a read-only home: computed again next process, nothing worse
        log.warning("could not cache the similarity profile of %s at %s: %s", profile.embedder_id, path, e)


def is_identity_model(embedder_id: str) -> bool:
    """The reference model itself, and the model-free ``hashing`` test embedder."""
    return embedder_id == REFERENCE_ID or embedder_id.startswith("hashing-")


_profiles: dict[str, ModelProfile] = {}
_lock = threading.Lock()


def profile_of(embedder: Embedder) -> ModelProfile:
    """The profile of ``embedder``'s model: the identity, shipped, cached on disk, or computed now (and cached);
    once per model id and process."""
    eid = embedder.id
    found = _profiles.get(eid)
    if found is not None:
        return found
    with _lock:  # one computation per model, however many threads ask at once
        found = _profiles.get(eid)
        if found is None:
            found = _load(embedder, eid)
            _profiles[eid] = found
    return found


def known_profile(eid: str) -> ModelProfile | None:
    """The profile of the model with id ``eid`` when it is known without the model (the identity, shipped, or
    cached on disk), else ``None``: for a caller that knows only a server's embedder id (the hooks' relevance
    threshold, ``hooks.relevance``)."""
    if is_identity_model(eid):
        return ModelProfile(eid)
    entry = shipped().get("profiles", {}).get(eid)
    if entry is not None and shipped().get("reference_set") == reference_digest():
        return ModelProfile(
            eid,
            tuple(quantiles(reference_scores())),
            tuple(float(x) for x in entry["quantiles"]),
            "shipped",
            entry.get("rank_agreement"),
        )
    return _cached(eid)


def _load(embedder: Embedder, eid: str) -> ModelProfile:
    known = known_profile(eid)
    if known is not None:
        return known
    log.info("measuring the similarity profile of %s over %d reference pairs", eid, len(reference_pairs()))
    profile = profile_from(eid, pair_scores(embedder), "computed")
    _store(profile)
    return profile


def forget_profiles() -> None:
    """Drop the profiles held in this process (tests; a model file replaced under the same id)."""
    with _lock:
        _profiles.clear()
