"""The documentation's examples run: fenced blocks in README.md, benchmarks/README.md and docs/*.md marked runnable
are executed, so a command or snippet that stops working fails here, naming the file and line of its block.

Markers (docs/contributing.md): an HTML comment on the line right before the opening fence, invisible on GitHub.

- ``<!-- doctest -->``: run the block. Shell blocks (``bash``/``sh``/``shell``) run with ``bash -euo pipefail`` in a
  temporary directory that holds a copy of ``examples/``, with ``GRAPHRECALL_ROOT`` pointing into it and
  ``graphrecall`` meaning this checkout's command line on the model-free hashing embedder; Python blocks run as
  written (the real embedding model). Blocks of one file share that directory and run in order, so a later block
  may search what an earlier one ingested.
- ``<!-- doctest: model -->``: a shell block that runs with the real embedding model (when its output is the point).
- ``<!-- doctest: skip REASON -->``: never run; the reason is required (starts a server, needs an LLM, installs).

Every shell and Python block of those files must carry one of these markers, and every fence must name
its language (``text`` for output and diagrams), so a new example cannot silently stay untested. Blocks that do not
run are still checked for what can be checked without running them (``test_commands_name_what_exists``): Python
compiles and its ``graphrecall`` imports resolve; a ``graphrecall`` command line uses a real subcommand and real
options; ``python -m`` modules and the scripts a command runs exist.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHELL = {"bash", "sh", "shell"}
PYTHON = {"python", "py"}
# Fenced languages that hold no command a reader runs here: output, diagrams, data, and code for other runtimes
# (Java client code; its build-and-run commands are a bash block). A language in neither set fails the
# classification test, so ``console`` or ``zsh`` cannot slip a command past it: add it to one set, deliberately.
INERT = {"text", "json", "yaml", "toml", "java"}
# Shell words that end one simple command and start the next.
SEPARATORS = {"|", "||", "&&", ";", "&"}
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
        name = self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path.name
        return f"{name}:{self.line}"


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
    return [REPO / "README.md", REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


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


def classification_problems(path: Path) -> list[str]:
    """Why the blocks of one document are not all run or skipped for a stated reason (empty: they are)."""
    problems = []
    for b in blocks(path):
        if not b.lang:
            problems.append(f"{b.where}: a fence without a language (```text for output and diagrams)")
            continue
        if b.lang not in SHELL | PYTHON:
            if b.lang not in INERT:
                problems.append(
                    f"{b.where}: unknown block language {b.lang!r} (add it to SHELL, PYTHON or INERT)"
                )
            elif b.mode is not None:
                problems.append(
                    f"{b.where}: a doctest marker on a {b.lang} block, which the harness cannot run"
                )
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
    return problems


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_is_run_or_skipped_for_a_reason(path: Path) -> None:
    problems = classification_problems(path)
    assert not problems, "\n".join(problems)


def test_the_classification_check_refuses_unmarked_and_unnamed_blocks(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "<!-- doctest -->\n```bash\nok\n```\n```python\nprint(1)\n```\n<!-- doctest: skip -->\n```sh\nx\n```\n"
        "```\ngraphrecall stats\n```\n```console\n$ graphrecall stats\n```\n<!-- doctest -->\n```json\n{}\n```\n"
        "```json\n{}\n```\n<!-- doctest: later -->\n```bash\nx\n```\n"
    )
    found = [p.split(": ", 1)[1].split(" (")[0] for p in classification_problems(doc)]
    assert found == [
        "unmarked python block",
        "a skipped block needs its reason",
        "a fence without a language",
        "unknown block language 'console'",
        "a doctest marker on a json block, which the harness cannot run",
        "unknown doctest mode 'later'",
    ]


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


# -- what a block names must exist, run or not ---------------------------------------------------------------------
def shell_commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block as argument lists: continued lines (``\\``) and quotes that close on
    a later line are joined, comments dropped, the line split at ``|``, ``&&``, ``;``, ``&``..., and leading
    ``VAR=value`` words and redirections (``> file``) removed."""
    commands: list[list[str]] = []
    buffer = ""
    for line in code.splitlines():
        buffer = f"{buffer}\n{line}" if buffer else line
        if buffer.endswith("\\"):
            buffer = buffer[:-1]
            continue
        try:
            words = shlex.split(buffer, comments=True)
        except ValueError:  # a quote that closes on a later line (a curl -d '{...}' body)
            continue
        buffer = ""
        current: list[str] = []
        redirect_target = False
        for word in [*words, ";"]:
            if redirect_target:
                redirect_target = False
            elif word in SEPARATORS:
                while current and re.fullmatch(r"[A-Za-z_]\w*=.*", current[0]):
                    current.pop(0)
                if current:
                    commands.append(current)
                current = []
            elif re.fullmatch(r"\d*(>>?|<)", word):
                redirect_target = True
            elif not re.fullmatch(r"\d*>&\d+", word):
                current.append(word)
    return commands


@functools.cache
def _cli_options() -> tuple[set[str], dict[str, set[str]]]:
    """The command line's own options and each subcommand's, read from the real parser."""
    from graphrecall.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = {name: set(p._option_string_actions) for name, p in sub.choices.items()}
    for name, p in sub.choices.items():  # a command with commands of its own: "hook stop"
        for nested in (a for a in p._actions if isinstance(a, argparse._SubParsersAction)):
            commands |= {f"{name} {n}": set(q._option_string_actions) for n, q in nested.choices.items()}
    return set(parser._option_string_actions), commands


def _module_source(name: str) -> Path | None:
    """The file ``python -m name`` runs, when the module is this repository's (``src/`` or the root)."""
    for base in (REPO / "src", REPO):
        stem = base / name.replace(".", "/")
        for candidate in (stem.with_suffix(".py"), stem / "__main__.py"):
            if candidate.is_file():
                return candidate
    return None


