"""Vector index beside a scope's database: an exact scan over an append-only file of float32 rows.

Why exact: measured against Kuzu HNSW and usearch on the same rounds (``benchmarks/perf/indexes.py``,
docs/benchmarks.md), a normalized float32 matrix with one matrix-vector product and an ``argpartition`` is the
fastest up to tens of thousands of rounds, has recall 1 by definition, costs 1.5 KB per round on disk with no fixed
floor, and a write is one fsync'd append. Above that size an approximate index pays off (see the benchmark).

Precision: an index of half-precision vectors (``half=True``: rounds and passages, whose Kuzu columns are half
precision, ``store.vectors``) keeps its file in float16, 768 bytes per 384-d row instead of 1,536. In memory its
rows are float32 and scaled back to unit length: rounding moves a vector's norm by ~1e-4, its direction ten times
less, so a search still returns cosine similarities (what Kuzu's exact scan and the write log's tail compute over
the same rounded values) rather than dot products off by the norm. Rows added to it are rounded to half precision
first, so the file and memory always agree.

Files: ``vectors.f32`` or ``vectors.f16`` (raw rows, appended, in the index's precision) and ``log.txt`` (one line
per operation: ``+id`` for a row appended to the vectors file in the same order, ``-id`` for a deletion). Replaying
the log gives each id's latest row; a re-added id (a replaced round) simply points at its new row. A write appends the rows, fsyncs, then appends the log lines
and fsyncs: a kill -9 in between leaves rows without log lines (or a torn last line), which opening cuts off, and
none of that was acknowledged.

Compaction (``compact``, run by maintenance once the dead share passes ``Settings.compact_free_fraction``): the file
keeps every row ever appended, deleted and replaced ones too, so a churned scope's index grows with its operations.
A compaction writes the live rows (their bytes as on disk, in their order) and one ``+id`` line each into a fresh
directory beside the index, with the current manifest, fsyncs them, then swaps the directories (``replace_dir``).
Invariant: a kill -9 at any point leaves either the old index or the new one at the index's path, each complete
and consistent with its manifest's mark (both hold the same live rows under the same mark), never a mix: before the
swap the fresh directory is a stray beside it (removed by the next open or compaction), between the swap's two
renames the old one is put back on open (``restore_dir``), after it the new one is in place. Searches during a
compaction read a published view (``_View``) of one generation; the compacted rows are published as a new one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from graphrecall.index.manifest import (
    IndexCorrupt,
    Manifest,
    fsync_dir,
    read_manifest,
    replace_dir,
    restore_dir,
    write_manifest,
    write_synced,
)

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
VECTORS = "vectors.f32"
HALF_VECTORS = "vectors.f16"
LOG = "log.txt"
COMPACTING = ".compact"  # suffix of the directory a compaction writes beside the index before the swap
OnStep = Callable[[str], None]


class VectorIndex(Protocol):
    """What the retriever needs from a vector index: cosine top-k over normalized vectors, durable appends."""

    def search(self, vec: F32, k: int) -> list[tuple[str, float]]: ...
    def vectors(self, ids: Iterable[str]) -> dict[str, F32]: ...
    def add(self, ids: Sequence[str], vecs: F32, *, mark: str | None = None) -> None: ...
    def delete(self, ids: Sequence[str], *, mark: str | None = None) -> None: ...
    def count(self) -> int: ...
    @property
    def mark(self) -> str | None: ...
    def close(self) -> None: ...


class _View(NamedTuple):
    """What a reader sees, published as one attribute so that it is of one generation: the matrix, its live mask,
    the id of each row and each live id's row. Appends extend ``ids`` and ``row`` in place and publish a longer
    view; a compaction renumbers the rows, so it publishes new ones under the next ``gen``."""

    mat: F32
    live: npt.NDArray[np.bool_]
    ids: list[str]
    row: dict[str, int]
    gen: int


def _layout(half: bool) -> tuple[str, str, type[np.floating[Any]]]:
    """(manifest kind, vectors file, dtype on disk) of an index of either precision."""
    return ("exact-f16", HALF_VECTORS, np.float16) if half else ("exact-f32", VECTORS, np.float32)


class ExactVectorIndex:
    """Exact cosine top-k over an append-only file. Thread-safe: one writer at a time, searches on a snapshot."""

    KIND = "exact-f32"  # "exact-f16" for an index of half-precision vectors (``_layout``)
    VERSION = 1

    def __init__(self, directory: Path, *, embedder_id: str, dim: int, half: bool = False) -> None:
        """Open an existing index; ``IndexCorrupt`` when it cannot be trusted (then ``rebuild_from``); one of the
        other precision is not trusted either (a store whose vectors changed precision rebuilds it)."""
        self.directory, self.dim, self.half = directory, dim, half
        kind, self._file, self._disk = _layout(half)
        self._expected = Manifest(kind=kind, version=self.VERSION, embedder_id=embedder_id, dim=dim)
        restore_dir(directory)
        shutil.rmtree(_compacting(directory), ignore_errors=True)  # a compaction killed before its swap
        self._manifest = read_manifest(directory, self._expected)
        self._lock = threading.Lock()
        self._gen = 0
        self._load()

    # -- opening -----------------------------------------------------------------------------------------------
    def _load(self) -> None:
        vec_path, log_path = self.directory / self._file, self.directory / LOG
        try:
            raw = np.fromfile(vec_path, dtype=self._disk)
            text = log_path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise IndexCorrupt(f"{self.directory}: {e}") from e
        lines = text.split("\n")
        complete, torn = (
            lines[:-1],
            lines[-1],
        )  # the part after the last newline is "" or an unacknowledged line
        if any(not ln or ln[0] not in "+-" for ln in complete):
            raise IndexCorrupt(f"{self.directory}: {LOG} has a malformed line")
        appended = sum(1 for ln in complete if ln[0] == "+")
        rows_on_disk = raw.size // self.dim
        if rows_on_disk < appended:
            raise IndexCorrupt(
                f"{self.directory}: {LOG} names {appended} rows, {self._file} holds {rows_on_disk}"
            )
        if torn or raw.size != appended * self.dim:  # an interrupted write: cut back to what was acknowledged
            log.warning(
                "vector index %s: cut an interrupted write (%d unlogged rows)",
                self.directory,
                rows_on_disk - appended,
            )
            with open(vec_path, "r+b") as f:
                f.truncate(appended * self.dim * np.dtype(self._disk).itemsize)
                os.fsync(f.fileno())
            with open(log_path, "r+b") as f:
                f.truncate(len("\n".join(complete).encode()) + (1 if complete else 0))
                os.fsync(f.fileno())
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        for ln in complete:
            rid = ln[1:]
            if ln[0] == "+":
                self._row[rid] = len(self._ids)
                self._ids.append(rid)
            else:
                self._row.pop(rid, None)
        self._buf: F32 = self._in_memory(raw[: appended * self.dim].reshape(appended, self.dim))
        self._live_buf = np.zeros(appended, dtype=bool)
        self._live_buf[list(self._row.values())] = True
        self._publish(appended)

    def _publish(self, rows: int) -> None:
        """Make the first ``rows`` rows what readers see (one attribute store: a reader gets all of it or none)."""
        self._view = _View(self._buf[:rows], self._live_buf[:rows], self._ids, self._row, self._gen)

    def _in_memory(self, rows: npt.NDArray[Any]) -> F32:
        """Rows as the index holds them in memory: float32; of a half-precision index, also of unit length."""
        out: F32 = rows.astype(np.float32)
        if self.half and len(out):
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _reserve(self, rows: int) -> None:
        """Grow the row buffers geometrically, so an append costs O(rows appended), not a copy of the matrix."""
        if rows <= len(self._buf):
            return
        cap = max(rows, 2 * len(self._buf), 1024)
        buf = np.empty((cap, self.dim), dtype=np.float32)
        live = np.zeros(cap, dtype=bool)
        n = len(self._ids)
        buf[:n], live[:n] = self._buf[:n], self._live_buf[:n]
        self._buf, self._live_buf = buf, live

    @classmethod
    def rebuild_from(
        cls,
        directory: Path,
        rows: Iterable[tuple[str, F32]],
        *,
        embedder_id: str,
        dim: int,
        mark: str | None = None,
        half: bool = False,
    ) -> ExactVectorIndex:
        """Write a fresh index from (id, normalized vector) rows (read from Kuzu) and put it in place atomically."""
        kind, name, disk = _layout(half)
        tmp = directory.with_name(directory.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with open(tmp / name, "wb") as fv, open(tmp / LOG, "w") as fl:
            for rid, vec in rows:
                _check_id(rid)
                v = np.asarray(vec, dtype=np.float32).reshape(-1)
                if v.shape[0] != dim:
                    raise ValueError(f"row {rid!r}: vector has {v.shape[0]} dimensions, the index {dim}")
                fv.write(v.astype(disk).tobytes())
                fl.write(f"+{rid}\n")
            for f in (fv, fl):
                f.flush()
                os.fsync(f.fileno())
        write_manifest(
            tmp, Manifest(kind=kind, version=cls.VERSION, embedder_id=embedder_id, dim=dim, mark=mark)
        )
        replace_dir(tmp, directory)
        return cls(directory, embedder_id=embedder_id, dim=dim, half=half)

    # -- reading -----------------------------------------------------------------------------------------------
    def search(self, vec: F32, k: int) -> list[tuple[str, float]]:
        mat, live, ids, _, _ = self._view  # a snapshot: writers append beyond it, in place
        if k <= 0 or not live.any():
            return []
        with _one_blas_thread():
            sims = mat @ np.asarray(vec, dtype=np.float32)
        if not live.all():
            sims = np.where(live, sims, -np.inf)
        k = min(k, int(live.sum()))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(ids[i], float(sims[i])) for i in top]

    def vectors(self, ids: Iterable[str]) -> dict[str, F32]:
        """The stored (normalized) vector of each id that has one."""
        # Not a copy of the whole id map (~ms at 100k rows, on every call): each ``get`` is atomic, and a row a
        # writer added after this snapshot of the matrix lies beyond it and is left out, as in ``search``.
        mat, _, _, row, _ = self._view
        return {rid: mat[r].copy() for rid in ids if (r := row.get(rid)) is not None and r < len(mat)}

    def count(self) -> int:
        return len(self._row)

    @property
    def mark(self) -> str | None:
        return self._manifest.mark

    # -- writing -----------------------------------------------------------------------------------------------
    def add(self, ids: Sequence[str], vecs: F32, *, mark: str | None = None) -> None:
        """Append rows durably (an id already present is replaced); returns once they are fsync'd. A half-precision
        index rounds them first (what its file keeps is what it searches)."""
        v = np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(ids), -1) if len(ids) else None
        if v is None:
            return
        if v.shape[1] != self.dim:
            raise ValueError(f"vectors have {v.shape[1]} dimensions, the index {self.dim}")
        for rid in ids:
            _check_id(rid)
        stored = v.astype(self._disk)
        if self.half:
            v = self._in_memory(stored)
        with self._lock:
            _append(self.directory / self._file, stored.tobytes())
            _append(self.directory / LOG, "".join(f"+{r}\n" for r in ids).encode())
            n, m = len(self._ids), len(ids)
            self._reserve(n + m)
            self._buf[n : n + m] = v  # beyond every published view: searches in flight do not see it
            self._live_buf[n : n + m] = True
            for j, rid in enumerate(ids):
                prev = self._row.get(rid)
                if prev is not None:  # replaced (or repeated in this batch): the older row goes dark
                    self._live_buf[prev] = False
                self._row[rid] = n + j
            self._ids.extend(ids)
            self._publish(n + m)
            self._set_mark(mark)

    def delete(self, ids: Sequence[str], *, mark: str | None = None) -> None:
        with self._lock:
            gone = [r for r in ids if r in self._row]
            if gone:
                _append(self.directory / LOG, "".join(f"-{r}\n" for r in gone).encode())
                for r in gone:
                    self._live_buf[self._row.pop(r)] = False
            self._set_mark(mark)

    def _set_mark(self, mark: str | None) -> None:
        if mark is not None and mark != self._manifest.mark:
            self._manifest = self._manifest.model_copy(update={"mark": mark})
            write_manifest(self.directory, self._manifest, durable=False)  # rows and log lines were fsync'd

    # -- compaction --------------------------------------------------------------------------------------------
    def dead_fraction(self) -> float:
        """The share of the file's rows that are not live (deleted, or replaced by a later row of their id)."""
        n = len(self._ids)
        return 0.0 if n == 0 else 1.0 - len(self._row) / n

    def compact(self, *, on_step: OnStep | None = None) -> bool:
        """Rewrite the file with its live rows only (module docstring: the swap and its invariant); whether it did
        (not when no row is dead). Searches go on meanwhile on the published view; writers wait on the lock.

        The rows are copied as the file holds them (not from memory: a half-precision index's memory is scaled to
        unit length), and kept in their order, so a search returns the same ids and scores after as before.
        ``on_step`` is called with "written" (the fresh directory complete, not swapped yet) and "aside" (between
        the swap's two renames): tests crash there."""
        with self._lock:
            n = len(self._ids)
            if len(self._row) == n:
                return False
            keep = np.flatnonzero(self._live_buf[:n])
            ids = [self._ids[i] for i in keep]
            tmp = _compacting(self.directory)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            on_disk = np.memmap(self.directory / self._file, dtype=self._disk, mode="r", shape=(n, self.dim))
            try:
                _write_rows(tmp, self._file, np.ascontiguousarray(on_disk[keep]).tobytes(), ids)
            finally:
                del on_disk
            # durable: the fresh directory is whole, under the index's mark, before it is swapped in
            write_manifest(tmp, self._manifest)
            if on_step is not None:
                on_step("written")
            replace_dir(tmp, self.directory, on_step=on_step)
            self._buf, self._live_buf = self._buf[keep], np.ones(len(keep), dtype=bool)
            self._ids, self._row = ids, {rid: j for j, rid in enumerate(ids)}
            self._gen += 1
            self._publish(len(ids))
            return True

    def close(self) -> None:
        pass


