"""Command-line argument types that more than one benchmark accepts.

Why a module of its own: two benchmarks taking the same option must parse it the same way, and one benchmark must
not reach into another's private helpers to do so (a refactor of one would silently change the other's command
line).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


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


EMBEDDER_HELP = (
    "the embedding model, a spec of graphrecall.embed.spec: minilm (default; 'default' is the same), e5-small, "
    "sentence-transformers:NAME_OR_PATH, openai:MODEL, ollama:MODEL, or hashing (model-free, for plumbing checks, "
    "uncached); default GRAPHRECALL_EMBEDDER, else minilm"
)


def add_embedder(p: argparse.ArgumentParser) -> None:
    """``--embedder SPEC``: one option, parsed alike by every retrieval benchmark."""
    p.add_argument("--embedder", default=None, metavar="SPEC", help=EMBEDDER_HELP)


def embedder_spec(value: str | None) -> str:
    """The spec a benchmark runs with (``default`` and nothing mean the configured one, else MiniLM)."""
    from graphrecall.embed.spec import configured_spec

    return configured_spec(None if value in (None, "", "default") else value)


def build_embedder(value: str | None, cache: Path | None, seed: Path | None = None) -> Any:
    """The embedder a spec names; a model's vectors go through the embedding cache at ``cache`` (keyed by model:
    two models never share vectors), ``seed`` another run's cache read first; ``hashing`` is never cached."""
    from graphrecall.embed import CachedEmbedder, HashingEmbedder
    from graphrecall.embed.spec import embedder_from_spec

    spec = embedder_spec(value)
    if spec.split(":")[0] == "hashing":
        return HashingEmbedder(int(spec.split(":")[1])) if ":" in spec else HashingEmbedder(64)
    model = embedder_from_spec(spec)
    if seed is not None:
        from benchmarks.longmemeval.harness import SeededEmbedder

        model = SeededEmbedder(model, seed)
    return model if cache is None else CachedEmbedder(model, path=cache)
