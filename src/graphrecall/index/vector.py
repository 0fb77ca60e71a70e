"""Vector index beside a scope's database: an exact scan over an append-only file of float32 rows.

Why exact: measured against Kuzu HNSW and usearch on the same rounds (``benchmarks/perf/indexes.py``,
docs/benchmarks.md), a normalized float32 matrix with one matrix-vector product and an ``argpartition`` is the
fastest up to tens of thousands of rounds, has recall 1 by definition, costs 1.5 KB per round on disk with no fixed
floor, and a write is one fsync'd append. Above that size an approximate index pays off (see the benchmark).

Files: ``vectors.f32`` (raw rows, appended) and ``log.txt`` (one line per operation: ``+id`` for a row appended to
``vectors.f32`` in the same order, ``-id`` for a deletion). Replaying the log gives each id's latest row; a re-added
id (a replaced round) simply points at its new row. A write appends the rows, fsyncs, then appends the log lines
and fsyncs: a kill -9 in between leaves rows without log lines (or a torn last line), which opening cuts off, and
none of that was acknowledged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from graphrecall.index.manifest import (
    IndexCorrupt,
    Manifest,
    fsync_dir,
    read_manifest,
    replace_dir,
    write_manifest,
)

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
VECTORS = "vectors.f32"
LOG = "log.txt"


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


class ExactVectorIndex:
    """Exact cosine top-k over an append-only file. Thread-safe: one writer at a time, searches on a snapshot."""

    KIND = "exact-f32"
    VERSION = 1

    def __init__(self, directory: Path, *, embedder_id: str, dim: int) -> None:
        """Open an existing index; ``IndexCorrupt`` when it cannot be trusted (then ``rebuild_from``)."""
        self.directory, self.dim = directory, dim
        self._expected = Manifest(kind=self.KIND, version=self.VERSION, embedder_id=embedder_id, dim=dim)
        self._manifest = read_manifest(directory, self._expected)
        self._lock = threading.Lock()
        self._load()

    # -- opening -----------------------------------------------------------------------------------------------
    def _load(self) -> None:
        vec_path, log_path = self.directory / VECTORS, self.directory / LOG
        try:
            raw = np.fromfile(vec_path, dtype=np.float32)
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
                f"{self.directory}: {LOG} names {appended} rows, {VECTORS} holds {rows_on_disk}"
            )
        if torn or raw.size != appended * self.dim:  # an interrupted write: cut back to what was acknowledged
            log.warning(
                "vector index %s: cut an interrupted write (%d unlogged rows)",
                self.directory,
                rows_on_disk - appended,
            )
            with open(vec_path, "r+b") as f:
                f.truncate(appended * self.dim * 4)
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
        self._buf: F32 = raw[: appended * self.dim].reshape(appended, self.dim).copy()
        self._live_buf = np.zeros(appended, dtype=bool)
        self._live_buf[list(self._row.values())] = True
        self._mat, self._live = self._buf, self._live_buf

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
    ) -> ExactVectorIndex:
        """Write a fresh index from (id, normalized vector) rows (read from Kuzu) and put it in place atomically."""
        tmp = directory.with_name(directory.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        n = 0
        with open(tmp / VECTORS, "wb") as fv, open(tmp / LOG, "w") as fl:
            for rid, vec in rows:
                _check_id(rid)
                v = np.asarray(vec, dtype=np.float32).reshape(-1)
                if v.shape[0] != dim:
                    raise ValueError(f"row {rid!r}: vector has {v.shape[0]} dimensions, the index {dim}")
                fv.write(v.tobytes())
                fl.write(f"+{rid}\n")
                n += 1
            for f in (fv, fl):
                f.flush()
                os.fsync(f.fileno())
        write_manifest(
            tmp, Manifest(kind=cls.KIND, version=cls.VERSION, embedder_id=embedder_id, dim=dim, mark=mark)
        )
        replace_dir(tmp, directory)
        return cls(directory, embedder_id=embedder_id, dim=dim)

    # -- reading -----------------------------------------------------------------------------------------------
    def search(self, vec: F32, k: int) -> list[tuple[str, float]]:
        mat, live, ids = (
            self._mat,
            self._live,
            self._ids,
        )  # a snapshot: writers append beyond it, in place
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
        mat, row = self._mat, self._row
        return {rid: mat[r].copy() for rid in ids if (r := row.get(rid)) is not None and r < len(mat)}

    def count(self) -> int:
        return len(self._row)

    @property
    def mark(self) -> str | None:
        return self._manifest.mark

    # -- writing -----------------------------------------------------------------------------------------------
    def add(self, ids: Sequence[str], vecs: F32, *, mark: str | None = None) -> None:
        """Append rows durably (an id already present is replaced); returns once they are fsync'd."""
        v = np.ascontiguousarray(vecs, dtype=np.float32).reshape(len(ids), -1) if len(ids) else None
        if v is None:
            return
        if v.shape[1] != self.dim:
            raise ValueError(f"vectors have {v.shape[1]} dimensions, the index {self.dim}")
        for rid in ids:
            _check_id(rid)
        with self._lock:
            _append(self.directory / VECTORS, v.tobytes())
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
            self._mat, self._live = self._buf[: n + m], self._live_buf[: n + m]
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

    def close(self) -> None:
        pass


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


