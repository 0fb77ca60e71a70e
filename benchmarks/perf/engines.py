"""Index engines compared by ``benchmarks.perf.indexes``, each behind the same small interface.

Every engine gets the same rows (round id, our normalized ``terms`` from ``graphrecall.text``, the round's user-side
MiniLM vector) and answers the same query (``graphrecall.text.query_terms`` split into terms, or a query vector), so the
comparison is of engines, not of tokenizers. Lexical engines never see raw user text: our terms are prefixed
alphanumerics, which is what makes every engine punctuation-safe and gives OR semantics (each term a SHOULD clause).

``python -m benchmarks.perf.engines crash ENGINE DIR ACKFILE`` is the child process of the crash test: it opens the
index in DIR and writes small batches forever, appending the count of acknowledged (durable) rows to ACKFILE after
each one, until the parent kills it with SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def dir_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a directory."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Lexical(Protocol):
    name: str

    def search(self, terms: list[str], k: int) -> list[str]: ...
    def add(self, ids: Sequence[str], terms: Sequence[str]) -> None: ...
    def count(self) -> int: ...
    def close(self) -> None: ...


class Vector(Protocol):
    name: str

    def search(self, vec: F32, k: int) -> list[str]: ...
    def add(self, ids: Sequence[str], vecs: F32) -> None: ...
    def count(self) -> int: ...
    def close(self) -> None: ...


# -- tantivy --------------------------------------------------------------------------------------------------------
class TantivyLexical:
    """tantivy over our terms with the ``whitespace`` tokenizer (no lowercasing or stemming of its own: the terms
    are ours); queries are built as BooleanQuery of TermQuery SHOULD clauses, never through the query parser."""

    name = "tantivy"

    def __init__(self, path: Path, *, create: bool = False) -> None:
        import tantivy

        self._t = tantivy
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("terms", stored=False, tokenizer_name="whitespace", index_option="freq")
        self.schema = sb.build()
        path.mkdir(parents=True, exist_ok=True)
        self.index = tantivy.Index(self.schema, path=str(path), reuse=not create)
        self._writer: Any = None

    @classmethod
    def build(cls, path: Path, ids: Sequence[str], terms: Sequence[str]) -> TantivyLexical:
        shutil.rmtree(path, ignore_errors=True)
        eng = cls(path, create=True)
        w = eng.index.writer(200_000_000, 1)
        for i, t in zip(ids, terms, strict=True):
            w.add_document(eng._t.Document(id=i, terms=t))
        w.commit()
        w.wait_merging_threads()
        eng.index.reload()
        return eng

    def writer(self) -> Any:
        if self._writer is None:
            self._writer = self.index.writer(15_000_000, 1)
        return self._writer

    def search(self, terms: list[str], k: int) -> list[str]:
        if not terms:
            return []
        t = self._t
        q = t.Query.boolean_query(
            [(t.Occur.Should, t.Query.term_query(self.schema, "terms", x)) for x in terms]
        )
        s = self.index.searcher()
        return [s.doc(addr)["id"][0] for _, addr in s.search(q, k).hits]

    def add(self, ids: Sequence[str], terms: Sequence[str]) -> None:
        w = self.writer()
        for i, x in zip(ids, terms, strict=True):
            w.add_document(self._t.Document(id=i, terms=x))
        w.commit()  # durable: tantivy fsyncs the segment files and meta.json on commit
        self.index.reload()

    def count(self) -> int:
        self.index.reload()
        return int(self.index.searcher().num_docs)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.wait_merging_threads()
            self._writer = None


# -- bm25s ----------------------------------------------------------------------------------------------------------
class Bm25sLexical:
    """bm25s (sparse matrix of precomputed BM25 weights) over our pre-tokenized terms, k1 1.2 / b 0.75 like Kuzu
    FTS and tantivy. bm25s has no incremental add: a write re-indexes everything and saves it again."""

    name = "bm25s"

    def __init__(self, path: Path, model: Any, ids: list[str], docs: list[list[str]]) -> None:
        self.path, self.model, self.ids, self.docs = path, model, ids, docs
        self.vocab: dict[str, int] = model.vocab_dict

    @staticmethod
    def _fit(docs: list[list[str]]) -> Any:
        import bm25s

        m = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        m.index(docs, show_progress=False)
        return m

    @classmethod
    def build(cls, path: Path, ids: Sequence[str], terms: Sequence[str]) -> Bm25sLexical:
        docs = [t.split() for t in terms]
        eng = cls(path, cls._fit(docs), list(ids), docs)
        eng.save()
        return eng

    def save(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)  # bm25s rewrites its files in place
        self.model.save(str(self.path), show_progress=False)
        (self.path / "ids.json").write_text(json.dumps(self.ids))
        for p in self.path.iterdir():
            _fsync_file(p)
        _fsync_dir(self.path)

    @classmethod
    def open(cls, path: Path, docs: list[list[str]] | None = None) -> Bm25sLexical:
        import bm25s

        m = bm25s.BM25.load(str(path), show_progress=False, verbosity=0)
        ids = json.loads((path / "ids.json").read_text())
        return cls(path, m, ids, docs if docs is not None else [])

    def search(self, terms: list[str], k: int) -> list[str]:
        toks = [t for t in terms if t in self.vocab]
        if not toks:
            return []
        k = min(k, len(self.ids))
        idx, scores = self.model.retrieve([toks], k=k, show_progress=False, n_threads=1)
        return [self.ids[int(i)] for i, s in zip(idx[0], scores[0], strict=True) if s > 0]

    def add(self, ids: Sequence[str], terms: Sequence[str]) -> None:
        self.ids.extend(ids)
        self.docs.extend(t.split() for t in terms)
        self.model = self._fit(self.docs)
        self.vocab = self.model.vocab_dict
        self.save()

    def count(self) -> int:
        return len(self.ids)

    def close(self) -> None:
        pass


# -- exact numpy scan ------------------------------------------------------------------------------------------------
class NumpyVector:
    """Exact cosine top-k: a float32 matrix of normalized rows in memory, one dot product and an argpartition.

    On disk: ``vectors.f32`` (raw rows, appended) and ``ids.txt`` (one id a line, appended); a write appends to both
    and fsyncs them. A torn tail (kill -9 mid-append) is cut back to the rows both files hold in full."""

    name = "numpy"

    def __init__(self, path: Path, dim: int) -> None:
        self.path, self.dim = path, dim
        raw = np.fromfile(path / "vectors.f32", dtype=np.float32) if (path / "vectors.f32").exists() else None
        lines = (path / "ids.txt").read_text().split("\n") if (path / "ids.txt").exists() else []
        complete_ids = lines[:-1]  # the last element is after the final newline: "" or a torn id
        n_vec = 0 if raw is None else raw.size // dim
        n = min(n_vec, len(complete_ids))
        self.torn = n_vec * dim != (0 if raw is None else raw.size) or n != n_vec or n != len(complete_ids)
        self.ids = complete_ids[:n]
        self.mat: F32 = (
            np.empty((0, dim), np.float32) if raw is None else raw[: n * dim].reshape(n, dim).copy()
        )
        if self.torn:  # cut both files back to the consistent prefix
            with open(path / "vectors.f32", "r+b") as f:
                f.truncate(n * dim * 4)
            (path / "ids.txt").write_text("".join(i + "\n" for i in self.ids))

    @classmethod
    def build(cls, path: Path, ids: Sequence[str], vecs: F32) -> NumpyVector:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        np.ascontiguousarray(vecs, dtype=np.float32).tofile(path / "vectors.f32")
        (path / "ids.txt").write_text("".join(i + "\n" for i in ids))
        for p in path.iterdir():
            _fsync_file(p)
        return cls(path, vecs.shape[1])

    def search(self, vec: F32, k: int) -> list[str]:
        return [self.ids[i] for i in exact_topk(self.mat, vec, k)]

    def add(self, ids: Sequence[str], vecs: F32) -> None:
        with open(self.path / "vectors.f32", "ab") as f:
            f.write(np.ascontiguousarray(vecs, dtype=np.float32).tobytes())
            f.flush()
            os.fsync(f.fileno())
        with open(self.path / "ids.txt", "a") as f:
            f.write("".join(i + "\n" for i in ids))
            f.flush()
            os.fsync(f.fileno())
        self.ids.extend(ids)
        self.mat = np.concatenate([self.mat, vecs.astype(np.float32)])

    def count(self) -> int:
        return len(self.ids)

    def close(self) -> None:
        pass


def exact_topk(mat: F32, vec: F32, k: int) -> list[int]:
    if len(mat) == 0:
        return []
    sims = mat @ vec
    k = min(k, len(sims))
    top = np.argpartition(-sims, k - 1)[:k]
    return [int(i) for i in top[np.argsort(-sims[top])]]


# -- usearch ---------------------------------------------------------------------------------------------------------
class UsearchVector:
    """usearch HNSW (cosine, f32) with the product's HNSW parameters (degree 32, search expansion 300). Integer
    keys map to round ids through ``ids.json``. A write adds in memory, then saves the whole index (usearch has no
    incremental file format) and fsyncs it."""

    name = "usearch"

    def __init__(self, path: Path, index: Any, ids: list[str]) -> None:
        self.path, self.index, self.ids = path, index, ids

    @staticmethod
    def _new(dim: int) -> Any:
        from usearch.index import Index

        return Index(
            ndim=dim, metric="cos", dtype="f32", connectivity=32, expansion_add=128, expansion_search=300
        )

    @classmethod
    def build(cls, path: Path, ids: Sequence[str], vecs: F32) -> UsearchVector:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        index = cls._new(vecs.shape[1])
        index.add(np.arange(len(ids), dtype=np.uint64), vecs, threads=2)
        eng = cls(path, index, list(ids))
        eng.save()
        return eng

    def save(self) -> None:
        self.index.save(str(self.path / "index.usearch"))
        (self.path / "ids.json").write_text(json.dumps(self.ids))
        for p in self.path.iterdir():
            _fsync_file(p)

    @classmethod
    def open(cls, path: Path, dim: int) -> UsearchVector:
        index = cls._new(dim)
        index.load(str(path / "index.usearch"))
        ids = json.loads((path / "ids.json").read_text())
        return cls(path, index, ids)

    def search(self, vec: F32, k: int) -> list[str]:
        m = self.index.search(vec, k)
        return [self.ids[int(key)] for key in m.keys]

    def add(self, ids: Sequence[str], vecs: F32) -> None:
        start = len(self.ids)
        self.index.add(np.arange(start, start + len(ids), dtype=np.uint64), vecs)
        self.ids.extend(ids)
        self.save()

    def count(self) -> int:
        return len(self.index)

    def close(self) -> None:
        pass


# -- crash child -----------------------------------------------------------------------------------------------------
def _crash_child(engine: str, path: Path, ackfile: Path, dim: int = 384) -> None:
    """Write batches of 20 rows forever; after each durable write, append the acknowledged row count to ACKFILE."""
    rng = np.random.default_rng(os.getpid())
    eng = open_engine(engine, path, dim)
    if engine == "bm25s":
        eng.docs = [["wfiller"] for _ in eng.ids]  # contents do not matter for durability, only the rewrite
    acked = eng.count()
    with open(ackfile, "a") as ack:
        ack.write(f"{acked}\n")
        ack.flush()
        os.fsync(ack.fileno())
        print("ready", flush=True)
        n = 0
        while True:
            ids = [f"crash-{os.getpid()}-{n + j}" for j in range(20)]
            n += 20
            if engine in ("tantivy", "bm25s"):
                eng.add(ids, ["wcrash wtest " + " ".join(f"w{rng.integers(1000)}" for _ in range(30))] * 20)
            else:
                v = rng.standard_normal((20, dim)).astype(np.float32)
                eng.add(ids, v / np.linalg.norm(v, axis=1, keepdims=True))
            acked += 20
            ack.write(f"{acked}\n")
            ack.flush()
            os.fsync(ack.fileno())


def open_engine(engine: str, path: Path, dim: int = 384) -> Any:
    if engine == "tantivy":
        return TantivyLexical(path)
    if engine == "bm25s":
        return Bm25sLexical.open(path)
    if engine == "usearch":
        return UsearchVector.open(path, dim)
    if engine == "numpy":
        return NumpyVector(path, dim)
    raise SystemExit(f"unknown engine {engine!r}")


def _check(engine: str, path: Path, dim: int = 384) -> None:
    """Reopen after a crash (in its own process: a corrupt file may kill it) and print what it holds as JSON."""
    out: dict[str, Any] = {"opens": False}
    try:
        eng = open_engine(engine, path, dim)
        out["opens"] = True
        out["count"] = eng.count()
        out["torn_tail_repaired"] = bool(getattr(eng, "torn", False))
        if engine in ("tantivy", "bm25s"):
            out["search_hits"] = len(eng.search(["wcrash"], 10))
        else:
            v = np.ones(dim, np.float32) / np.sqrt(dim)
            out["search_hits"] = len(eng.search(v, 10))
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "crash":
        _crash_child(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        _check(sys.argv[2], Path(sys.argv[3]))
    else:
        raise SystemExit(
            "usage: python -m benchmarks.perf.engines crash ENGINE DIR ACKFILE | check ENGINE DIR"
        )
