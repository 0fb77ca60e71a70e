"""Command-line argument types that more than one benchmark accepts, and the embedder ``--embedder`` names.

Why a module of its own: two benchmarks taking the same option must parse it the same way, and one benchmark must
not reach into another's private helpers to do so (a refactor of one would silently change the other's command
line).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphrecall.embed import Embedder


def token_budgets(text: str) -> list[int]:
    """An argparse ``type`` for ``--context-budgets 2000,4000``: distinct positive token budgets, ascending.

    An empty string gives no budgets (the context check is skipped); anything else that is not a comma-separated
    list of positive integers is a usage error (exit 2), not a traceback halfway through a run.
    """
    try:
        budgets = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--context-budgets must be comma-separated integers, got {text!r}"
        ) from None
    if budgets and budgets[0] < 1:
        raise argparse.ArgumentTypeError(f"--context-budgets must be positive, got {text!r}")
    return budgets


DEFAULT_EMBEDDER = "minilm"
"""The embedder a benchmark measures unless told otherwise: the library's default (``graphrecall.embed.spec``).
Fixed here, not read from ``GRAPHRECALL_EMBEDDER``: a benchmark's figures must not depend on the shell it ran in
(every report records the embedder's id)."""


def embedder_spec(text: str) -> str:
    """An argparse ``type`` for ``--embedder SPEC``: a spec ``graphrecall.embed.spec.embedder_from_spec`` accepts
    (``minilm``, ``e5-small``, ``sentence-transformers:NAME``, ``openai:MODEL``, ``ollama:MODEL``, ``hashing[:DIM]``;
    ``default`` is ``minilm``). Checked without loading any weights; an unknown spec is a usage error (exit 2)."""
    from graphrecall.embed.spec import embedder_from_spec
    from graphrecall.errors import ConfigurationError

    spec = text.strip()
    try:
        embedder_from_spec(spec)
    except ConfigurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return spec


def add_embedder_argument(parser: argparse.ArgumentParser, *, default: str = DEFAULT_EMBEDDER) -> None:
    """``--embedder SPEC``, the same in every benchmark that embeds (``build_embedder`` builds it)."""
    from graphrecall.config import EMBEDDER_SPECS

    parser.add_argument(
        "--embedder",
        type=embedder_spec,
        default=default,
        metavar="SPEC",
        help=f"the embedder: {EMBEDDER_SPECS}, hashing[:DIM] (model-free: tests and plumbing checks, figures "
        f"meaningless); default %(default)s",
    )


def build_embedder(spec: str, cache: Path | None = None, *, seed: Path | None = None) -> Embedder:
    """The embedder ``spec`` names, behind a persistent ``CachedEmbedder`` at ``cache`` (keys hold the model's id,
    so two models never answer for each other in one cache file); ``seed``: another run's cache file, read-only,
    consulted first (``benchmarks.longmemeval.harness.SeededEmbedder``). The hashing embedder is cheaper than a
    cache lookup and is never cached."""
    from benchmarks.longmemeval.harness import SeededEmbedder
    from graphrecall.embed import CachedEmbedder, HashingEmbedder, embedder_from_spec

    model = embedder_from_spec(spec)
    if isinstance(model, HashingEmbedder) or cache is None:
        return model
    if seed is not None:
        model = SeededEmbedder(model, seed)
    return CachedEmbedder(model, path=cache)