def command_problems(argv: list[str]) -> list[str]:
    """What a command names that does not exist: a ``graphrecall`` subcommand or option, a ``python -m`` module,
    an option of one of this repository's modules (its literal is not in the module's package), a script."""
    problems = []
    for word in argv:
        script = (
            word.endswith((".py", ".sh")) and not word.startswith(("/", "~", "..", "$")) and "*" not in word
        )
        if script and not (REPO / word).is_file():
            problems.append(f"{word} does not exist")
    program, args = Path(argv[0]).name, argv[1:]
    if program == "graphrecall":
        options, commands = _cli_options()
        name = "graphrecall"
        if args and not args[0].startswith("-"):
            if args[0] not in commands:
                return [*problems, f"graphrecall has no command {args[0]!r}"]
            name, options, args = f"graphrecall {args[0]}", commands[args[0]], args[1:]
            nested = f"{name.removeprefix('graphrecall ')} {args[0]}" if args else ""
            if nested in commands:
                name, options, args = f"graphrecall {nested}", commands[nested], args[1:]
        for word in args:
            flag = word.strip("[]").split("=")[0]
            if flag.startswith("-") and not re.fullmatch(r"-\d.*", flag) and flag not in options:
                problems.append(f"{name}: no option {flag}")
    elif re.fullmatch(r"python(3[.\d]*)?", program) and args[:1] == ["-m"] and len(args) > 1:
        source = _module_source(args[1])
        if source is None:
            top = args[1].split(".")[0]
            ours = (REPO / "src" / top).is_dir() or (REPO / top).is_dir()
            if ours or importlib.util.find_spec(top) is None:
                problems.append(f"python -m {args[1]}: no such module")
            return problems
        text = _option_sources(source)
        for word in args[2:]:
            flag = word.strip("[]").split("=")[0]
            if flag.startswith("--") and f'"{flag}"' not in text and f"'{flag}'" not in text:
                problems.append(f"python -m {args[1]}: no option {flag} in {source.relative_to(REPO)}")
    return problems


def _option_sources(source: Path) -> str:
    """Where a module's options may be declared, as text: the module, its package's other modules (a shared
    ``args.py``) and the modules of this repository it imports (one benchmark reusing another's options, the
    ``--ray`` options of ``graphrecall.raymap``)."""
    files = {source, *source.parent.glob("*.py")}
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from graphrecall import raymap`` imports a module too: shared options (--ray) live there
            for name in (node.module, *(f"{node.module}.{a.name}" for a in node.names)):
                imported = _module_source(name)
                if imported is not None:
                    files.add(imported)
    return "\n".join(f.read_text(encoding="utf-8") for f in sorted(files))


def python_problems(code: str) -> list[str]:
    """A Python block must compile (``await`` at top level is allowed: tours of async APIs) and its imports
    from ``graphrecall`` must resolve."""
    try:
        tree = compile(code, "<block>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as e:
        return [f"does not compile: {e.msg} (block line {e.lineno})"]
    problems = []
    ours = re.compile(r"graphrecall(\..+)?")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names if ours.fullmatch(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and ours.fullmatch(node.module or ""):
            targets = [(node.module or "", alias.name) for alias in node.names]
        else:
            continue
        for module_name, attribute in targets:
            try:
                module = importlib.import_module(module_name)
            except ImportError as e:
                problems.append(f"import {module_name}: {e}")
                continue
            if attribute in (None, "*") or hasattr(module, attribute):
                continue
            if importlib.util.find_spec(f"{module_name}.{attribute}") is None:  # a submodule is a name too
                problems.append(f"from {module_name} import {attribute}: no such name")
    return problems


def naming_problems(path: Path) -> list[str]:
    problems = []
    for b in blocks(path):
        if b.lang in PYTHON:
            problems += [f"{b.where}: {p}" for p in python_problems(b.code)]
        elif b.lang in SHELL:
            problems += [f"{b.where}: {p}" for argv in shell_commands(b.code) for p in command_problems(argv)]
    return problems


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_commands_name_what_exists(path: Path) -> None:
    """The static half, for every block (the skipped ones above all, since nothing else looks at them)."""
    problems = naming_problems(path)
    assert not problems, "\n".join(problems)


def test_the_static_check_finds_what_has_drifted(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "```bash\n"
        "graphrecall serach hello --org a --user b\n"
        "graphrecall search hello --org a --usr b | head   # a comment --not-a-flag\n"
        'X=1 graphrecall answer "q" --org a --user b \\\n    [--mode auto|recall] [--json] [--verbose]\n'
        "python -m graphrecall.server.auth --name n --orgs acme --role admin > /dev/null 2>&1 &\n"
        "python -m graphrecall.nowhere --x 1\n"
        "curl -d '{\"a\":\n 1}' http://x && bash scripts/nowhere.sh\n"
        "```\n"
        "```python\nfrom graphrecall import Memory, Memroy\nimport graphrecall.nowhere\nawait x\n```\n"
        "```python\ndef (:\n```\n"
    )
    assert [p.split(": ", 1)[1] for p in naming_problems(doc)] == [
        "graphrecall has no command 'serach'",
        "graphrecall search: no option --usr",
        "graphrecall answer: no option --verbose",
        "python -m graphrecall.server.auth: no option --role in src/graphrecall/server/auth.py",
        "python -m graphrecall.nowhere: no such module",
        "scripts/nowhere.sh does not exist",
        "from graphrecall import Memroy: no such name",
        "import graphrecall.nowhere: No module named 'graphrecall.nowhere'",
        "does not compile: invalid syntax (block line 1)",
    ]
