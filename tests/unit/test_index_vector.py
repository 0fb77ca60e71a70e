"""ExactVectorIndex: exact cosine top-k, durable appends, replace and delete, and what opening does with damage."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from graphrecall.index import ExactVectorIndex, IndexCorrupt


def _unit(rng: np.random.Generator, n: int, dim: int = 16) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _build(path: Path, ids: list[str], vecs: np.ndarray, mark: str | None = None) -> ExactVectorIndex:
    return ExactVectorIndex.rebuild_from(
        path, zip(ids, vecs, strict=True), embedder_id="e", dim=vecs.shape[1], mark=mark
    )


def test_search_is_the_exact_cosine_ranking(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    vecs = _unit(rng, 500)
    ids = [f"r{i}" for i in range(500)]
    idx = _build(tmp_path / "v", ids, vecs)
    q = _unit(rng, 1)[0]
    want = np.argsort(-(vecs @ q), kind="stable")[:20]
    got = idx.search(q, 20)
    assert [i for i, _ in got] == [ids[j] for j in want]
    assert [s for _, s in got] == pytest.approx([float(vecs[j] @ q) for j in want], abs=1e-6)
    assert len(idx.search(q, 10_000)) == 500


def test_added_rows_survive_reopen_and_replace_by_id(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    vecs = _unit(rng, 10)
    idx = _build(tmp_path / "v", [f"r{i}" for i in range(10)], vecs)
    new = _unit(rng, 2)
    idx.add(["r3", "n1"], new, mark="m2")  # r3 replaced, n1 new
    reopened = ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16)
    assert reopened.count() == 11 and reopened.mark == "m2"
    top_id, top_score = reopened.search(new[0], 1)[0]
    assert top_id == "r3" and top_score == pytest.approx(1.0, abs=1e-5)
    assert [i for i, _ in reopened.search(vecs[3], 11)].count("r3") == 1  # the old r3 row is gone


def test_delete_hides_rows_and_a_readded_id_comes_back(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vecs = _unit(rng, 5)
    idx = _build(tmp_path / "v", [f"r{i}" for i in range(5)], vecs)
    idx.delete(["r0", "missing"])
    assert "r0" not in [i for i, _ in idx.search(vecs[0], 5)]
    idx.add(["r0"], vecs[:1])
    again = ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16)
    assert again.count() == 5 and again.search(vecs[0], 1)[0][0] == "r0"


def test_vectors_by_id_are_the_latest_rows_and_leave_out_deleted_or_unknown_ids(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    vecs = _unit(rng, 4)
    idx = _build(tmp_path / "v", [f"r{i}" for i in range(4)], vecs)
    new = _unit(rng, 1)
    idx.add(["r1"], new)
    idx.delete(["r2"])
    got = idx.vectors(["r0", "r1", "r2", "nope"])
    assert set(got) == {"r0", "r1"}
    assert got["r0"] == pytest.approx(vecs[0]) and got["r1"] == pytest.approx(new[0])


def test_an_interrupted_append_is_cut_back_to_the_acknowledged_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    idx = _build(tmp_path / "v", ["a", "b"], _unit(rng, 2))
    idx.add(["c"], _unit(rng, 1))
    with open(tmp_path / "v" / "vectors.f32", "ab") as f:  # a kill -9 after the rows, before the log line
        f.write(_unit(rng, 1).tobytes()[:40])
    with open(tmp_path / "v" / "log.txt", "a") as f:
        f.write("+torn-id-without-newl")
    again = ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16)
    assert again.count() == 3
    assert (tmp_path / "v" / "vectors.f32").stat().st_size == 3 * 16 * 4
    again.add(["d"], _unit(rng, 1))
    assert ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16).count() == 4


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: (d / "manifest.json").unlink(),
        lambda d: (d / "manifest.json").write_text("{not json"),
        lambda d: (d / "manifest.json").write_text(
            json.dumps({"kind": "exact-f32", "version": 99, "dim": 16})
        ),
        lambda d: (d / "log.txt").write_text("garbage\n"),
        lambda d: (d / "vectors.f32").write_bytes(b""),
        lambda d: (d / "log.txt").unlink(),
    ],
    ids=["no-manifest", "bad-json", "other-version", "bad-log", "rows-missing", "no-log"],
)
def test_damage_is_reported_as_corrupt(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(5)
    _build(tmp_path / "v", ["a", "b"], _unit(rng, 2))
    damage(tmp_path / "v")
    with pytest.raises(IndexCorrupt):
        ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16)


def test_another_embedder_or_dimension_is_refused(tmp_path: Path) -> None:
    _build(tmp_path / "v", ["a"], _unit(np.random.default_rng(6), 1))
    with pytest.raises(IndexCorrupt, match="embedder_id"):
        ExactVectorIndex(tmp_path / "v", embedder_id="other", dim=16)
    with pytest.raises(IndexCorrupt, match="dim"):
        ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=32)


def test_bad_input_is_rejected_and_nothing_is_written(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    idx = _build(tmp_path / "v", ["a"], _unit(rng, 1))
    with pytest.raises(ValueError, match="dimensions"):
        idx.add(["b"], _unit(rng, 1, dim=8))
    with pytest.raises(ValueError, match="newline"):
        idx.add(["b\nc"], _unit(rng, 1))
    assert ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16).count() == 1


def _saved_graph(path: Path, *, seed: int, rows: int) -> np.ndarray:
    """A tiered index of ``rows`` random unit rows (ids ``r0``...) at ``path`` whose graph (threshold 100) was built
    and saved, closed; its rows."""
    from graphrecall.index import TieredVectorIndex

    vecs = _unit(np.random.default_rng(seed), rows)
    ids = [f"r{i}" for i in range(rows)]
    TieredVectorIndex.rebuild_from(path, zip(ids, vecs, strict=True), embedder_id="e", dim=16)
    TieredVectorIndex(path, embedder_id="e", dim=16, threshold=100).close()
    return vecs


def _named(path: Path, part: str) -> Path:
    """The file of the saved graph at ``path`` that its ``hnsw.json`` names as ``part`` ("graph" or "slots")."""
    return path / json.loads((path / "hnsw.json").read_text())["files"][part]


def _graph_files_on_disk(path: Path) -> list[str]:
    """The ``hnsw.*`` files at ``path``, sorted."""
    return sorted(f.name for f in path.glob("hnsw.*"))


def _files_the_meta_names(path: Path) -> list[str]:
    """``hnsw.json`` and the files it names, sorted: all a saved graph should leave once its save is done."""
    return sorted(["hnsw.json", *json.loads((path / "hnsw.json").read_text())["files"].values()])


def test_an_empty_index_answers_nothing(tmp_path: Path) -> None:
    idx = ExactVectorIndex.rebuild_from(tmp_path / "v", [], embedder_id="e", dim=16)
    assert idx.search(np.ones(16, np.float32), 5) == [] and idx.count() == 0


def test_tiered_index_switches_to_a_graph_above_its_threshold_and_agrees_with_exact(tmp_path: Path) -> None:
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    rng = np.random.default_rng(8)
    vecs = _unit(rng, 300)
    ids = [f"r{i}" for i in range(300)]
    ExactVectorIndex.rebuild_from(
        tmp_path / "v", zip(ids[:40], vecs[:40], strict=True), embedder_id="e", dim=16
    )
    tv = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100, persist_every=50)
    assert not tv.uses_graph
    tv.add(ids[40:], vecs[40:])
    assert tv.uses_graph and _named(tmp_path / "v", "graph").exists()
    tv.delete(["r7"])
    q = vecs[7] * 0.9 + vecs[8] * 0.1
    want = [i for i, _ in tv.exact.search(q, 10)]
    assert [i for i, _ in tv.search(q, 10)] == want and "r7" not in want
    tv.add(["n1"], _unit(rng, 1))  # after the last save: lives in the log only
    tv.close()
    again = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100)
    assert again.uses_graph and again.count() == 300
    assert [i for i, _ in again.search(q, 10)] == want


def test_a_small_graph_finds_the_exact_top_five_for_every_query(tmp_path: Path) -> None:
    """A graph built on several threads from a few hundred rows left some rows unreachable (1-2% of queries missed
    one of the top 5); a graph that starts small is built on one thread (``ONE_THREAD_BELOW``)."""
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    rng = np.random.default_rng(9)
    vecs = _unit(rng, 180)
    ids = [f"r{i}" for i in range(180)]
    queries = _unit(rng, 300)
    for build in range(4):  # a poor build is a matter of thread timing: build a few
        ExactVectorIndex.rebuild_from(tmp_path / f"v{build}", [], embedder_id="e", dim=16)
        tv = TieredVectorIndex(tmp_path / f"v{build}", embedder_id="e", dim=16, threshold=100)
        tv.add(ids, vecs)  # one batch: the graph is built from all 180 at once
        assert tv.uses_graph
        for q in queries:
            assert [i for i, _ in tv.search(q, 5)] == [i for i, _ in tv.exact.search(q, 5)]


def test_tiered_index_rebuilds_a_damaged_graph_from_its_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    vecs = _saved_graph(tmp_path / "v", seed=9, rows=120)
    _named(tmp_path / "v", "graph").write_bytes(b"\0" * 100)
    again = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100)
    assert again.uses_graph and "rebuilding its HNSW graph" in caplog.text
    assert again.search(vecs[5], 1)[0][0] == "r5"


def test_a_half_precision_index_keeps_two_bytes_a_component_and_scores_cosines_of_the_rounded_rows(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(10)
    vecs = _unit(rng, 50)
    ids = [f"r{i}" for i in range(50)]
    idx = ExactVectorIndex.rebuild_from(
        tmp_path / "v", zip(ids[:30], vecs[:30], strict=True), embedder_id="e", dim=16, half=True
    )
    idx.add(ids[30:], vecs[30:])
    assert (tmp_path / "v" / "vectors.f16").stat().st_size == 50 * 16 * 2
    assert not (tmp_path / "v" / "vectors.f32").exists()
    rounded = vecs.astype(np.float16).astype(np.float32)
    unit = rounded / np.linalg.norm(rounded, axis=1, keepdims=True)
    q = _unit(rng, 1)[0]
    want = np.argsort(-(unit @ q), kind="stable")[:10]
    for ix in (
        idx,
        ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16, half=True),
    ):  # live and reopened
        got = ix.search(q, 10)
        assert [i for i, _ in got] == [ids[j] for j in want]
        assert [s for _, s in got] == pytest.approx([float(unit[j] @ q) for j in want], abs=1e-6)
        assert ix.vectors(["r40"])["r40"] == pytest.approx(unit[40], abs=1e-7)
    # the rounding is the only change: scores stay within ~1e-3 of the float32 rows' (here 16-d; 384-d: ~1e-5)
    assert [s for _, s in idx.search(q, 10)] == pytest.approx([float(vecs[j] @ q) for j in want], abs=1e-3)


def test_an_index_of_the_other_precision_is_not_trusted(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    _build(tmp_path / "v", ["a", "b"], _unit(rng, 2))
    with pytest.raises(IndexCorrupt, match="kind"):
        ExactVectorIndex(tmp_path / "v", embedder_id="e", dim=16, half=True)


def test_a_half_precision_graph_picks_candidates_and_the_log_scores_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    rng = np.random.default_rng(12)
    vecs = _unit(rng, 300)
    ids = [f"r{i}" for i in range(300)]
    tv = TieredVectorIndex.rebuild_from(
        tmp_path / "v", zip(ids, vecs, strict=True), embedder_id="e", dim=16, half=True
    )
    tv = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100, half=True)
    assert tv.uses_graph
    q = vecs[3] * 0.8 + vecs[4] * 0.2
    assert tv.search(q, 10) == tv.exact.search(q, 10)  # same ids, and the exact scan's scores bit for bit
    tv.close()
    meta = json.loads((tmp_path / "v" / "hnsw.json").read_text())
    assert meta["dtype"] == "f16"
    meta["dtype"] = "f32"  # a graph saved at another precision is rebuilt from the log, not loaded
    (tmp_path / "v" / "hnsw.json").write_text(json.dumps(meta))
    with caplog.at_level(logging.INFO, logger="graphrecall.index.vector"):
        again = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100, half=True)
    assert again.uses_graph and again.search(q, 10) == tv.exact.search(q, 10)
    said = [r for r in caplog.records if "rebuilding its HNSW graph" in r.getMessage()]
    assert [(r.levelno, "f16 vectors (it was saved with f32)" in r.getMessage()) for r in said] == [
        (logging.INFO, True)
    ]  # an upgrade, said once, not a warning of damage
    assert json.loads((tmp_path / "v" / "hnsw.json").read_text())["dtype"] == "f16"


@pytest.mark.parametrize(("half", "rows"), [(False, 300), (True, 300), (True, 9_000)])
def test_a_saved_graph_leaves_its_vectors_to_the_log_and_opens_to_the_same_graph(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, half: bool, rows: int
) -> None:
    """usearch saves each row's vector before the graph's links; the log holds the same rows, so the file keeps the
    links only and opening puts the vectors back: the same graph, not a rebuild. 9,000 rows: the graph is extended
    on several threads past ``ONE_THREAD_BELOW``, which fills its slots out of the log's order."""
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    rng = np.random.default_rng(13)
    vecs = _unit(rng, rows)
    ids = [f"r{i}" for i in range(rows)]
    TieredVectorIndex.rebuild_from(
        tmp_path / "v", zip(ids[:4_500], vecs[:4_500], strict=True), embedder_id="e", dim=16, half=half
    )
    tv = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100, half=half)
    tv.add(ids[4_500:], vecs[4_500:])
    whole = len(tv._graph.save())
    tv.close()
    meta = json.loads((tmp_path / "v" / "hnsw.json").read_text())
    assert meta["vectors"] == "log" and meta["rows"] == rows
    assert _named(tmp_path / "v", "graph").stat().st_size == whole - 8 - rows * 16 * 2
    assert _named(tmp_path / "v", "slots").stat().st_size == rows * 4
    with caplog.at_level(logging.INFO, logger="graphrecall.index.vector"):
        again = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100, half=half)
    assert again.uses_graph and "rebuilding" not in caplog.text
    assert bytes(again._graph.save()) == bytes(tv._graph.save())  # vectors and links, byte for byte
    for q in _unit(rng, 20):
        assert again.search(q, 10) == tv.search(q, 10)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("crc32", "the log's rows are not the vectors it was saved with"),
        ("links_crc32", "{graph} is not the file its meta was saved with"),
        ("slots", "{slots} names 149 rows, the graph covers 150"),
    ],
)
def test_a_graph_saved_apart_whose_parts_do_not_match_is_rebuilt_before_usearch_reads_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str, said: str
) -> None:
    """The log's rows, the slots and the links of a graph saved apart are checked before they are put together: a
    kill between the renames of a save, or a damaged file, rebuilds the graph from the log."""
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    vecs = _saved_graph(tmp_path / "v", seed=14, rows=150)
    meta = json.loads((tmp_path / "v" / "hnsw.json").read_text())
    said = said.format(**meta["files"])
    if damage == "slots":
        slots = _named(tmp_path / "v", "slots")
        slots.write_bytes(slots.read_bytes()[:-4])
    else:
        (tmp_path / "v" / "hnsw.json").write_text(json.dumps(meta | {damage: meta[damage] ^ 1}))
    again = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100)
    assert f"rebuilding its HNSW graph from the log ({said})" in caplog.text
    assert again.uses_graph and again.search(vecs[5], 1)[0][0] == "r5"


