"""One scope's derived indexes, in a directory beside its Kuzu database, checked on open and rebuilt from Kuzu.

Layout: ``<root>/<org>/<user>.kuzu.idx/`` holding ``lex-<name>/`` (``TantivyLexicalIndex``) and ``vec-<name>/``
(``TieredVectorIndex``: exact scan, HNSW above 20k rows) per index name. The directory ends in ``.idx`` so the pool's
``*.kuzu`` scan never mistakes it for a database; erasing a user removes it together with the ``.kuzu`` file.

Opening never trusts an index it cannot vouch for: a missing directory, a bad or foreign manifest, a file tantivy or
the vector log cannot read, or a ``mark`` that differs from the store's (the index missed commits, e.g. a crash
between the Kuzu commit and the index commit) each trigger a rebuild from the source (Kuzu), with one log line per
open. Which rows each index covers, and how marks are kept, is the store's business (``graphrecall.store.derived``).

Compaction (``ScopeIndexes.compact``): both kinds keep what was deleted on disk (the vector log its dead rows,
tantivy its deleted documents), so a scope churned by imports and erasures grows its indexes with its operations.
Each index whose dead share passes the bound (maintenance passes ``Settings.compact_free_fraction``, the bucket's
bound: the same promise, at most ~1/(1-bound) of what a rewrite would hold) is rewritten: the vector index from its
own live rows, the lexical one from the store's rows. Either swaps a complete fresh directory in for the old one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from graphrecall.index.lexical import Row, TantivyLexicalIndex
from graphrecall.index.manifest import IndexCorrupt
from graphrecall.index.vector import F32, OnStep, TieredVectorIndex

log = logging.getLogger(__name__)

# An index whose dead part is smaller than this is not rewritten whatever its share: a few rows of a small scope.
MIN_DEAD_BYTES = 16 << 10


class IndexSource(Protocol):
    """Where a rebuild reads from: the scope's Kuzu database (the store of record)."""

    def lexical_rows(self, name: str) -> Iterable[Row]:
        """(id, ``graphrecall.text.index_terms`` string) for every row the lexical index ``name`` covers."""
        ...

    def vector_rows(self, name: str) -> Iterable[tuple[str, F32]]:
        """(id, normalized vector) for every row the vector index ``name`` covers."""
        ...

    def mark(self, name: str) -> str | None:
        """The store's current mark for index ``name`` (what the index must have seen), or None if it keeps none."""
        ...


def index_dir(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".idx")