def _compacting(directory: Path) -> Path:
    return directory.with_name(directory.name + COMPACTING)


def _write_rows(directory: Path, name: str, rows: bytes, ids: Sequence[str]) -> None:
    """A vectors file and its log (one ``+id`` line per row), both fsync'd."""
    with open(directory / name, "wb") as fv, open(directory / LOG, "w") as fl:
        fv.write(rows)
        fl.write("".join(f"+{rid}\n" for rid in ids))
        for f in (fv, fl):
            f.flush()
            os.fsync(f.fileno())


_controller: Any = None


def _one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """Run the scan on one BLAS thread. Why: a search serves one user among many, and on a busy 2-core machine
    OpenBLAS's second thread turned a 10k x 384 scan from ~1 ms into ~35-50 ms (waiting for a descheduled
    thread; measured). ``threadpoolctl`` switches it for the call (~12 us); without it the scan runs as is."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        except ImportError:
            _controller = False
    if _controller is False:
        return contextlib.nullcontext()
    cm: contextlib.AbstractContextManager[Any] = _controller.limit(limits=1, user_api="blas")
    return cm


def _check_id(rid: str) -> None:
    if not rid or "\n" in rid:
        raise ValueError(f"index ids must be non-empty and hold no newline: {rid!r}")


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


GRAPH = "hnsw.usearch"  # the graph file of a meta that names none (saved by a release before 2026-12-05)
GRAPH_META = "hnsw.json"
GRAPH_DTYPE = "f16"  # of every graph, whatever the log's precision (``TieredVectorIndex``)
VECTORS_IN_LOG = "log"  # hnsw.json's "vectors": the graph file was saved without them (``TieredVectorIndex``)
GRAPH_SLOTS = "hnsw.slots"  # of a graph saved apart: the log row of each of its slots, uint32


def _graph_files(meta: dict[str, Any]) -> tuple[str, str]:
    """(graph file, slots file) that a ``hnsw.json`` names: each save writes its own (``hnsw.<n>.links`` and
    ``hnsw.<n>.slots``, or ``hnsw.<n>.usearch`` saved whole), so the files of the save it describes are never
    overwritten by the next one before the meta that names them is; a meta without names is an earlier release's."""
    files = meta.get("files") or {}
    return str(files.get("graph", GRAPH)), str(files.get("slots", GRAPH_SLOTS))


