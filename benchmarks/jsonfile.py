"""Benchmark files: reading a data file (a JSON list, plain or gzipped: ``.json`` / ``.json.gz``) and writing a report
(JSON or Markdown, each carrying the record of the run that produced it: ``benchmarks.provenance``)."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

from benchmarks import provenance
from benchmarks.provenance import Run


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


def write_json(
    path: Path, result: dict[str, Any], run: Run, *, indent: int = 2, partial: bool = False
) -> Path:
    """``result`` as JSON at ``path``, with the run's record (commit, machine, date) under ``"run"``.

    Every benchmark's JSON report goes through here, so that none can leave out what produced it. ``partial``:
    written while the run goes on (its record has no end yet)."""
    if "run" in result:
        raise ValueError(f"{path.name}: the report's own 'run' key would hide the run's record")
    record = run.snapshot() if partial else run.finish()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**result, "run": record}, indent=indent, default=str) + "\n")
    return path


def write_markdown(path: Path, text: str, run: Run) -> Path:
    """``text`` as Markdown at ``path``, ending with the run's record as one line (``provenance.markdown``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text.rstrip()}\n\n{provenance.markdown(run.finish())}\n")
    return path


def save_report(out: Path, name: str, result: dict[str, Any], markdown: str, run: Run) -> None:
    """``<out>/<name>.json`` and ``<out>/<name>.md`` (the directory made if need be), and the Markdown printed:
    how a benchmark leaves its figures for docs/benchmarks.md."""
    write_json(out / f"{name}.json", result, run)
    write_markdown(out / f"{name}.md", markdown, run)
    print(markdown)
    print(provenance.markdown(run.finish()))
