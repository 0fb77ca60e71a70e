"""A compaction killed with SIGKILL at any moment leaves the old bucket or the new one, whole (``store.compact_swap``).

A child process (``tests/compaction_child.py``) compacts ``tests/compaction_store.py``'s store and is killed at each
step the compaction reports (during the copy, once the rewrite is checked, once the old bucket is closed, at the
journal, after the rename) and at moments chosen by time. Then the store is opened as usual: every row and edge of
the bucket is what it was, every user reads the same, no work folder is left, and the file is the old one when the
kill came before the journal and the rewrite after it. While a compaction runs in another process, opening the
bucket answers ``StoreBusy`` rather than reading a file about to be replaced.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests import compaction_store as cs

from graphrecall.errors import StoreBusy
from graphrecall.store import compact_swap
from graphrecall.store.database import BucketDatabase

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("crash") / "store"
    cs.build(root)
    with cs.open_memory(root) as m:
        seen = cs.reads(m)
    return {"root": root, "dump": cs.dump(root), "reads": seen, "bytes": cs.bucket_path(root).stat().st_size}


def _child(root: Path, step: str, nth: int, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.compaction_child", str(root), step, str(nth), mode],
        cwd=REPO, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def _whole(template: dict[str, Any], root: Path) -> int:
    """The store opened after the kill holds what it held before; the size of its bucket file."""
    with cs.open_memory(root) as m:  # settles what the kill left
        assert cs.reads(m) == template["reads"]
    path = cs.bucket_path(root)
    assert not compact_swap.work_dir(path).exists()
    assert cs.dump(root) == template["dump"]
    return path.stat().st_size


@pytest.mark.parametrize(
    ("step", "nth", "replaced"),
    [("page", 1, False), ("page", 9, False), ("copied", 1, False), ("closed", 1, False), ("journal", 1, True),
     ("renamed", 1, True)],
)  # fmt: skip
def test_killed_at_each_step_the_bucket_is_whole(
    template: dict[str, Any], tmp_path: Path, step: str, nth: int, replaced: bool
) -> None:
    root = tmp_path / "store"
    shutil.copytree(template["root"], root)
    child = _child(root, step, nth, "kill")
    out, _ = child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL, out
    assert "done" not in out
    size = _whole(template, root)
    assert (size < template["bytes"] / 3) if replaced else (size == template["bytes"])


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.6, 1.0, 1.5])
def test_killed_at_a_moment_chosen_by_time_the_bucket_is_whole(
    template: dict[str, Any], tmp_path: Path, delay: float
) -> None:
    root = tmp_path / "store"
    shutil.copytree(template["root"], root)
    child = _child(root, "none", 1, "kill")
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    time.sleep(delay)
    child.kill()
    child.communicate(timeout=60)
    size = _whole(template, root)
    assert size == template["bytes"] or size < template["bytes"] / 3  # the old file or the rewrite


def test_the_bucket_is_busy_while_another_process_compacts_it(
    template: dict[str, Any], tmp_path: Path
) -> None:
    root = tmp_path / "store"
    shutil.copytree(template["root"], root)
    child = _child(root, "closed", 1, "pause")  # the old bucket closed, the journal not yet written
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert child.stdout.readline().strip() == "paused"
        with pytest.raises(StoreBusy, match="compacted by another process"):
            BucketDatabase(cs.bucket_path(root), embedder_id=f"hashing-{cs.DIM}", dim=cs.DIM)
    finally:
        child.kill()
        child.communicate(timeout=60)
    assert _whole(template, root) == template["bytes"]
