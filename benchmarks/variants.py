"""``--variant NAME=JSON`` and ``--config JSON`` for the retrieval benchmarks: RetrievalConfig overrides read from
the command line, checked before anything runs (a misspelt knob is a usage error, not a silent default)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Collection
from typing import Any

from graphrecall.config import RetrievalConfig


def config_overrides(text: str) -> dict[str, Any]:
    """An argparse ``type``: a JSON object of valid ``RetrievalConfig`` fields."""
    try:
        overrides = json.loads(text)
        if not isinstance(overrides, dict):
            raise ValueError("not a JSON object")
        RetrievalConfig.model_validate(overrides)
    except ValueError as e:  # json.JSONDecodeError and pydantic's ValidationError are ValueErrors
        raise argparse.ArgumentTypeError(f"not a valid RetrievalConfig override: {text!r} ({e})") from None
    return overrides


def variant_type(reserved: Collection[str]) -> Any:
    """An argparse ``type`` for ``NAME=JSON``: a name not in ``reserved`` (the benchmark's own systems) and its
    overrides."""

    def parse(text: str) -> tuple[str, dict[str, Any]]:
        name, sep, body = text.partition("=")
        name = name.strip()
        if not sep or not name or name in reserved:
            raise argparse.ArgumentTypeError(f"--variant must be NAME=JSON with a new name, got {text!r}")
        return name, config_overrides(body)

    return parse


def add_variant_argument(p: argparse.ArgumentParser, *, reserved: Collection[str], help: str) -> None:
    """``--variant NAME=JSON``, repeatable, collected as a list of (name, overrides)."""
    p.add_argument(
        "--variant", action="append", default=[], type=variant_type(reserved), metavar="NAME=JSON", help=help
    )
