"""Maintenance on its own (services/maintenance.py) and the report: a scope is backed up and consolidated once it
changed and then stayed idle; the backup restores; a run's LLM budget holds; the report shows growth, searches,
abstentions and runs. A fake clock stands for the waiting."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphrecall import Memory, cli, testing
from graphrecall.config import ConsolidationConfig
from graphrecall.embed import HashingEmbedder
from graphrecall.formats import read_scope_export
from graphrecall.hook_errors import record_error
from graphrecall.server.upkeep import MaintenanceLoop

ANN = ("acme", "ann")
HOUR = 3600.0
# Hashing vectors put the two chess facts at 0.778: near-identical for consolidation's rule (no LLM needed).
CONSOLIDATION = ConsolidationConfig(min_similarity=0.7, near_exact_similarity=0.75)


class Clock:
    def __init__(self) -> None:
        self.now = 1_780_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memory(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64), consolidation=CONSOLIDATION) as mem:
        testing.set_clock(mem, clock)
        mem.add_session(ANN, [{"role": "user", "content": "I play chess every Sunday."}], session_id="s1")
        mem.add_fact(ANN, "The user plays chess every Sunday.", kind="preference")
        mem.add_fact(ANN, "The user plays chess on Sundays.", kind="preference")
        yield mem


def test_a_changed_scope_waits_until_idle_then_is_backed_up_and_consolidated(
    memory: Memory, clock: Clock, tmp_path: Path
) -> None:
    first = memory.maintain(ANN, idle_s=HOUR)
    assert not first.ran and "in use" in first.reason
    clock.now += HOUR - 1
    assert not memory.maintain(ANN, idle_s=HOUR).ran
    clock.now += 1
    dry = memory.maintain(ANN, idle_s=HOUR, dry_run=True)
    assert dry.dry_run and dry.consolidation is not None and len(dry.consolidation.merges) == 1
    assert len(memory.facts(ANN)) == 2  # a dry run changes nothing
    done = memory.maintain(ANN, idle_s=HOUR)
    assert done.ran and done.run is not None and done.run.facts_merged == 1
    assert len(memory.facts(ANN)) == 1
    again = memory.maintain(ANN, idle_s=HOUR)
    assert not again.ran and again.reason == "nothing changed since the last maintenance"

    backup = Path(done.run.backup)
    with gzip.open(backup, "rt") as f:
        doc = json.load(f)
    assert len([f for f in doc["facts"] if f["expired_at"] is None]) == 2  # taken before the merge
    restored = memory.import_scope(("acme", "ann-restored"), read_scope_export(backup))
    assert restored.facts == 2


def test_a_new_change_restarts_the_wait_and_backups_are_pruned(memory: Memory, clock: Clock) -> None:
    for i in range(3):
        memory.add_session(ANN, [{"role": "user", "content": f"note {i}"}], session_id=f"n{i}")
        assert not memory.maintain(ANN, idle_s=60).ran  # just changed
        clock.now += 61
        assert memory.maintain(ANN, idle_s=60, keep_backups=2).ran
        clock.now += 1
    folder = Path(memory.root) / "backups" / "acme" / "ann"
    assert len(list(folder.glob("*.json.gz"))) == 2


def test_the_report_shows_growth_searches_and_runs(
    memory: Memory, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    memory.maintain(ANN, idle_s=0)
    for q in ("chess", "sunday", "what do I play"):
        memory.search(ANN, q)
    memory.context(ANN, "chess")
    memory.add_session(ANN, [{"role": "user", "content": "I also swim."}], session_id="s2")
    memory.maintain(ANN, idle_s=0)
    report = memory.report(ANN)
    assert report.searches == 4 and report.search_p50_ms is not None and report.search_p95_ms is not None
    assert report.search_p50_ms <= report.search_p95_ms
    assert len(report.maintenance) == 2 and report.maintenance[0].facts_merged == 1
    assert [g.sessions for g in report.growth][-1] == 2 and report.growth[0].sessions == 1
    assert report.answers == 0 and report.abstention_rate is None
    assert report.hook_errors == 0
    record_error(memory.root, "stop", "store_busy", "the store was busy", scope="acme/ann")
    record_error(memory.root, "stop", "store_busy", "another scope's", scope="acme/bob")
    assert memory.report(ANN).hook_errors == 1


def test_forgetting_a_scope_forgets_its_figures(memory: Memory) -> None:
    memory.search(ANN, "chess")
    memory.maintain(ANN, idle_s=0)
    memory.forget(ANN)
    memory.add_session(ANN, [{"role": "user", "content": "hello again"}], session_id="new")
    report = memory.report(ANN)
    assert report.searches == 0 and report.maintenance == [] and len(report.growth) == 0


def test_the_servers_loop_maintains_every_due_scope(memory: Memory, clock: Clock) -> None:
    memory.add_session(("acme", "bob"), [{"role": "user", "content": "hi"}], session_id="b1")
    loop = MaintenanceLoop(memory, idle_s=10)
    assert loop.run_pass() == 0  # both just changed
    clock.now += 11
    assert loop.run_pass() == 2
    assert loop.run_pass() == 0


def test_the_cli_maintains_for_cron_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "store"
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        mem.add_session(ANN, [{"role": "user", "content": "I play chess."}], session_id="s1")
    base = ["--root", str(root), "--embedder", "hashing"]
    assert cli.main(["maintain", *base, "--idle-s", "0"]) == 0
    out = capsys.readouterr().out
    assert "acme/ann: backed up to" in out
    assert cli.main(["maintain", *base, "--idle-s", "0"]) == 0
    assert "nothing changed since the last maintenance" in capsys.readouterr().out
    assert cli.main(["report", *base, "--org", "acme", "--json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert report["scope"] == {"org_id": "acme", "user_id": "ann"} and len(report["maintenance"]) == 1
    assert cli.main(["report", *base]) == 0
    assert "maintained 1 times" in capsys.readouterr().out