def test_a_graph_saved_with_its_vectors_still_opens_and_is_saved_apart_next_time(tmp_path: Path) -> None:
    """What an earlier release saved: the whole usearch file, and no "vectors" in its meta."""
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    rng = np.random.default_rng(15)
    vecs = _unit(rng, 200)
    ids = [f"r{i}" for i in range(200)]
    TieredVectorIndex.rebuild_from(tmp_path / "v", zip(ids, vecs, strict=True), embedder_id="e", dim=16)
    tv = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100)
    tv._graph.save(str(tmp_path / "v" / "hnsw.usearch"))
    (tmp_path / "v" / "hnsw.json").write_text(json.dumps({"rows": 200, "dim": 16, "dtype": "f16"}))
    old = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100, persist_every=10)
    assert bytes(old._graph.save()) == bytes(tv._graph.save())
    old.add(["n"] + [f"n{i}" for i in range(10)], _unit(rng, 11))  # past persist_every: saved again
    assert json.loads((tmp_path / "v" / "hnsw.json").read_text())["vectors"] == "log"
    assert _graph_files_on_disk(tmp_path / "v") == _files_the_meta_names(tmp_path / "v")


def test_a_graph_whose_vectors_are_not_the_logs_rows_is_saved_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were usearch to save other vectors than the log's rows (another format, another rounding), the graph is saved
    as usearch writes it, and the slots of an earlier save apart go."""
    from graphrecall.index import TieredVectorIndex, vector

    pytest.importorskip("usearch")
    rng = np.random.default_rng(16)
    vecs = _unit(rng, 200)
    ids = [f"r{i}" for i in range(200)]
    TieredVectorIndex.rebuild_from(tmp_path / "v", zip(ids, vecs, strict=True), embedder_id="e", dim=16)
    tv = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100)
    slots = _named(tmp_path / "v", "slots")
    assert slots.exists()
    monkeypatch.setattr(vector, "_slot_keys", lambda saved, mat: None)
    tv._persist()
    meta = json.loads((tmp_path / "v" / "hnsw.json").read_text())
    assert "vectors" not in meta and list(meta["files"]) == ["graph"]
    assert not slots.exists()
    assert _named(tmp_path / "v", "graph").stat().st_size == len(tv._graph.save())
    again = TieredVectorIndex(tmp_path / "v", embedder_id="e", dim=16, threshold=100)
    assert bytes(again._graph.save()) == bytes(tv._graph.save())


@pytest.mark.parametrize("whole", [False, True])
def test_a_save_killed_before_its_meta_leaves_the_saved_graph_to_load_and_its_files_go_next_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    """Each save writes files of its own number and renames the meta last, so a save stopped before that rename
    (here: the rename fails, which leaves on disk what a kill there leaves) leaves the graph saved before it whole:
    it loads, nothing is rebuilt. Before 2026-12-05 every save wrote the same two names, and a kill between their
    renames rebuilt the graph. The files of the stopped save are deleted by the next save. ``whole``: the stopped
    save is one usearch writes whole (its vectors not the log's), the kind of file that overwrote the links."""
    from graphrecall.index import TieredVectorIndex, vector

    pytest.importorskip("usearch")
    d = tmp_path / "v"
    vecs = _saved_graph(d, seed=17, rows=150)
    before = _graph_files_on_disk(d)
    tv = TieredVectorIndex(d, embedder_id="e", dim=16, threshold=100)
    tv.add([f"n{i}" for i in range(30)], _unit(np.random.default_rng(18), 30))
    if whole:
        monkeypatch.setattr(vector, "_slot_keys", lambda saved, mat: None)
    replace = vector.os.replace

    def killed_at_the_meta(src: object, dst: object) -> None:
        if Path(str(dst)).name == "hnsw.json":
            raise KeyboardInterrupt("killed")
        replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(vector.os, "replace", killed_at_the_meta)
    with pytest.raises(KeyboardInterrupt):
        tv._persist()
    monkeypatch.undo()
    left = _graph_files_on_disk(d)
    assert set(before) < set(left)  # the stopped save's files beside the saved graph's, none overwritten
    with caplog.at_level(logging.INFO, logger="graphrecall.index.vector"):
        again = TieredVectorIndex(d, embedder_id="e", dim=16, threshold=100)
    assert "rebuilding" not in caplog.text and again.uses_graph and again._saved == 150
    assert again.search(vecs[5], 1)[0][0] == "r5" and again.count() == 180
    again._persist()
    assert _graph_files_on_disk(d) == _files_the_meta_names(d)


def test_a_graph_saved_apart_under_the_first_names_opens_without_a_rebuild_and_takes_numbered_names(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What the release of 02e3a6e wrote: the links in ``hnsw.usearch``, the slots in ``hnsw.slots``, CRCs and no
    file names in the meta. It opens as the same graph, and its next save leaves only numbered files."""
    from graphrecall.index import TieredVectorIndex

    pytest.importorskip("usearch")
    d = tmp_path / "v"
    _saved_graph(d, seed=19, rows=160)
    meta = json.loads((d / "hnsw.json").read_text())
    _named(d, "graph").rename(d / "hnsw.usearch")
    _named(d, "slots").rename(d / "hnsw.slots")
    first = {k: v for k, v in meta.items() if k not in ("files", "save")}
    (d / "hnsw.json").write_text(json.dumps(first))
    with caplog.at_level(logging.INFO, logger="graphrecall.index.vector"):
        old = TieredVectorIndex(d, embedder_id="e", dim=16, threshold=100)
    assert "rebuilding" not in caplog.text and old.uses_graph and old._saved == 160
    old._persist()
    meta = json.loads((d / "hnsw.json").read_text())
    assert meta["vectors"] == "log" and meta["files"] == {"graph": "hnsw.1.links", "slots": "hnsw.1.slots"}
    assert _graph_files_on_disk(d) == ["hnsw.1.links", "hnsw.1.slots", "hnsw.json"]
    again = TieredVectorIndex(d, embedder_id="e", dim=16, threshold=100)
    assert bytes(again._graph.save()) == bytes(old._graph.save())


def test_a_save_whose_cleanup_fails_after_its_meta_counts_as_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The save takes effect at its meta's rename: an error after it (the directory's fsync, a delete) leaves the
    index knowing the new save, so the next save writes other names than the ones that meta names."""
    from graphrecall.index import TieredVectorIndex, vector

    pytest.importorskip("usearch")
    d = tmp_path / "v"
    _saved_graph(d, seed=20, rows=150)
    tv = TieredVectorIndex(d, embedder_id="e", dim=16, threshold=100)
    before = json.loads((d / "hnsw.json").read_text())["save"]
    calls = {"n": 0}
    fsync_dir = vector.fsync_dir

    def fails_after_the_meta(path: Path) -> None:
        calls["n"] += 1
        if calls["n"] == 2:  # the first is before the meta's rename, the second after it
            raise OSError(5, "I/O error")
        fsync_dir(path)

    monkeypatch.setattr(vector, "fsync_dir", fails_after_the_meta)
    with pytest.raises(OSError):
        tv._persist()
    monkeypatch.undo()
    named = json.loads((d / "hnsw.json").read_text())
    assert named["save"] == before + 1 and tv._next_save() == before + 2
    tv._persist()
    assert json.loads((d / "hnsw.json").read_text())["save"] == before + 2
    assert _graph_files_on_disk(d) == _files_the_meta_names(d)
