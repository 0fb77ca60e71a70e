"""What every benchmark report records about its run (``benchmarks/provenance.py``) and the writers that put it
into each JSON and Markdown report (``benchmarks/jsonfile.py``)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from benchmarks import provenance
from benchmarks.jsonfile import save_report, write_json, write_markdown
from benchmarks.provenance import Run, code_state

REPO = Path(__file__).resolve().parents[2]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git repository with one commit of one file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return repo


def test_a_clean_checkout_gives_its_head_and_a_clean_tree(checkout: Path) -> None:
    head = _git(checkout, "log", "-1", "--format=%H").strip()
    assert code_state(checkout) == {"checkout": str(checkout), "commit": head, "dirty": False}


def test_a_changed_file_makes_the_tree_dirty(checkout: Path) -> None:
    (checkout / "a.py").write_text("x = 2\n")
    assert code_state(checkout)["dirty"] is True


def test_an_untracked_file_makes_the_tree_dirty(checkout: Path) -> None:
    """A new module not committed yet is code the commit does not hold."""
    (checkout / "b.py").write_text("y = 1\n")
    assert code_state(checkout)["dirty"] is True


def test_outside_a_checkout_nothing_is_guessed(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert code_state(plain) == {"checkout": None, "commit": None, "dirty": None}


def test_a_run_records_this_checkout_the_machine_and_the_date() -> None:
    run = Run.begin()
    record = run.finish()
    assert record["code"]["commit"] == _git(REPO, "rev-parse", "HEAD").strip()
    assert isinstance(record["code"]["dirty"], bool)
    machine = record["machine"]
    assert machine["cores"] == os.cpu_count() and 1 <= machine["cores_usable"] <= machine["cores"]
    assert len(machine["load_start"]) == 3 and len(machine["load_end"]) == 3
    assert machine["python"] == platform.python_version() and machine["platform"] == platform.platform()
    assert datetime.fromisoformat(record["started"]) <= datetime.fromisoformat(record["finished"])
    assert json.loads(json.dumps(record)) == record  # JSON-ready as it is


def test_the_first_finish_fixes_the_record() -> None:
    """A run's JSON and Markdown, written one after the other, carry the same end."""
    run = Run.begin()
    assert run.snapshot()["finished"] is None
    first = run.finish()
    assert run.finish() is first and run.snapshot() is first


def test_a_recorded_run_keeps_its_record() -> None:
    """A report re-rendered from its JSON says which run measured it, not when it was re-rendered."""
    record = Run.begin().finish()
    assert Run.recorded(json.loads(json.dumps(record))).finish() == record


def test_graphrecall_imported_from_another_checkout_is_recorded(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provenance, "GRAPHRECALL", checkout)
    record = Run.begin().finish()
    other = record["code"]["graphrecall_checkout"]
    assert other["commit"] == _git(checkout, "rev-parse", "HEAD").strip() and other["dirty"] is False
    assert f"graphrecall imported from {checkout}" in provenance.markdown(record)


def test_graphrecall_from_this_checkout_is_not_repeated() -> None:
    if provenance.code_state(provenance.GRAPHRECALL)["checkout"] != str(REPO):
        pytest.skip("graphrecall is imported from another checkout here (run with PYTHONPATH=src)")
    assert "graphrecall_checkout" not in Run.begin().finish()["code"]


def test_the_markdown_line_names_commit_tree_cores_load_and_python() -> None:
    record = {
        "started": "2026-12-03T00:25:40+00:00",
        "finished": "2026-12-03T00:31:02+00:00",
        "command": "python -m benchmarks.perf.turns",
        "code": {
            "checkout": "/r",
            "commit": "4560ba3c1d2e9f" + "0" * 26,
            "dirty": True,
            "graphrecall": "/r/src",
        },
        "machine": {
            "cores": 2,
            "cores_usable": 2,
            "load_start": [3.4, 3.0, 2.0],
            "load_end": [2.1, 2.9, 2.0],
            "python": "3.11.7",
            "platform": "Linux-x86_64",
        },
    }
    assert provenance.markdown(record) == (
        "Run: commit `4560ba3c1d2e` (uncommitted changes); 2026-12-03T00:25:40+00:00 to 2026-12-03T00:31:02+00:00; "
        "2 cores (2 usable), load average (1 min) 3.40 at start, 2.10 at end; Python 3.11.7 on Linux-x86_64."
    )
    record["code"] |= {"commit": None, "dirty": None}
    assert provenance.markdown(record).startswith("Run: commit unknown;")


def test_every_report_file_carries_the_same_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Run.begin()
    save_report(tmp_path / "out", "demo", {"p50_ms": 1.5}, "# Demo\n\n| a |\n|---|", run)
    saved = json.loads((tmp_path / "out" / "demo.json").read_text())
    assert saved["p50_ms"] == 1.5 and saved["run"] == run.finish()
    md = (tmp_path / "out" / "demo.md").read_text()
    assert md.startswith("# Demo") and md.endswith(provenance.markdown(run.finish()) + "\n")
    assert provenance.markdown(run.finish()) in capsys.readouterr().out


def test_a_partial_report_says_the_run_is_still_going(tmp_path: Path) -> None:
    run = Run.begin()
    write_json(tmp_path / "partial.json", {"sizes": []}, run, partial=True)
    assert json.loads((tmp_path / "partial.json").read_text())["run"]["finished"] is None
    write_markdown(tmp_path / "final.md", "done", run)
    assert json.loads((tmp_path / "partial.json").read_text())["run"]["finished"] is None
    assert run.finish()["finished"] is not None


def test_a_report_cannot_hide_the_record_under_its_own_run_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'run' key"):
        write_json(tmp_path / "x.json", {"run": "mine"}, Run.begin())
