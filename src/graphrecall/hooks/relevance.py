"""When a prompt has something relevant in memory: a hit's vector similarity at or above a measured threshold.

Why a threshold: search always returns its best hits, related or not, and a prompt hook that adds the best of
nothing to every prompt is noise the agent has to read past. The similarity of a hit's best side to the prompt
(``Hit.signals["vector"]``, a cosine) is what separates "memory has something on this" from "memory has the same
project's other topics": ``benchmarks/hooks/relevance.py`` stores 24 exchanges of a coding project and asks 24
prompts about them and 24 prompts about the same project's other work, and ``MIN_SIMILARITY`` is the threshold
that classifies those prompts best under 5-fold cross-validation (docs/benchmarks.md, "Hooks").

The threshold is a cosine of the reference model (the bundled MiniLM); for another embedder it is translated onto
that model's scale through its similarity profile (``embed.profile``), looked up by the embedder id the store
reports, so a server's embedder need not be loaded here. A model with no known profile gets the reference value.
"""

from __future__ import annotations

MIN_SIMILARITY = 0.41
"""Reference-scale cosine at or above which a hit is relevant to a prompt (measured: module docstring)."""


def threshold_for(embedder_id: str) -> float:
    """``MIN_SIMILARITY`` on the scale of the embedder ``embedder_id``."""
    from graphrecall.embed.profile import known_profile

    profile = known_profile(embedder_id)
    return MIN_SIMILARITY if profile is None else profile.translate(MIN_SIMILARITY)


def relevant(signals: dict[str, float], threshold: float) -> bool:
    return signals.get("vector", 0.0) >= threshold