GRAPH = "hnsw.usearch"
GRAPH_META = "hnsw.json"


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
    ) -> None:
        self.exact = ExactVectorIndex(directory, embedder_id=embedder_id, dim=dim)
        self.directory, self.dim = directory, dim
        self.threshold, self.persist_every = threshold, persist_every
        self._connectivity, self._expansion_search = connectivity, expansion_search
        self._graph: Any = None
        self._covered = 0  # log rows in the in-memory graph
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
    ) -> TieredVectorIndex:
        ExactVectorIndex.rebuild_from(directory, rows, embedder_id=embedder_id, dim=dim, mark=mark)
        return cls(directory, embedder_id=embedder_id, dim=dim)

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
            dtype="f32",
            connectivity=self._connectivity,
            expansion_add=128,
            expansion_search=self._expansion_search,
        )

    def _open_graph(self) -> None:
        graph, covered = self._new_graph(), 0
        try:
            meta = json.loads((self.directory / GRAPH_META).read_text())
            covered = int(meta["rows"])
            if not 0 < covered <= len(self.exact._mat) or meta.get("dim") != self.dim:
                raise ValueError(f"covers {covered} rows, the log holds {len(self.exact._mat)}")
            graph.load(str(self.directory / GRAPH))
            if len(graph) != covered:
                raise ValueError(f"holds {len(graph)} vectors, its meta says {covered}")
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            if (self.directory / GRAPH_META).exists() or (self.directory / GRAPH).exists():
                log.warning("vector index %s: rebuilding its HNSW graph from the log (%s)", self.directory, e)
            graph, covered = self._new_graph(), 0
        self._graph, self._covered, self._saved = graph, covered, covered
        self._catch_up()

    def _catch_up(self) -> None:
        mat = self.exact._mat
        if self._covered < len(mat):
            keys = np.arange(self._covered, len(mat), dtype=np.uint64)
            self._graph.add(keys, mat[self._covered :])
            self._covered = len(mat)
        if self._covered - self._saved >= self.persist_every or (self._saved == 0 and self._covered):
            self._persist()

    def _persist(self) -> None:
        tmp = self.directory / (GRAPH + ".tmp")
        self._graph.save(str(tmp))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / GRAPH)
        meta_tmp = self.directory / (GRAPH_META + ".tmp")
        meta_tmp.write_text(json.dumps({"rows": self._covered, "dim": self.dim}))
        os.replace(meta_tmp, self.directory / GRAPH_META)
        fsync_dir(self.directory)
        self._saved = self._covered

    def search(self, vec: F32, k: int) -> list[tuple[str, float]]:
        graph = self._graph
        if graph is None:
            return self.exact.search(vec, k)
        live, ids, covered = self.exact._live, self.exact._ids, self._covered
        dead = int(covered - live[:covered].sum())
        m = graph.search(np.asarray(vec, dtype=np.float32), min(covered, k + dead))
        out = [
            (ids[int(key)], 1.0 - float(d))
            for key, d in zip(m.keys, m.distances, strict=True)
            if live[int(key)]
        ]
        return out[:k]

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
        return self._graph is not None

    def close(self) -> None:
        with self._lock:
            if self._graph is not None and self._covered > self._saved:
                self._persist()
