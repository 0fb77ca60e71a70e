"""``retrieve.updates.above_background``: two rounds restate each other only if their cosine stands out from what
any two rounds of the same search score. A multilingual model puts every pair of one person's turns close together
(e5-small: 0.82-0.90), so a fixed cosine cannot tell a restatement from a neighbour; the scope's own spread can."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from graphrecall.config import RetrievalConfig
from graphrecall.retrieve.updates import above_background

DEFAULT = RetrievalConfig().restatement_contrast  # the library's default, whatever it is set to


def crowd(n: int, spread: float, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` unit vectors around one direction: the larger ``spread``, the lower their cosines."""
    rng = np.random.default_rng(seed)
    base = np.ones(16, dtype=np.float32)
    out = {}
    for i in range(n):
        v = base + spread * rng.standard_normal(16).astype(np.float32)
        out[f"r{i}"] = v / np.linalg.norm(v)
    return out


def pairwise(vectors: dict[str, np.ndarray]) -> np.ndarray:
    m = np.vstack(list(vectors.values()))
    sims = m @ m.T
    return sims[np.triu_indices(len(m), k=1)]


def test_the_bar_sits_above_the_typical_pair_of_a_crowded_scope() -> None:
    rounds = crowd(12, spread=0.4)  # every pair close, as under e5-small
    sims = pairwise(rounds)
    bar = above_background(rounds, DEFAULT)
    assert sims.mean() > 0.8  # a fixed bar such as e5's translated 0.867 would pass many of these pairs
    assert bar > sims.mean() and (sims >= bar).mean() < 0.2  # few ordinary pairs reach it
    # a true restatement (nearly the same vector as one round) clears it
    restated = rounds["r0"] + 0.05 * np.ones(16, dtype=np.float32)
    assert float(rounds["r0"] @ (restated / np.linalg.norm(restated))) >= bar


def test_the_bar_does_not_depend_on_the_scale_of_the_cosines() -> None:
    """The same scope under a model that spreads its cosines wider (MiniLM) gets a lower bar, on that model's
    scale: it is a number of standard deviations, not a cosine."""
    tight, loose = crowd(12, spread=0.4), crowd(12, spread=1.5)
    assert above_background(loose, DEFAULT) < above_background(tight, DEFAULT)


def test_too_few_rounds_give_no_bar() -> None:
    assert above_background(crowd(2, 0.4), DEFAULT) == -1.0
    assert above_background({}, DEFAULT) == -1.0


@given(st.floats(min_value=0.0, max_value=3.0), st.floats(min_value=0.0, max_value=3.0))
def test_a_larger_contrast_never_lowers_the_bar(a: float, b: float) -> None:
    rounds = crowd(8, spread=0.7, seed=3)
    lo, hi = sorted((a, b))
    assert above_background(rounds, lo) <= above_background(rounds, hi) + 1e-9
