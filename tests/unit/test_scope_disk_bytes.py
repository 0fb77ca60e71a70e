"""A scope's disk usage and last write are read while its files come and go (a graph save deletes the files of the
save before it, a checkpoint its WAL, a compaction swaps a folder): a file listed and gone a moment later counts as
0 bytes, never as an error of ``stats``, ``scopes`` or the console that asked."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from graphrecall.services import access


def test_a_file_deleted_while_it_is_counted_counts_as_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file is looked at once: one there at the first look and gone at the next (a save's cleanup between
    them) is counted as it was or not at all, and no look raises."""
    d = tmp_path / "u.kuzu.idx" / "vec-round_user"
    d.mkdir(parents=True)
    (d / "vectors.f16").write_bytes(b"x" * 1000)
    (d / "hnsw.1.links").write_bytes(b"y" * 300)
    assert access._bytes(tmp_path / "u.kuzu.idx") == 1300
    stat, looked = Path.stat, set()

    def gone_after_one_look(self: Path, *args: object, **kwargs: object) -> os.stat_result:
        if self.name == "hnsw.1.links":
            if self in looked:
                raise FileNotFoundError(errno.ENOENT, "deleted meanwhile", str(self))
            looked.add(self)
        return stat(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "stat", gone_after_one_look)
    assert access._bytes(tmp_path / "u.kuzu.idx") in (1000, 1300)
    assert access._bytes(d / "hnsw.1.links") == 0  # gone before this look


def test_a_folder_removed_during_the_walk_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "u.kuzu.idx"
    (d / "vec-fact_vec.compact").mkdir(parents=True)
    (d / "vec-fact_vec.compact" / "vectors.f16").write_bytes(b"x" * 10)
    (d / "manifest.json").write_bytes(b"{}")
    scandir = os.scandir

    def swapped(path: object) -> object:
        if str(path).endswith(".compact"):
            raise FileNotFoundError(
                errno.ENOENT, "renamed", str(path)
            )  # renamed away by a compaction's swap after its parent was listed
        return scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", swapped)
    assert access._bytes(d) == 2
