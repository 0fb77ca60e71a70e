"""CI-sized runs of the HTTP load test (benchmarks/load/http_load.py) in both modes: concurrent mixed load on a
real server process answers no 5xx and loses no acknowledged write, the open loop keeps to its schedule and says
so, and ``--kill-after`` finds every acknowledged write after a kill -9 and a restart. The full-size runs are in
docs/benchmarks.md ("HTTP load")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_load(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "load" / "http_load.py"),
        *("--embedder", "hashing:64", "--out", str(tmp_path)),
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    report = (
        json.loads((tmp_path / "http_load.json").read_text())
        if (tmp_path / "http_load.json").exists()
        else {}
    )
    return done, report


@pytest.mark.slow
def test_short_load_run_has_no_server_errors_and_loses_no_write(tmp_path: Path) -> None:
    done, report = run_load(tmp_path, *("--duration", "5", "--clients", "8", "--users", "3"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert report["mode"] == "closed-loop"
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
    batching = report["embed_batching"]  # the server merges small embed calls by default (embed.batching)
    assert batching is not None and batching["texts"] >= batching["calls"] > 0


@pytest.mark.slow
def test_open_loop_run_keeps_to_its_schedule_and_reports_its_mode(tmp_path: Path) -> None:
    done, report = run_load(
        tmp_path, *("--duration", "4", "--rate", "8", "--arrivals", "fixed", "--users", "2")
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert report["mode"] == "open-loop"
    assert report["latency_from"] == "scheduled send time"
    schedule = report["schedule"]
    assert schedule["scheduled"] == schedule["sent"] == 32  # fixed arrivals: 8/s for 4 s
    assert schedule["sent_per_s"] == 8.0
    assert not schedule["saturated"]
    assert report["total_requests"] == 32
    assert report["server_errors"] == report["transport_errors"] == 0
    ops = report["operations"]
    assert sum(o["count"] for o in ops.values()) == 32
    for o in ops.values():
        if o["count"]:
            assert o["p50_ms"] >= o["service_p50_ms"]  # the scheduled time is never after the actual send
    assert set(report["targets"]) == {"write", "search"}
    assert report["verification"]["ok"], report["verification"]
    text = (tmp_path / "http_load.md").read_text()
    assert "open-loop" in text and "**scheduled**" in text and "| write |" in text


@pytest.mark.slow
def test_kill_after_restarts_the_server_and_finds_every_acknowledged_write(tmp_path: Path) -> None:
    done, report = run_load(
        tmp_path,
        *("--duration", "8", "--rate", "10", "--users", "2", "--kill-after", "4", "--spot-check", "100"),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert report["kill"]["after_s"] >= 4
    assert report["schedule"]["sent"] < report["schedule"]["scheduled"]  # the load ended at the kill
    assert report["targets"] is None
    verification = report["verification"]
    assert verification["ok"], verification
    assert verification["acknowledged_writes"] > 0
    assert verification["spot_checked"] == verification["acknowledged_writes"]
    assert "SIGKILL" in (tmp_path / "http_load.md").read_text()
