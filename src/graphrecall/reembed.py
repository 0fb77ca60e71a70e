"""Move stored scopes to another embedder: every round, passage, fact, event and entity embedded again, nothing else
changed (``graphrecall reembed``).

How, and why this way. A store records the embedder that wrote it (Kuzu's ``Meta`` node, the write log's claim), and
its vector columns have that model's dimension; Kuzu runs DDL only outside a transaction, so vectors of another
dimension cannot replace the old ones in place, atomically. So a scope is rebuilt beside the store and swapped in:

1. the scope's write log is flushed, then the scope is exported (``Memory.export_scope``: sessions, every fact
   version with its SUPERSEDES edges, events, entities, relations), opened with a stand-in that has the stored
   embedder's id and dimension and refuses to embed: nothing is read with a model the store does not know;
2. the export is imported into a store of its own, ``<root>.reembed/build``, with the new embedder, every vector
   going through an embedding cache kept there (``vectors.sqlite``): a killed run, started again, rebuilds the scope
   without embedding again what it already did;
3. the rebuilt scope's files replace the old ones: a journal (``swap.json``) is written and synced first, the old
   files are moved aside, the new ones moved in, then the journal and the old files are removed. A run killed during
   the swap is finished by the next run, before anything else.

Invariants: until step 3 the old scope is untouched and searchable with its old vectors; after it, the scope is the
rebuilt one whole. The old store must not be served while this runs (Kuzu allows one read-write process per
database: a server holding the scope makes this fail with ``StoreBusy``, and nothing changes).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from graphrecall.embed.base import Embedder, TextKind, Vectors, Wrapper
from graphrecall.embed.cache import CachedEmbedder
from graphrecall.errors import EmbedderMismatch, GraphRecallError
from graphrecall.memory import Memory
from graphrecall.models import Scope, ScopeExport

# Every file a scope may have, by suffix after the user id: its Kuzu database and what Kuzu and the store keep
# beside it (store.pool.DatabasePool.drop), and its write log (store.wal.log).
SCOPE_SUFFIXES = (
    ".kuzu", ".kuzu.wal", ".kuzu.lock", ".kuzu.shadow", ".kuzu.fts-rebuild", ".kuzu.idx",
    ".log.sqlite", ".log.sqlite-wal", ".log.sqlite-shm", ".log.sqlite.lock",
)  # fmt: skip
JOURNAL = "swap.json"


class ReembedFailed(GraphRecallError):
    code = "reembed_failed"


@dataclass(frozen=True)
class Reembedded:
    """One scope's outcome: ``skipped`` when it already used the target embedder."""

    scope: Scope
    texts: int = 0
    skipped: bool = False
    stored_id: str | None = None


class _StoredEmbedder:
    """Stands for the embedder that wrote a store (its id and dimension) and refuses to embed: reading a scope to
    export it needs no model."""

    def __init__(self, id: str, dim: int) -> None:
        self._id, self._dim = id, dim

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        raise ReembedFailed(f"reembed tried to embed with the old embedder {self._id!r}; this is a bug")


class _Counting(Wrapper):
    """Counts the texts the new embedder is given (for the progress bar), cached or not."""

    def __init__(self, inner: Embedder, progress: Callable[[int], None]) -> None:
        super().__init__(inner)
        self._progress = progress

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        out = self.inner.embed(texts, kind=kind)
        self._progress(len(texts))
        return out


def build_root(root: Path) -> Path:
    return root.parent / f"{root.name}.reembed"


def scope_files(root: Path, scope: Scope) -> Iterator[Path]:
    org = root / scope.org_id
    for suffix in SCOPE_SUFFIXES:
        p = org / f"{scope.user_id}{suffix}"
        if p.exists():
            yield p


def _remove(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)


