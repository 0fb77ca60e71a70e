"""Prompt templates, kept as files so they can be read, diffed and versioned apart from code.

A prompt file (``prompts/<name>.md``) starts with a header line ``version: N`` followed by the template body,
which uses ``str.format`` fields: ``{name}`` is a placeholder, ``{{`` and ``}}`` are literal braces (needed for
JSON examples). The version is recorded with extracted data so results can be traced to the prompt that made
them. ``render`` refuses missing or unexpected values: a silently empty ``{messages}`` would produce a
plausible-looking but useless extraction.

Lookup order: ``$GRAPHRECALL_PROMPTS_DIR``, then ``graphrecall/prompts/`` inside the installed package (the
wheel ships them there), then the repository's top-level ``prompts/`` (source checkouts).
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

ENV_DIR = "GRAPHRECALL_PROMPTS_DIR"
SUFFIXES = (".md", ".txt")
_HEADER = re.compile(r"^version:\s*(\d+)\s*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PromptError(ValueError):
    """A prompt file is missing or malformed, or ``render`` got the wrong set of values."""


@dataclass(frozen=True)
class Prompt:
    """A loaded template. ``placeholders`` are the names ``render`` requires, no more and no fewer."""

    name: str
    version: int
    template: str
    placeholders: frozenset[str]

    def render(self, **values: Any) -> str:
        missing = self.placeholders - values.keys()
        extra = values.keys() - self.placeholders
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing {sorted(missing)}")
            if extra:
                parts.append(f"unexpected {sorted(extra)}")
            raise PromptError(
                f"prompt {self.name!r} v{self.version}: {'; '.join(parts)} "
                f"(placeholders: {sorted(self.placeholders)})"
            )
        return self.template.format(**values)


def _directories() -> list[Traversable]:
    dirs: list[Traversable] = []
    env = os.environ.get(ENV_DIR)
    if env:
        dirs.append(Path(env))
    try:
        packaged = resources.files("graphrecall") / "prompts"
        if packaged.is_dir():
            dirs.append(packaged)
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - unusual import setups
        pass
    dirs.append(Path(__file__).resolve().parents[2] / "prompts")
    return dirs


def _find(name: str, directory: Path | None) -> Traversable:
    stem = name.removesuffix(".md").removesuffix(".txt")
    dirs: list[Traversable] = [directory] if directory is not None else _directories()
    for d in dirs:
        for suffix in SUFFIXES:
            candidate = d / f"{stem}{suffix}"
            if candidate.is_file():
                return candidate
    known = ", ".join(list_prompts(directory)) or "none"
    raise PromptError(f"no prompt named {stem!r} (looked in {[str(d) for d in dirs]}; known: {known})")


def parse_prompt(name: str, text: str) -> Prompt:
    """Parse a prompt file's text: the ``version: N`` header line, then the template."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    while lines and not lines[0].strip():
        lines.pop(0)
    header = _HEADER.match(lines[0].strip()) if lines else None
    if header is None:
        raise PromptError(f"prompt {name!r}: the first line must be 'version: N'")
    body = "".join(lines[1:]).lstrip("\n")
    placeholders: set[str] = set()
    try:
        fields = list(string.Formatter().parse(body))
    except ValueError as exc:
        raise PromptError(
            f"prompt {name!r}: bad template ({exc}); write literal braces as {{{{ and }}}}"
        ) from exc
    for _, field, spec, conversion in fields:
        if field is None:
            continue
        if not _IDENT.match(field) or spec or conversion:
            raise PromptError(
                f"prompt {name!r}: placeholder {{{field}}} is not a plain name; write literal braces as {{{{ }}}}"
            )
        placeholders.add(field)
    return Prompt(
        name=name, version=int(header.group(1)), template=body, placeholders=frozenset(placeholders)
    )


def load_prompt(name: str, directory: Path | None = None) -> Prompt:
    """Load prompt ``name`` (with or without ``.md``); ``directory`` overrides the lookup (tests)."""
    path = _find(name, directory)
    stem = name.removesuffix(".md").removesuffix(".txt")
    return parse_prompt(stem, path.read_text(encoding="utf-8"))


def list_prompts(directory: Path | None = None) -> list[str]:
    """Names of all available prompts (first directory in the lookup order wins on duplicates)."""
    names: set[str] = set()
    dirs: list[Traversable] = [directory] if directory is not None else _directories()
    for d in dirs:
        if not d.is_dir():
            continue
        for entry in d.iterdir():
            if entry.is_file() and entry.name.endswith(SUFFIXES):
                names.add(entry.name.rsplit(".", 1)[0])
    return sorted(names)
