"""The import floors of docs/architecture.md, enforced: a module imports only from floors below its own.

Why: every later change (a new index layer, a write log, a remote store) should land on one floor without
dragging the others along. Two sibling packages on the same floor (extract and retrieve, say) do not import each
other either; what both need belongs a floor lower. Imports inside functions and under TYPE_CHECKING count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "graphrecall"

# Lowest first. A top-level module or subpackage of graphrecall -> its floor.
FLOORS: dict[str, int] = {
    # 0 ground: schemas, errors, settings, parameters and the operation table, pure text/date/name helpers
    "models": 0, "errors": 0, "config": 0, "dates": 0, "names": 0, "text": 0, "prompts": 0, "params": 0,
    "results": 0, "operations": 0, "timewords": 0, "retry": 0, "telemetry": 0, "events": 0, "hook_errors": 0,
    "docref": 0,
    # 1 providers
    "embed": 1, "llm": 1,
    # 2 index engines (tantivy, vector scans), knowing nothing of Kuzu
    "index": 2,
    # 3 the store of record, which keeps its derived indexes in step
    "store": 3,
    # 4 what builds rows for the store and what ranks them
    "ingest": 4, "extract": 4, "retrieve": 4, "documents": 4,
    # 5 reading answers
    "read": 5,
    # 6 what the services are made of: one question's reads, chat-history rows, the scope export format
    "recall": 6, "writer": 6, "exchange": 6, "dataset": 6,
    # 7 the services: one per family of operations, owning its locks
    "services": 7,
    # 8 the facade
    "memory": 8, "aio": 8, "testing": 8,
    # 9 surfaces
    "formats": 9, "reembed": 9, "cli": 9, "cli_common": 9, "cli_extract": 9, "cli_ops": 9, "server": 9, "__main__": 9,
    "raymap": 9, "chat_exports": 9, "remote": 9, "cli_remote": 9, "cli_served": 9, "hooks": 9, "cli_hook": 9,
    "cli_learn": 9,
}  # fmt: skip
# Floors whose modules may import each other (the ground floor's helpers, the facade and its async twin, the
# surfaces). Elsewhere siblings stay apart.
OPEN_FLOORS = {0, 8, 9}
# Edges that the floors would allow but the design forbids: the Reader sees memory only through its protocol; the
# facade reaches the store only through the services (which own the locks and the flush-first rule).
FORBIDDEN = {("read", "store"), ("read", "memory"), ("memory", "store"), ("aio", "store")}


def _unit(module: str) -> str:
    """'graphrecall.store.rounds' -> 'store'."""
    return module.split(".")[1] if module.count(".") >= 1 else ""


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("graphrecall.")]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module == "graphrecall" or (node.module or "").startswith("graphrecall."))
        ):
            # 'from graphrecall.store import rounds' names the module graphrecall.store.rounds
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p != SRC / "__init__.py")


def test_every_module_has_a_floor() -> None:
    units = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in _modules()}
    assert units - set(FLOORS) == set(), "add new modules to FLOORS (and docs/architecture.md)"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_go_down(path: Path) -> None:
    here = path.relative_to(SRC).parts[0].removesuffix(".py")
    climbs = []
    for line, module in _imports(path):
        there = _unit(module)
        if there == here or there not in FLOORS:
            continue
        a, b = FLOORS[here], FLOORS[there]
        if (here, there) in FORBIDDEN or b > a or (a == b and a not in OPEN_FLOORS):
            climbs.append(f"{path.relative_to(SRC)}:{line} imports {module} (floor {a} -> {b})")
    assert climbs == []


def test_the_checker_catches_a_climbing_import(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from graphrecall.memory import Memory\n")
    assert _imports(bad) == [(2, "graphrecall.memory.Memory")]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _cycles() -> list[list[str]]:
    """Import cycles between graphrecall modules (every import counts, lazy ones too)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets = set()
        for _, module in _imports(path):
            while module not in paths and "." in module:  # 'graphrecall.store.rounds.q' -> the module
                module = module.rsplit(".", 1)[0]
            if module in paths and module != name and module != "graphrecall":
                targets.add(module)
        graph[name] = targets
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    assert _cycles() == []