def _sync_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def finish_swap(root: Path) -> Scope | None:
    """Complete a swap a killed run left half done (the journal says which scope); the scope it finished, or None.
    Idempotent: each file is moved only if it is still where the swap found it."""
    work = build_root(root)
    journal = work / JOURNAL
    if not journal.exists():
        return None
    scope = Scope.model_validate(json.loads(journal.read_text()))
    new_dir, old_dir = work / "build" / scope.org_id, work / "old" / scope.org_id
    old_dir.mkdir(parents=True, exist_ok=True)
    target = root / scope.org_id
    target.mkdir(parents=True, exist_ok=True)
    arriving = {p.name for p in new_dir.glob(f"{scope.user_id}.*")} if new_dir.exists() else set()
    for suffix in SCOPE_SUFFIXES:
        name = f"{scope.user_id}{suffix}"
        if name in arriving and (target / name).exists():
            os.replace(target / name, old_dir / name)  # the old file, not yet moved aside
        elif name not in arriving and (target / name).exists() and not (old_dir / name).exists():
            os.replace(target / name, old_dir / name)  # an old file the rebuilt scope does not have
    for name in arriving:
        os.replace(new_dir / name, target / name)
    journal.unlink()
    shutil.rmtree(work / "old", ignore_errors=True)
    return scope


def _swap(root: Path, scope: Scope) -> None:
    work = build_root(root)
    _sync_write(work / JOURNAL, json.dumps({"org_id": scope.org_id, "user_id": scope.user_id}))
    finish_swap(root)


def _stored_embedder(root: Path, scope: Scope, target: Embedder) -> tuple[str, int] | None:
    """The embedder the scope was written with, when it is not ``target`` (else None)."""
    probe = _StoredEmbedder(target.id, target.dim)
    with Memory.open(root, embedder=probe) as mem:
        try:
            mem.stats(scope)  # opens the database, or the write log of a scope that lives in it
        except EmbedderMismatch as e:
            if e.stored_id is None or e.stored_dim is None:
                raise
            return e.stored_id, int(e.stored_dim)
    return None


def _export(root: Path, scope: Scope, stored: tuple[str, int]) -> ScopeExport:
    with Memory.open(root, embedder=_StoredEmbedder(*stored)) as old:
        old.flush()
        return old.export_scope(scope)


def _texts(doc: ScopeExport) -> int:
    """About how many texts the rebuild embeds (two per exchange, one per fact, event and entity), for the bar."""
    messages = sum(len(s.messages) for s in doc.sessions)
    return messages + len(doc.facts) + len(doc.events) + len(doc.entities)


def reembed_scope(root: Path, scope: Scope, embedder: Embedder, *, quiet: bool = False) -> Reembedded:
    """Move one scope to ``embedder`` (see the module docstring); a scope already on it is left alone."""
    finish_swap(root)
    stored = _stored_embedder(root, scope, embedder)
    if stored is None:
        return Reembedded(scope=scope, skipped=True, stored_id=embedder.id)
    doc = _export(root, scope, stored)
    work = build_root(root)
    cache = CachedEmbedder(embedder, path=work / "vectors.sqlite")
    try:
        with tqdm(total=_texts(doc), desc=str(scope), unit="text", disable=quiet, leave=False) as bar:
            with Memory.open(work / "build", embedder=_Counting(cache, bar.update)) as new:
                new.forget(
                    scope
                )  # what a killed run left of it: rebuilt from the export (its vectors are cached)
                new.import_scope(scope, doc)
                new.flush()
            embedded = int(bar.n)
    finally:
        cache.close()
    _swap(root, scope)
    return Reembedded(scope=scope, texts=embedded, stored_id=stored[0])


def reembed(
    root: Path, embedder: Embedder, scopes: Sequence[Scope], *, quiet: bool = False
) -> list[Reembedded]:
    """Every scope of ``scopes`` moved to ``embedder``, one after the other; the work directory is removed at the
    end (its cache included: it holds vectors of these scopes' texts)."""
    done = [reembed_scope(root, s, embedder, quiet=quiet) for s in scopes]
    shutil.rmtree(build_root(root), ignore_errors=True)
    return done