PICK_MARGIN = 8  # candidates a graph search takes beyond k, for the log's similarity to choose among
# A graph that starts with fewer rows than this is built on one thread. Concurrent inserts into a near-empty graph
# link it poorly (``benchmarks/perf/graph_threads.py``, docs/benchmarks.md): built on all cores, 1,000 rows of 384-d
# missed one of the exact top 5 in 1.3% of queries and 180 rows of 16-d in 2.4%, on one thread in none; from 5,000
# rows of 384-d on, all cores recall as well (0.3% / 0.7% at 5k, 2.4% / 3.3% at 20k) in half the time. The default
# threshold (20k rows) never builds one this small; a scope configured with a low one does.
ONE_THREAD_BELOW = 4_096


def _matrix_header(rows: int, dim: int) -> bytes:
    """What usearch (2.x, file format v2) saves before a float16 graph's links: the row count and the bytes per row
    as two little-endian uint32; then the rows, in float16, in the order of usearch's slots."""
    return np.array([rows, dim * 2], dtype="<u4").tobytes()


ROWS_PER_STEP = 4096
"""Rows converted, hashed or compared at a time when a graph is saved or opened apart from its vectors: a float16
copy of every row at once was ~77 MB each at 100,000 rows of 384 dimensions (a save peaked at ~285 MB)."""


