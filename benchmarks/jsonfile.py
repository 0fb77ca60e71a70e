"""Benchmark files: reading a data file (a JSON list, plain or gzipped: ``.json`` / ``.json.gz``) and writing a report."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any


def data_file(text: str) -> Path:
    """An argparse ``type`` for ``--data``: an existing file, else a usage error (exit 2) rather than a traceback."""
    p = Path(text)
    if not p.is_file():
        raise argparse.ArgumentTypeError(f"no data file at {p}")
    return p


def load_list(path: str | Path, dataset: str, items: str) -> list[Any]:
    """The list in ``path``; a missing file or another JSON value is an error naming ``dataset`` and ``items``."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{dataset} data file {p} does not exist")
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, list):
        raise ValueError(f"{p}: expected a JSON list of {items}, got {type(raw).__name__}")
    return raw


def save_report(out: Path, name: str, result: Any, markdown: str) -> None:
    """``<out>/<name>.json`` and ``<out>/<name>.md`` (the directory made if need be), and the Markdown printed:
    how a benchmark leaves its figures for docs/benchmarks.md."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2))
    (out / f"{name}.md").write_text(markdown + "\n")
    print(markdown)
