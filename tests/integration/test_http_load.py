"""A CI-sized run of the HTTP load test (benchmarks/load/http_load.py): concurrent mixed load on a real server
process answers no 5xx and loses no acknowledged write. The full-size run is documented in docs/http-api.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_short_load_run_has_no_server_errors_and_loses_no_write(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "load" / "http_load.py"),
        *("--duration", "5", "--clients", "8", "--users", "3", "--embedder", "hashing:64"),
        *("--out", str(tmp_path)),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "http_load.json").read_text())
    assert report["server_errors"] == 0
    assert report["transport_errors"] == 0
    ops = report["operations"]
    assert ops["write"]["ok"] > 0
    assert ops["search"]["ok"] > 0
    verification = report["verification"]
    assert verification["ok"], verification
    assert verification["acknowledged_writes"] == ops["write"]["ok"]
    assert verification["stored_sessions"] == ops["write"]["ok"] + 3  # plus one seed session per user
    assert "| write |" in (tmp_path / "http_load.md").read_text()
