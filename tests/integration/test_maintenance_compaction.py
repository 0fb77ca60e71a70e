"""Maintenance compacts the bucket holding a scope once its free share passes ``Settings.compact_free_fraction``, and
not below it; a dry run only says so; the result, the CLI and the next measurement show what was done. The store is
``tests/compaction_store.py``'s: several users in one churned bucket (most of its file is free space)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests import compaction_store as cs

from graphrecall import Scope, cli, testing
from graphrecall.services.maintenance import MEASURE_EVERY_S


class Clock:
    def __init__(self) -> None:
        self.now = 1_780_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("maintain") / "store"
    cs.build(root)
    return root


@pytest.fixture
def root(template: Path, tmp_path: Path) -> Path:
    shutil.copytree(template, tmp_path / "store")
    return tmp_path / "store"


def test_below_the_bound_the_bucket_is_measured_and_left_alone(root: Path) -> None:
    size = cs.bucket_path(root).stat().st_size
    with cs.open_memory(root, compact_free_fraction=0.95) as m:
        c = m.maintain(cs.ANN, idle_s=0).compaction
    assert c is not None and not c.compacted
    assert c.bucket == str(cs.bucket_path(root).relative_to(root)) and c.bytes == size
    assert 0.5 < c.free_fraction < 0.95 and c.bound == 0.95 and "below the bound" in c.reason
    assert cs.bucket_path(root).stat().st_size == size


def test_past_the_bound_maintenance_compacts_it_once(root: Path) -> None:
    size = cs.bucket_path(root).stat().st_size
    clock = Clock()
    with cs.open_memory(root, compact_free_fraction=0.3) as m:
        testing.set_clock(m, clock)
        before = cs.reads(m)
        dry = m.maintain(cs.BOB, dry_run=True).compaction
        assert dry is not None and not dry.compacted and "dry run" in dry.reason
        assert cs.bucket_path(root).stat().st_size == size
        done = m.maintain(
            cs.BOB
        ).compaction  # bob is not due (changed just now): his bucket is compacted anyway
        assert done is not None and done.compacted and done.bytes == size
        assert done.bytes_after == cs.bucket_path(root).stat().st_size < size / 3
        assert done.seconds is not None and done.seconds > 0
        assert cs.reads(m) == before
        clock.now += MEASURE_EVERY_S
        again = m.maintain(cs.DAN).compaction  # measured anew: nearly nothing free
        assert again is not None and not again.compacted and again.free_fraction < 0.05


def test_a_scope_without_a_bucket_has_no_compaction(root: Path) -> None:
    with cs.open_memory(root) as m:
        other = Scope(org_id="globex", user_id="carol")
        m.add_session(other, [{"role": "user", "content": "Hi."}], session_id="c1")  # lives in its write log
        found = m.maintain(other)  # not due (changed just now): nothing of it enters Kuzu
        assert not found.ran and found.compaction is None


def test_the_cli_says_what_it_compacted(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRAPHRECALL_COMPACT_FREE_FRACTION", "0.3")
    base = ["--root", str(root), "--embedder", f"hashing:{cs.DIM}", "--org", cs.ORG, "--user", "ann"]
    assert cli.main(["maintain", *base, "--json"]) == 0
    [m] = json.loads(capsys.readouterr().out)
    assert m["compaction"]["compacted"] is True
    assert m["compaction"]["bytes_after"] == cs.bucket_path(root).stat().st_size
    assert cli.main(["maintain", *base]) == 0
    assert "bucket" not in capsys.readouterr().out  # nothing to say: it is below the bound now
