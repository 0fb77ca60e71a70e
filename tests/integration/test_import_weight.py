"""What ``import graphrecall`` and the command line's ``--help``/``--version`` load: a test of which modules are
imported, not of how long it takes (timings on a shared machine are noise; a module in ``sys.modules`` is not).

Measured when this was written (median of 7 runs, ``-X importtime``, 2 shared cores): the eager package root cost
~650 ms, of which NumPy ~170 ms, Kuzu + PyArrow ~75 ms and pydantic ~60 ms (PyTorch was already lazy); the lazy
root costs ~20 ms. ``graphrecall --version`` fell from ~780 ms to ~380 ms (what is left is pydantic and the
parameter models the parser is built from). Each module below is one that a regression would bring back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import graphrecall

SRC = Path(__file__).resolve().parents[2] / "src"

# The model stack, the store's engine and its arrays, the servers' frameworks: none is needed to import the package.
HEAVY = (
    "torch",
    "sentence_transformers",
    "transformers",
    "onnxruntime",
    "kuzu",
    "pyarrow",
    "numpy",
    "fastapi",
    "uvicorn",
    "mcp",
)
# The package root re-exports lazily, so not even pydantic (the models) is loaded by ``import graphrecall``; the
# command line needs it, because the parser's options are built from pydantic parameter models (graphrecall.params).
ROOT_HEAVY = (*HEAVY, "pydantic")

_PROBE = """
import json, runpy, sys
heavy = json.loads(sys.argv[1])
argv = json.loads(sys.argv[2])
if argv is None:
    import graphrecall
    code = 0
else:
    sys.argv = ["graphrecall", *argv]
    try:
        runpy.run_module("graphrecall", run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}), file=sys.stderr)
"""


def _loaded(heavy: tuple[str, ...], argv: list[str] | None) -> tuple[int, list[str]]:
    """Run the probe in a fresh interpreter (this test process has long imported everything) on this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHRECALL_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(heavy), json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return int(report["code"]), list(report["loaded"])


def test_import_graphrecall_loads_nothing_heavy() -> None:
    code, loaded = _loaded(ROOT_HEAVY, None)
    assert code == 0
    assert loaded == [], f"import graphrecall loads {loaded}; keep them behind the lazy re-exports"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["search", "--help"]], ids=" ".join)
def test_help_and_version_load_no_model_store_or_server(argv: list[str]) -> None:
    code, loaded = _loaded(HEAVY, argv)
    assert code == 0
    assert loaded == [], f"graphrecall {' '.join(argv)} loads {loaded}; import them where a command runs"


def test_every_public_name_resolves_to_its_module_s_object() -> None:
    """The lazy root serves the same objects as the eager one did, lists them for ``dir()`` and still refuses
    names it does not export."""
    import importlib

    exports = graphrecall._EXPORTS
    assert set(graphrecall.__all__) == {*exports, "__version__"}
    for name, module in exports.items():
        assert getattr(graphrecall, name) is getattr(importlib.import_module(module), name), name
    assert set(graphrecall.__all__) <= set(dir(graphrecall))
    with pytest.raises(AttributeError, match="Memroy"):
        graphrecall.Memroy  # type: ignore[attr-defined]  # noqa: B018
    namespace: dict[str, object] = {}
    exec("from graphrecall import *", namespace)
    assert {"Memory", "Scope", "Answer", "__version__"} <= set(namespace)