def _slot_keys(saved: npt.NDArray[np.float16], mat: F32) -> npt.NDArray[np.uint32] | None:
    """The log row (graph key) whose float16 vector each of usearch's slots holds, or None when some slot holds a
    vector of no log row. ``mat``: the log's rows (at least as many as slots), converted to float16 a step at a
    time. Why needed: a graph extended on several threads fills its slots in no fixed order, and its keys come back
    in hash order, so the slots are matched to the rows by their bytes (a hash of each row, then compared in full;
    rows with equal bytes may pair either way, which saves the same bytes)."""
    rows, dim = saved.shape
    if len(mat) < rows or mat.shape[1] != dim:
        return None
    mat = mat[:rows]  # a view: rows appended since the graph was extended are none of its slots
    weights = np.random.default_rng(0).integers(1, 2**63, size=dim // 4, dtype=np.uint64) | 1

    def hashed(part: Callable[[int, int], npt.NDArray[np.float16]]) -> npt.NDArray[np.uint64]:
        out = np.empty(rows, dtype=np.uint64)
        for at in range(0, rows, ROWS_PER_STEP):
            words = np.ascontiguousarray(part(at, at + ROWS_PER_STEP)[:, : len(weights) * 4]).view(np.uint64)
            with np.errstate(over="ignore"):
                out[at : at + len(words)] = (words * weights).sum(axis=1, dtype=np.uint64)
        return out

    by_slot = np.argsort(hashed(lambda a, b: saved[a:b]), kind="stable")
    by_row = np.argsort(hashed(lambda a, b: mat[a:b].astype(np.float16)), kind="stable")
    keys = np.empty(rows, dtype=np.uint32)
    keys[by_slot] = by_row
    for at in range(0, rows, ROWS_PER_STEP):
        if not np.array_equal(
            mat[keys[at : at + ROWS_PER_STEP]].astype(np.float16), saved[at : at + ROWS_PER_STEP]
        ):
            return None
    return keys


def _half_rows(mat: F32, keys: npt.NDArray[np.uint32], into: memoryview) -> None:
    """Write ``mat[keys]`` in float16 into ``into``, a few thousand rows at a time (not a float32 copy of all)."""
    out = np.frombuffer(into, dtype=np.float16).reshape(len(keys), mat.shape[1])
    for at in range(0, len(keys), ROWS_PER_STEP):
        out[at : at + ROWS_PER_STEP] = mat[keys[at : at + ROWS_PER_STEP]]


class TieredVectorIndex:
    """Exact scan while a scope is small; an HNSW graph (usearch) over the same rows once it is large.

    Why tiers: the exact scan reads every vector per query, which is the fastest engine up to tens of thousands of
    rows and too slow at 100k (docs/benchmarks.md); usearch answers 100k in ~1-2 ms, but its file must be rewritten
    whole to persist. So the append-only log of ``ExactVectorIndex`` stays the durable write path (one fsync'd
    append per write), the graph is kept in memory and extended on every write, and it is saved beside the log
    (``hnsw.usearch`` + ``hnsw.json``: how many log rows it covers) only every ``persist_every`` rows. On open, a
    saved graph is loaded and the log rows after it are added; a missing or unreadable graph is rebuilt from the
    log (not from Kuzu: the log holds the same rows). Graph keys are log row numbers; rows deleted or replaced
    since are filtered out with the log's live mask.

    The graph only picks the candidates: their similarities are computed again from the log's rows (as the exact
    scan computes them), so a hit's score does not depend on the graph's own precision. So every graph keeps its
    vectors in float16 (``dtype`` "f16"), whatever the log's precision: on 20,000 MiniLM fact vectors and real
    questions it found the exact top 150 as often as a float32 graph (0.937 against 0.935) in 0.97 ms instead of
    1.54, and its file is about half (768 of its ~1,050 bytes per 384-d row were the vector). The time matters more
    than its size says: usearch holds the GIL while it searches, so every other thread of the search waits for it
    (docs/benchmarks.md, "The graph lists before the query is embedded"). A graph saved in float32 by an earlier
    version is rebuilt from the log on open, once.

    A saved graph leaves its vectors to the log: usearch writes each row's float16 vector before the graph's links
    (768 of the ~1,044 bytes of a 384-d row), and the log holds the same rows, so ``hnsw.<n>.links`` keeps the links
    only, ``hnsw.<n>.slots`` the log row of each slot (4 bytes a row: a graph extended on several threads fills its
    slots in no fixed order), and opening puts the vectors back in front of the links (``_with_vectors``; a CRC in
    ``hnsw.json`` checks them, a mismatch rebuilds the graph). Two graphs a round: 1.5 KB a round less
    (docs/benchmarks.md, "Bytes per round"). A graph saved whole, by an earlier release, is loaded as it is and
    saved apart the next time.

    Invariant: the files ``hnsw.json`` names are never written again. Each save writes files of the next number
    ``n`` (``_next_save``, ``_graph_files``), renames the meta over the old one, and only then deletes every other
    ``hnsw.*`` file; so a kill at any point of a save leaves the graph of the save before it loadable, and the
    stopped save's files are deleted by the next one.

    Compaction (``compact``) renumbers the log's rows, so the graph, keyed by row number, is dropped with the old
    directory and built again from the compacted rows (then saved): seconds at the threshold's 20k rows, in a
    maintenance pass that finds a third of the rows dead. Searches meanwhile scan exactly: a search reads the
    published (graph, rows covered, generation) and uses the graph only with the exact view of that generation.
    """

    def __init__(
        self,
        directory: Path,
        *,
        embedder_id: str,
        dim: int,
        threshold: int = 20_000,
        persist_every: int = 5_000,
        connectivity: int = 32,
        expansion_search: int = 300,
        half: bool = False,
    ) -> None:
        self.exact = ExactVectorIndex(directory, embedder_id=embedder_id, dim=dim, half=half)
        self.directory, self.dim = directory, dim
        self._dtype = GRAPH_DTYPE
        self.threshold, self.persist_every = threshold, persist_every
        self._connectivity, self._expansion_search = connectivity, expansion_search
        self._graph: Any = None
        self._covered = 0  # log rows in the in-memory graph
        self._pub: tuple[Any, int, int] | None = None  # (graph, covered, generation) as searches see it
        self._saved = 0  # log rows in the saved graph
        self._lock = threading.Lock()
        if self.exact.count() >= threshold:
            with self._lock:
                self._open_graph()

    @classmethod
    def rebuild_from(
        cls,
        directory: Path,
        rows: Iterable[tuple[str, F32]],
        *,
        embedder_id: str,
        dim: int,
        mark: str | None = None,
        half: bool = False,
    ) -> TieredVectorIndex:
        ExactVectorIndex.rebuild_from(directory, rows, embedder_id=embedder_id, dim=dim, mark=mark, half=half)
        return cls(directory, embedder_id=embedder_id, dim=dim, half=half)

    def _new_graph(self) -> Any:
        try:
            from usearch.index import Index
        except ImportError as e:
            raise ImportError(
                "a large vector index needs usearch (a dependency of graphrecall): pip install usearch"
            ) from e
        return Index(
            ndim=self.dim,
            metric="cos",
            dtype=self._dtype,
            connectivity=self._connectivity,
            expansion_add=128,
            expansion_search=self._expansion_search,
        )

    def _open_graph(self) -> None:
        graph, covered = self._new_graph(), 0
        try:
            meta = json.loads((self.directory / GRAPH_META).read_text())
            graph_file, slots_file = _graph_files(meta)
            covered = int(meta["rows"])
            held = len(self.exact._view.mat)
            if not 0 < covered <= held or meta.get("dim") != self.dim:
                raise ValueError(f"covers {covered} rows, the log holds {held}")
            saved_as = meta.get("dtype", "f32")
            if saved_as == self._dtype and meta.get("vectors") == VECTORS_IN_LOG:
                crcs = int(meta["crc32"]), int(meta["links_crc32"])
                graph.load(self._with_vectors(covered, crcs, graph_file, slots_file))
                if len(graph) != covered:
                    raise ValueError(f"holds {len(graph)} vectors, its meta says {covered}")
            elif saved_as == self._dtype:  # saved whole: by an earlier release, or its vectors did not match
                graph.load(str(self.directory / graph_file))
                if len(graph) != covered:
                    raise ValueError(f"holds {len(graph)} vectors, its meta says {covered}")
            else:  # a graph saved by an earlier release (float32): an upgrade, not damage; rebuilt once, here
                log.info(
                    "vector index %s: rebuilding its HNSW graph with %s vectors (it was saved with %s)",
                    self.directory,
                    self._dtype,
                    saved_as,
                )
                covered = 0
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            if (self.directory / GRAPH_META).exists() or (self.directory / GRAPH).exists():
                log.warning("vector index %s: rebuilding its HNSW graph from the log (%s)", self.directory, e)
            graph, covered = self._new_graph(), 0
        self._graph, self._covered, self._saved = graph, covered, covered
        self._catch_up()

    def _catch_up(self) -> None:
        view = self.exact._view
        mat = view.mat
        if self._covered < len(mat):
            keys = np.arange(self._covered, len(mat), dtype=np.uint64)
            threads = 1 if self._covered < ONE_THREAD_BELOW else 0  # 0: all cores
            self._graph.add(keys, mat[self._covered :], threads=threads)
            self._covered = len(mat)
        self._pub = (self._graph, self._covered, view.gen)
        if self._covered - self._saved >= self.persist_every or (self._saved == 0 and self._covered):
            self._persist()

    def _with_vectors(
        self, covered: int, crcs: tuple[int, int], graph_file: str, slots_file: str
    ) -> npt.NDArray[np.uint8]:
        """The usearch file a graph saved apart was (``_persist``): its vectors put back from the log's rows in the
        order of its slots (``slots_file``), then its links (``graph_file``), each part checked against the CRC saved
        with it (``crcs``: vectors, links) before usearch reads any of it: files damaged, or not the ones the meta
        was written with (a graph saved by an earlier release, which wrote every save under the same names)."""
        keys = np.fromfile(self.directory / slots_file, dtype="<u4")
        if len(keys) != covered or (covered and int(keys.max()) >= covered):
            raise ValueError(f"{slots_file} names {len(keys)} rows, the graph covers {covered}")
        links = (self.directory / graph_file).read_bytes()
        crc, links_crc = crcs
        if zlib.crc32(links) != links_crc:
            raise ValueError(f"{graph_file} is not the file its meta was saved with")
        header = _matrix_header(covered, self.dim)
        end = len(header) + covered * self.dim * 2
        whole = np.empty(end + len(links), dtype=np.uint8)  # every byte written below: no zeroing of ~100 MB
        view = whole.data
        view[: len(header)] = header
        _half_rows(self.exact._view.mat, keys, view[len(header) : end])
        if zlib.crc32(view[:end]) != crc:
            raise ValueError("the log's rows are not the vectors it was saved with")
        view[end:] = links
        return whole

    def _persist(self) -> None:
        """Save the graph apart from the vectors the log holds (class docstring) when every vector usearch wrote is
        one of the log's rows, byte for byte; else whole, as usearch writes it."""
        blob = memoryview(self._graph.save())
        rows = self._covered
        header = _matrix_header(rows, self.dim)
        end = len(header) + rows * self.dim * 2
        keys = None
        if len(blob) > end and blob[: len(header)] == header:
            saved = np.frombuffer(blob, dtype=np.float16, count=rows * self.dim, offset=len(header))
            keys = _slot_keys(saved.reshape(rows, self.dim), self.exact._view.mat)
        save = self._next_save()
        meta: dict[str, Any] = {"rows": rows, "dim": self.dim, "dtype": self._dtype, "save": save}
        if keys is None:
            files = {f"hnsw.{save}.usearch": blob}
            meta["files"] = {"graph": f"hnsw.{save}.usearch"}
        else:
            files = {
                f"hnsw.{save}.links": blob[end:],
                f"hnsw.{save}.slots": memoryview(keys.astype("<u4").tobytes()),
            }
            meta |= {
                "files": {"graph": f"hnsw.{save}.links", "slots": f"hnsw.{save}.slots"},
                "vectors": VECTORS_IN_LOG,
                "crc32": zlib.crc32(blob[:end]),
                "links_crc32": zlib.crc32(blob[end:]),
            }
        # New names: the files the current meta names stay as they are until the meta names these instead; their
        # renames are made durable before the meta's, so no crash keeps a meta that names files it lost.
        for name, data in files.items():
            write_synced(self.directory / name, data, sync_dir=False)
        fsync_dir(self.directory)
        write_synced(self.directory / GRAPH_META, json.dumps(meta), sync_dir=False)
        self._saved = self._covered  # the save took effect: whatever fails below
        fsync_dir(self.directory)
        # Earlier saves' files, and those of a save stopped before its meta.
        for old in self.directory.glob("hnsw.*"):
            if old.name != GRAPH_META and old.name not in files:
                old.unlink(missing_ok=True)

    def _next_save(self) -> int:
        """The number of the next save's files: past every number on disk, the saved graph's own files and any a
        stopped save left, so no save writes a name that a meta on disk may name. Read from the files, not kept: a
        count kept beside them went stale when a save failed after its meta's rename (found by review)."""
        numbers = [0]
        for f in self.directory.glob("hnsw.*.*"):
            number = f.name.split(".")[1]
            if number.isdigit():
                numbers.append(int(number))
        return max(numbers) + 1

    def search(self, vec: F32, k: int) -> list[tuple[str, float]]:
        pub, view = self._pub, self.exact._view  # in this order: a graph is published after its rows
        if pub is None or pub[2] != view.gen:  # no graph, or one of other row numbers (a compaction between)
            return self.exact.search(vec, k)
        graph, covered, _ = pub
        mat, live, ids = view.mat, view.live, view.ids  # rows beyond ``covered`` included
        dead = int(covered - live[:covered].sum())
        q = np.asarray(vec, dtype=np.float32).reshape(-1)
        # A few more than asked: the graph ranks at half precision, so near the k-th place its order may differ
        # from the log's; the log's similarity picks the k among them.
        m = graph.search(q, min(covered, k + dead + PICK_MARGIN))
        keys = [int(key) for key in m.keys if int(key) < len(mat) and live[int(key)]]
        if not keys:
            return []
        sims = mat[keys] @ q  # the exact scan's similarity (``ExactVectorIndex.search``), not the graph's
        order = np.argsort(-sims, kind="stable")[:k]
        return [(ids[keys[i]], float(sims[i])) for i in order]

    def add(self, ids: Sequence[str], vecs: F32, *, mark: str | None = None) -> None:
        self.exact.add(ids, vecs, mark=mark)
        with self._lock:
            if self._graph is not None:
                self._catch_up()
            elif self.exact.count() >= self.threshold:
                self._open_graph()

    def delete(self, ids: Sequence[str], *, mark: str | None = None) -> None:
        self.exact.delete(ids, mark=mark)

    def vectors(self, ids: Iterable[str]) -> dict[str, F32]:
        return self.exact.vectors(ids)

    def count(self) -> int:
        return self.exact.count()

    @property
    def mark(self) -> str | None:
        return self.exact.mark

    @property
    def uses_graph(self) -> bool:
        return self._pub is not None

    def dead_fraction(self) -> float:
        return self.exact.dead_fraction()

    def compact(self, *, on_step: OnStep | None = None) -> bool:
        """Compact the log (``ExactVectorIndex.compact``) and, above the threshold, build the graph again over the
        compacted rows (class docstring); whether anything was rewritten."""
        with self._lock:
            had = self._graph is not None
            self._pub = None  # searches scan exactly until the new graph is published
            done = False
            try:
                done = self.exact.compact(on_step=on_step)
            finally:
                if had and not done:
                    self._pub = (self._graph, self._covered, self.exact._view.gen)
            if not done:
                return False
            self._graph, self._covered, self._saved = None, 0, 0  # its files went with the old directory
            if self.exact.count() >= self.threshold:
                self._open_graph()
            return True

    def close(self) -> None:
        with self._lock:
            if self._graph is not None and self._covered > self._saved:
                self._persist()
