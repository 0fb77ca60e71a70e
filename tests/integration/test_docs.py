"""The documentation's examples run: fenced blocks in README.md and docs/*.md marked runnable are executed, so a
command or snippet that stops working fails here, naming the file and line of its block.

Markers (docs/contributing.md): an HTML comment on the line right before the opening fence, invisible on GitHub.

- ``<!-- doctest -->``: run the block. Shell blocks (``bash``/``sh``/``shell``) run with ``bash -euo pipefail`` in a
  temporary directory that holds a copy of ``examples/``, with ``GRAPHRECALL_ROOT`` pointing into it and
  ``graphrecall`` meaning this checkout's command line on the model-free hashing embedder; Python blocks run as
  written (the real embedding model). Blocks of one file share that directory and run in order, so a later block
  may search what an earlier one ingested.
- ``<!-- doctest: model -->``: a shell block that runs with the real embedding model (when its output is the point).
- ``<!-- doctest: skip REASON -->``: never run; the reason is required (starts a server, needs an LLM, installs).

Shell and Python blocks of the files in ``CLASSIFIED`` must carry one of these markers, so a new example cannot
silently stay untested.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHELL = {"bash", "sh", "shell"}
PYTHON = {"python", "py"}
# Files whose every shell/Python block must be marked. The other docs/*.md still run their marked blocks; add a file
# here once its blocks are classified (docs owned by other work in progress are left out until then).
CLASSIFIED = ("README.md", "docs/cli.md", "docs/contributing.md")
MARKER = re.compile(r"^<!--\s*doctest(?::\s*(?P<mode>\w+)(?P<reason>.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
BLOCK_TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    mode: str | None  # None: unmarked; "run", "model" or "skip"
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the doctest marker on the line before it, if any."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m["fence"], i
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(fence)), len(lines))
        marker = MARKER.match(lines[i - 1].strip()) if i > 0 else None
        mode = None if marker is None else (marker["mode"] or "run")
        reason = (marker["reason"] or "").strip() if marker else ""
        out.append(
            Block(path, start + 1, m["lang"].lower(), "\n".join(lines[i + 1 : end]) + "\n", mode, reason)
        )
        i = end + 1
    return out


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _environment(tmp: Path, *, hashing: bool) -> dict[str, str]:
    """``graphrecall`` on PATH is this checkout's command line (a shim around ``python -m graphrecall``)."""
    bin_dir = tmp / ".doctest-bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "graphrecall"
    extra = " --embedder hashing" if hashing else ""
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m graphrecall "$@"{extra}\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRECALL_")}
    src = str(REPO / "src")
    env |= {
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p),
        "GRAPHRECALL_ROOT": str(tmp / "store"),
        "HF_HUB_OFFLINE": "1",
    }
    return env


def run_block(block: Block, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = _environment(tmp, hashing=block.mode == "run")
    if block.lang in SHELL:
        argv = ["bash", "-euo", "pipefail", "-c", block.code]
    else:
        argv = [sys.executable, "-c", block.code]
    return subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)


def _runnable_files() -> list[Path]:
    return [p for p in doc_files() if any(b.mode in ("run", "model") for b in blocks(p))]


@pytest.mark.parametrize("path", _runnable_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_marked_blocks_run(path: Path, tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("java"))
    for block in blocks(path):
        if block.mode not in ("run", "model"):
            continue
        assert block.lang in SHELL | PYTHON, f"{block.where}: cannot run a {block.lang or 'plain'} block"
        proc = run_block(block, tmp_path)
        assert proc.returncode == 0, (
            f"{block.where}: the block exited {proc.returncode}\n--- block ---\n{block.code}"
            f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
        )
        assert "Traceback" not in proc.stderr, f"{block.where}: a traceback\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("name", CLASSIFIED)
def test_every_example_is_run_or_skipped_for_a_reason(name: str) -> None:
    path = REPO / name
    assert path.exists(), f"{name} is listed in CLASSIFIED but does not exist"
    problems = []
    for b in blocks(path):
        if b.lang not in SHELL | PYTHON:
            continue
        if b.mode is None:
            problems.append(
                f"{b.where}: unmarked {b.lang} block (add <!-- doctest --> or <!-- doctest: skip why -->)"
            )
        elif b.mode not in ("run", "model", "skip"):
            problems.append(f"{b.where}: unknown doctest mode {b.mode!r}")
        elif b.mode == "skip" and not b.reason:
            problems.append(
                f"{b.where}: a skipped block needs its reason (<!-- doctest: skip starts a server -->)"
            )
    assert not problems, "\n".join(problems)


def test_the_parser_finds_markers_fences_and_lines(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "# t\n<!-- doctest -->\n```bash\necho hi\n```\n\n<!-- doctest: skip starts a server -->\n```sh\nserve\n```\n"
        "```python\nprint(1)\n```\n````md\n```bash\nnested\n```\n````\n"
    )
    found = blocks(doc)
    assert [(b.line, b.lang, b.mode, b.reason) for b in found] == [
        (3, "bash", "run", ""),
        (8, "sh", "skip", "starts a server"),
        (11, "python", None, ""),
        (14, "md", None, ""),
    ]
    assert found[0].code == "echo hi\n"