@dataclass
class ScopeIndexes:
    """The open derived indexes of one scope, by name (index names are unique across both kinds)."""

    lexical: dict[str, TantivyLexicalIndex]
    vector: dict[str, TieredVectorIndex]
    rebuilt: list[str] = field(default_factory=list)

    @classmethod
    def open(
        cls,
        db_path: Path,
        *,
        embedder_id: str,
        dim: int,
        source: IndexSource,
        lexical: Sequence[str],
        vector: Sequence[str],
        half: Collection[str] = (),
        fresh: bool = False,
    ) -> ScopeIndexes:
        """Open every index, rebuilding from ``source`` the ones it cannot vouch for. ``half``: the vector indexes
        whose vectors are half precision (``index.vector``: their file keeps float16).

        ``fresh``: the store was created just now, so missing indexes are created empty without a warning. Any
        other rebuild is logged once per open (one line naming every index rebuilt and why), because it means the
        indexes were missing, damaged, of another format or behind the store (a crash, an upgrade)."""
        root = index_dir(db_path)
        root.mkdir(parents=True, exist_ok=True)
        out = cls({}, {})
        reasons: list[str] = []
        t0 = time.perf_counter()
        for name in lexical:
            d = root / f"lex-{name}"
            out.lexical[name] = _open_or_rebuild(
                name,
                lambda d=d: TantivyLexicalIndex(d),  # type: ignore[misc]
                lambda d=d, name=name: TantivyLexicalIndex.rebuild_from(  # type: ignore[misc]
                    d, source.lexical_rows(name), mark=source.mark(name)
                ),
                source.mark(name),
                reasons,
            )
        for name in vector:
            d = root / f"vec-{name}"
            out.vector[name] = _open_or_rebuild(
                name,
                lambda d=d, h=name in half: TieredVectorIndex(  # type: ignore[misc]
                    d, embedder_id=embedder_id, dim=dim, half=h
                ),
                lambda d=d, name=name: TieredVectorIndex.rebuild_from(  # type: ignore[misc]
                    d,
                    source.vector_rows(name),
                    embedder_id=embedder_id,
                    dim=dim,
                    mark=source.mark(name),
                    half=name in half,
                ),
                source.mark(name),
                reasons,
            )
        out.rebuilt = [r.split(":", 1)[0] for r in reasons]
        if reasons and not fresh:
            log.warning(
                "rebuilt %d derived index(es) of %s from the store in %.2f s: %s",
                len(reasons),
                db_path,
                time.perf_counter() - t0,
                "; ".join(reasons),
            )
        return out

    def compact(
        self, source: IndexSource, bound: float, *, dry_run: bool = False, on_step: OnStep | None = None
    ) -> list[IndexSpace]:
        """Rewrite each index whose dead share is at least ``bound`` (and whose dead part is at least
        ``MIN_DEAD_BYTES``); what each held and whether it was compacted. The caller keeps the store's writes out
        meanwhile (the lexical rows are read from ``source`` at its current mark); searches go on."""
        out: list[IndexSpace] = []
        named: list[tuple[str, TantivyLexicalIndex | TieredVectorIndex]] = [*self.lexical.items()]
        named += self.vector.items()
        for name, idx in named:
            space = IndexSpace(name, _size(idx.directory), idx.dead_fraction())
            out.append(space)
            if space.dead_fraction < bound or space.dead_fraction * space.bytes < MIN_DEAD_BYTES or dry_run:
                continue
            t0 = time.perf_counter()
            if isinstance(idx, TantivyLexicalIndex):
                idx.compact(source.lexical_rows(name), mark=source.mark(name), on_step=on_step)
            elif not idx.compact(on_step=on_step):
                continue
            space.bytes_after, space.seconds = _size(idx.directory), time.perf_counter() - t0
        return out

    def close(self) -> None:
        for lx in self.lexical.values():
            lx.close()
        for vx in self.vector.values():
            vx.close()


@dataclass
class IndexSpace:
    """One derived index as compaction found it: its files' size, the share of what they hold that is dead, and
    (when it was compacted) its size after and the seconds it took."""

    name: str
    bytes: int
    dead_fraction: float
    bytes_after: int | None = None
    seconds: float | None = None


def _size(directory: Path) -> int:
    """The bytes of the files under ``directory`` (0 when it is gone)."""
    total = 0
    for where, _, names in os.walk(directory):
        for n in names:
            with contextlib.suppress(OSError):  # removed meanwhile (tantivy's merges)
                total += os.path.getsize(os.path.join(where, n))
    return total


class _Marked(Protocol):
    @property
    def mark(self) -> str | None: ...

    def close(self) -> None: ...


M = TypeVar("M", bound=_Marked)


def _open_or_rebuild(
    name: str, opener: Callable[[], M], builder: Callable[[], M], mark: str | None, reasons: list[str]
) -> M:
    """The index as found when its mark matches the store's, else rebuilt; ``reasons`` gets "name: why"."""
    try:
        idx = opener()
    except IndexCorrupt as e:
        reason = str(e).split(": ", 1)[
            -1
        ]  # the message starts with the index's directory, known from the line
    else:
        if idx.mark == mark:
            return idx
        idx.close()
        reason = f"index mark {idx.mark!r} != store mark {mark!r}"
    reasons.append(f"{name}: {reason}")
    return builder()
