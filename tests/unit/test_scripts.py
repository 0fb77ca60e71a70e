"""The README's two commands install what each needs: the demo the library alone, the tests everything.

``scripts/setup.sh`` prints its install commands instead of running them under ``SETUP_DRY_RUN=1``, so this runs
the real script and reads what it would do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def planned(*args: str) -> list[str]:
    run = subprocess.run(
        ["bash", "scripts/setup.sh", *args],
        cwd=REPO,
        env={**os.environ, "SETUP_DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line.removeprefix("+ ") for line in run.stdout.splitlines() if line.startswith("+ ")]


def test_the_demo_setup_installs_the_library_alone_after_the_pinned_cpu_torch() -> None:
    steps = planned()
    torch = next(i for i, s in enumerate(steps) if "torch==2.13.0" in s)
    library = next(i for i, s in enumerate(steps) if s.endswith("install -q -e ."))
    assert torch < library
    assert not [s for s in steps if "ray" in s or "apt-get" in s or "[all" in s], steps


def test_the_test_setup_installs_every_extra_ray_nginx_and_chromium() -> None:
    steps = planned("--dev")
    assert any('".[all,dev]"' in s or "[all,dev]" in s for s in steps)
    assert any("[ray]" in s for s in steps)
    assert any("apt-get" in s and "nginx" in s for s in steps)
    assert any("apt-get" in s and "chromium" in s for s in steps)
    if _has_npm():  # the client's dependencies, where npm is there to install them
        assert "npm ci --prefix clients/typescript --prefer-offline --no-audit --no-fund" in steps


def _has_npm() -> bool:
    return shutil.which("npm") is not None


def test_demo_and_tests_call_the_setup_they_need() -> None:
    demo = (REPO / "scripts" / "demo.sh").read_text()
    tests = (REPO / "scripts" / "test.sh").read_text()
    assert "bash scripts/setup.sh\n" in demo
    assert "bash scripts/setup.sh --dev\n" in tests


def test_an_unknown_option_is_refused() -> None:
    run = subprocess.run(
        ["bash", "scripts/setup.sh", "--everything"], cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 2 and "usage" in run.stderr
