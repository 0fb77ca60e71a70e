"""Lexical (BM25) index beside a scope's database: tantivy over our own terms.

Why tantivy: measured against Kuzu FTS and bm25s on the same rounds (``benchmarks/perf/indexes.py``,
docs/benchmarks.md) it answers the retriever's query several times faster than Kuzu FTS at every size, ranks like
it (same BM25 over the same terms), has no megabyte floor per index (Kuzu's FTS costs ~8 MB on a one-row table),
commits incrementally and durably, and reopened cleanly after every kill -9 mid-commit. bm25s rewrites all of its
files on every change and was left unreadable by a kill -9.

Documents are indexed from ``graphrecall.text.index_terms`` with tantivy's ``whitespace`` tokenizer, and a query is a
BooleanQuery of one SHOULD TermQuery per ``graphrecall.text.query_terms`` term: our stopwords and stemming, OR semantics,
and no user text ever reaches tantivy's query parser (which rejects ``What's ...?``, quotes, colons), so any
natural-language question is safe.

Compaction (``compact``): tantivy keeps a deleted (or replaced) document in its segment, marked in a ``.del`` file,
until a merge rewrites the segment, and its default merge policy merges by segment size, not by deleted share, so
a deleted document stays on disk until its segment happens to be merged with others (measured: 90% of the
documents deleted, 37% of those on disk were). The Python binding (tantivy 0.27) exposes no merge
of its own (``IndexWriter`` has ``garbage_collect_files``, which only removes files no segment uses, and
``wait_merging_threads``), and the index does not store the terms it indexes, so it cannot rewrite itself: once
the deleted share (``dead_fraction``, from ``meta.json``'s per-segment ``max_doc`` and ``num_deleted_docs``) passes
the bound, maintenance rebuilds it from the store's rows (what ``rebuild_from`` does on open) into a fresh directory
and swaps it in (``replace_dir``): a kill -9 leaves the old index or the new one, each whole under the same mark.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from graphrecall.index.manifest import (
    IndexCorrupt,
    Manifest,
    read_manifest,
    replace_dir,
    restore_dir,
    write_manifest,
)

log = logging.getLogger(__name__)

WRITER_HEAP = 15_000_000  # tantivy's minimum per thread is 3 MB; small writes need little
BUILD_HEAP = 200_000_000


# A row to index: (id, terms) or (id, terms, payload). The payload is stored, not indexed: what the caller wants back
# by id without asking the store (the retriever's rounds: a Kuzu point lookup costs ~0.5 ms, 40 of them per search).
Row = tuple[str, str] | tuple[str, str, bytes]


class LexicalIndex(Protocol):
    """What the retriever needs from a lexical index: BM25 top-k with OR semantics over our terms."""

    def search(self, terms: Sequence[str], k: int) -> list[tuple[str, float]]: ...
    def add(self, rows: Sequence[Row], *, mark: str | None = None) -> None: ...
    def delete(self, ids: Sequence[str], *, mark: str | None = None) -> None: ...
    def apply(self, delete: Sequence[str], add: Sequence[Row], *, mark: str | None = None) -> None: ...
    def payloads(self, ids: Sequence[str]) -> dict[str, bytes]: ...
    def count(self) -> int: ...
    @property
    def mark(self) -> str | None: ...
    def close(self) -> None: ...


def _tantivy() -> Any:
    try:
        import tantivy
    except ImportError as e:  # optional dependency
        raise ImportError(
            "the lexical index needs tantivy (a dependency of graphrecall): pip install tantivy"
        ) from e
    return tantivy


def _schema(tantivy: Any) -> Any:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("terms", stored=False, tokenizer_name="whitespace", index_option="freq")
    sb.add_bytes_field("doc", stored=True, indexed=False)
    return sb.build()


def _document(t: Any, row: Row) -> Any:
    if len(row) > 2:
        return t.Document(id=row[0], terms=row[1], doc=row[2])  # type: ignore[misc]
    return t.Document(id=row[0], terms=row[1])


class TantivyLexicalIndex:
    """BM25 over ``terms`` strings. Writes are serialized by a lock; searches run concurrently on a searcher."""

    KIND = "tantivy-terms"
    VERSION = 2  # 2: a stored payload per document

    def __init__(self, directory: Path) -> None:
        """Open an existing index; ``IndexCorrupt`` when it cannot be trusted (then ``rebuild_from``)."""
        self._t = _tantivy()
        self.directory = directory
        restore_dir(directory)
        shutil.rmtree(_compacting(directory), ignore_errors=True)  # a compaction killed before its swap
        self._manifest = read_manifest(directory, Manifest(kind=self.KIND, version=self.VERSION))
        self.schema = _schema(self._t)
        data = directory / "data"
        try:
            if not self._t.Index.exists(str(data)):
                raise IndexCorrupt(f"{directory}: no tantivy index in {data}")
            self.index = self._t.Index(self.schema, path=str(data), reuse=True)
            self.index.reload()
            self.index.searcher().num_docs  # noqa: B018  (touch the segments: a broken one fails here)
        except (OSError, ValueError, RuntimeError) as e:
            raise IndexCorrupt(f"{directory}: tantivy cannot open it: {e}") from e
        self._lock = threading.Lock()

    @classmethod
    def rebuild_from(
        cls, directory: Path, rows: Iterable[Row], *, mark: str | None = None
    ) -> TantivyLexicalIndex:
        """Index (id, terms) rows (read from Kuzu) into a fresh directory and put it in place atomically."""
        tmp = directory.with_name(directory.name + f".tmp-{os.getpid()}")
        _build(tmp, directory, rows, Manifest(kind=cls.KIND, version=cls.VERSION, mark=mark))
        return cls(directory)

    # -- reading -----------------------------------------------------------------------------------------------
    def search(self, terms: Sequence[str], k: int) -> list[tuple[str, float]]:
        """Top-k (id, BM25 score); ``terms`` are ``graphrecall.text.query_terms(question).split()``."""
        unique = list(dict.fromkeys(x for x in terms if x))
        if not unique or k <= 0:
            return []
        t = self._t
        query = t.Query.boolean_query(
            [(t.Occur.Should, t.Query.term_query(self.schema, "terms", x)) for x in unique]
        )
        searcher = self.index.searcher()
        return [(searcher.doc(addr)["id"][0], float(score)) for score, addr in searcher.search(query, k).hits]

    def payloads(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The stored payload of each id that has one (one term-set query, then the documents)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        searcher = self.index.searcher()
        hits = searcher.search(self._t.Query.term_set_query(self.schema, "id", unique), len(unique)).hits
        out: dict[str, bytes] = {}
        for _, addr in hits:
            doc = searcher.doc(addr)
            payload = doc["doc"]
            if payload:
                out[doc["id"][0]] = bytes(payload[0])
        return out

    def count(self) -> int:
        return int(self.index.searcher().num_docs)

    @property
    def mark(self) -> str | None:
        return self._manifest.mark

    # -- writing -----------------------------------------------------------------------------------------------
    def add(self, rows: Sequence[Row], *, mark: str | None = None) -> None:
        """Index rows and commit durably (an id already present is replaced); visible to the next search."""
        self.apply((), rows, mark=mark)

    def delete(self, ids: Sequence[str], *, mark: str | None = None) -> None:
        self.apply(ids, (), mark=mark)

    def apply(self, delete: Sequence[str], add: Sequence[Row], *, mark: str | None = None) -> None:
        """Delete ``delete``, then index ``add`` (replacing ids present), in one durable commit."""
        with self._lock:
            # A writer for this commit only. Why not one kept open between commits: each open tantivy writer holds
            # six threads (one indexing, four merging, one segment updater) and its memory arena, and a process
            # keeps an index open per open scope view and lexical index (64 x 3 by default): a process writing for
            # many users held ~1,350 such threads (docs/benchmarks.md, "Tantivy writers"); opening one per commit
            # cost nothing measurable beside the commit's fsync (15.9 against 17.7 ms a small commit, 200 each).
            w = self.index.writer(WRITER_HEAP, 1)
            try:
                for rid in delete:
                    w.delete_documents_by_term("id", rid)
                for row in add:
                    w.delete_documents_by_term("id", row[0])
                    w.add_document(_document(self._t, row))
                w.commit()  # tantivy fsyncs segment files and its meta.json before it returns
            finally:
                w.wait_merging_threads()
            self.index.reload()
            if mark is not None and mark != self._manifest.mark:
                self._manifest = self._manifest.model_copy(update={"mark": mark})
                # The commit above fsync'd the data.
                write_manifest(self.directory, self._manifest, durable=False)

    # -- compaction --------------------------------------------------------------------------------------------
    def dead_fraction(self) -> float:
        """The share of the documents on disk that are deleted (or replaced) and not merged away yet."""
        total, dead = _segment_docs(self.directory / "data")
        return 0.0 if total == 0 else dead / total

    def compact(self, rows: Iterable[Row], *, mark: str | None, on_step: OnStep | None = None) -> None:
        """Rebuild the index from ``rows`` (the store's, at ``mark``) and swap it in (module docstring). The caller
        keeps writes to the store out meanwhile, so ``rows`` are what the index holds; searches go on against the
        old index until the new one is opened. ``on_step``: "written" before the swap, "aside" within it."""
        with self._lock:
            manifest = self._manifest.model_copy(update={"mark": mark})
            _build(_compacting(self.directory), self.directory, rows, manifest, on_step=on_step)
            fresh = TantivyLexicalIndex(self.directory)
            self.index, self._manifest = fresh.index, fresh._manifest  # one store each: a search gets either

    def close(self) -> None:
        """Nothing to let go: a writer lives for one commit (``apply``)."""


OnStep = Callable[[str], None]


def _compacting(directory: Path) -> Path:
    """Where a compaction builds the fresh index (one name: a stray one a killed compaction left is found)."""
    return directory.with_name(directory.name + ".compact")


def _build(
    tmp: Path, directory: Path, rows: Iterable[Row], manifest: Manifest, *, on_step: OnStep | None = None
) -> None:
    """Index ``rows`` into the fresh directory ``tmp``, then put it in place of ``directory`` (``replace_dir``)."""
    t = _tantivy()
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "data").mkdir(parents=True)
    index = t.Index(_schema(t), path=str(tmp / "data"), reuse=False)
    writer = index.writer(BUILD_HEAP, 1)
    for row in rows:
        writer.add_document(_document(t, row))
    writer.commit()
    writer.wait_merging_threads()
    del writer, index
    write_manifest(tmp, manifest)
    if on_step is not None:
        on_step("written")
    replace_dir(tmp, directory, on_step=on_step)


def _segment_docs(data: Path) -> tuple[int, int]:
    """(documents, deleted documents) over the segments tantivy's ``meta.json`` lists; (0, 0) if unreadable (then
    there is nothing to say about it: opening the index is what checks it)."""
    try:
        segments = json.loads((data / "meta.json").read_text())["segments"]
        total = sum(int(s["max_doc"]) for s in segments)
        dead = sum(int((s.get("deletes") or {}).get("num_deleted_docs", 0)) for s in segments)
    except (OSError, ValueError, KeyError, TypeError):
        return 0, 0
    return total, dead
