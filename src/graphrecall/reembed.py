"""Move stored scopes to another embedder: every round (user and reply vectors), passage, fact, event and entity
embedded again, nothing else changed (``graphrecall reembed``; ``reembed`` from Python).

How, and why this way. A store records the embedder that wrote it (Kuzu's ``Meta`` node, the write log's claim), and
its vector columns have that model's dimension; Kuzu runs DDL only outside a transaction, so vectors of another
dimension cannot replace the old ones in place, atomically. So a scope is rebuilt beside the store and swapped in,
holding the scope's process lock (``store.proclock``) from the first step to the last, so that no other process
writes the scope meanwhile (one that tries gets ``StoreBusy``):

1. the scope's write log is flushed, then the scope is exported (``Memory.export_scope``: sessions and messages
   with their extraction states, every fact version with its SUPERSEDES edges and stamps, events, entities,
   relations), opened with a stand-in that has the stored embedder's id and dimension and refuses to embed: nothing
   is read with a model the store does not know;
2. the export is imported into a store of its own, ``<root>/.reembed/build``, with the new embedder; every text goes
   through an embedding cache kept there (``vectors.sqlite``), committed a chunk of ``CHUNK`` texts at a time, so a
   killed run, started again, rebuilds the scope without embedding again what it already did;
3. the rebuilt scope's files replace the old ones under a synced journal (``store.swap``): a run killed during the
   swap is finished by the next ``Memory.open`` of the root, or the next run.

Invariants: until the journal of step 3 is synced the old scope is untouched, whole and searchable with its old
vectors (a run killed earlier leaves only the work folder); after it, the scope is the rebuilt one, whole. The
extraction queue (``<root>/extract-queue.sqlite``) keeps its jobs: sessions keep their ids. The old store must not
be served while this runs: a server that holds the scope makes the run fail with ``StoreBusy`` and nothing changed.

Why not an operation of the table (``operations.py``): it is not a call on a ``Memory`` but on a store root, which
it opens with two embedders, and it must not run beside a server; it has no HTTP or MCP form.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from graphrecall.embed.base import Embedder, TextKind, Vectors, Wrapper
from graphrecall.embed.cache import CachedEmbedder
from graphrecall.embed.spec import embedder_from_spec
from graphrecall.errors import EmbedderMismatch, GraphRecallError, NotFound
from graphrecall.memory import Memory
from graphrecall.models import Scope, ScopeExport
from graphrecall.params import ScopeLike, as_scope
from graphrecall.store import buckets, proclock
from graphrecall.store import swap as swapping
from graphrecall.store.database import BucketDatabase
from graphrecall.store.legacy import legacy_path
from graphrecall.store.wal.log import log_path

CHUNK = 128  # texts per call to the cache: what a killed run can lose of its embedding work
# Tests kill a run with SIGKILL at a chosen point: ``texts:N`` once N texts are embedded, ``moves:N`` after N files
# of a swap are moved.
KILL_ENV = "GRAPHRECALL_REEMBED_KILL_AT"
WORK_LOCK = (
    swapping.WORK
)  # ``<root>/.reembed.lock``: held by the one run on a root (store.proclock adds .lock)


class ReembedFailed(GraphRecallError):
    code = "reembed_failed"


@dataclass(frozen=True)
class Reembedded:
    """One scope's outcome: ``skipped`` when it already used the target embedder; ``texts`` given to the new
    embedder, ``embedded`` of them computed by the model (the others came from the cache of a killed run)."""

    scope: Scope
    texts: int = 0
    embedded: int = 0
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


class _Chunked(Wrapper):
    """Hands the cache ``CHUNK`` texts at a time (each chunk committed: a killed run keeps them) and counts them
    for the progress bar."""

    def __init__(self, inner: Embedder, progress: Callable[[int], None]) -> None:
        super().__init__(inner)
        self._progress = progress
        self.texts = 0
        self._kill_at = _kill_point("texts")

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        parts = []
        for start in range(0, len(texts), CHUNK):
            part = texts[start : start + CHUNK]
            parts.append(np.asarray(self.inner.embed(part, kind=kind), dtype=np.float32))
            self.texts += len(part)
            self._progress(len(part))
            if self._kill_at is not None and self.texts >= self._kill_at:
                _kill()
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.concatenate(parts)


def _kill_point(what: str) -> int | None:
    kind, _, n = os.environ.get(KILL_ENV, "").partition(":")
    return int(n) if kind == what and n.isdigit() else None


def _kill() -> None:
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _mover() -> Callable[[], None] | None:
    at = _kill_point("moves")
    if at is None:
        return None
    moved = [0]

    def on_move() -> None:
        moved[0] += 1
        if moved[0] >= at:
            _kill()

    return on_move


def work_dir(root: Path) -> Path:
    """Where scopes are rebuilt: ``<root>/.reembed`` (never a scope: identifiers do not start with a dot)."""
    return swapping.work_dir(root)


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
    """About how many texts the rebuild embeds (a user turn and its replies, one per fact, event and entity; long
    turns add passages), for the bar."""
    messages = sum(len(s.messages) for s in doc.sessions)
    return messages + len(doc.facts) + len(doc.events) + len(doc.entities)


def reembed_scope(root: Path, scope: Scope, embedder: Embedder, *, quiet: bool = False) -> Reembedded:
    """Move one scope to ``embedder`` (module docstring); a scope already on it is left alone. ``StoreBusy`` when
    another process holds the scope."""
    root = Path(root)
    swapping.finish(root)
    lock = log_path(root, scope)
    proclock.acquire(lock, f"scope {scope} (a server?)")
    try:
        stored = _stored_embedder(root, scope, embedder)
        if stored is None:
            return Reembedded(scope=scope, skipped=True, stored_id=embedder.id)
        doc = _export(root, scope, stored)
        build = work_dir(root) / "build"
        # What a killed run left there is no longer needed (``finish`` above settled any journaled swap), and it
        # may not even open (store/recovery.py): rebuilt from the export, its vectors from the cache.
        shutil.rmtree(build, ignore_errors=True)
        cache = CachedEmbedder(embedder, path=work_dir(root) / "vectors.sqlite")
        try:
            with tqdm(
                total=_texts(doc), desc=str(scope), unit="text", disable=quiet, file=sys.stderr, leave=False
            ) as bar:
                chunked = _Chunked(cache, bar.update)
                with Memory.open(build, embedder=chunked) as new:
                    new.import_scope(scope, doc)
                # closed: what went to Kuzu is checkpointed; a small scope stays in its (synced) write log, as before
        finally:
            cache.close()
        empty = not (doc.sessions or doc.facts or doc.events or doc.entities)
        swapping.swap(root, scope, old=stored, new=(embedder.id, embedder.dim), on_move=_mover(), empty=empty)
        return Reembedded(scope=scope, texts=chunked.texts, embedded=cache.misses, stored_id=stored[0])
    finally:
        proclock.release(lock)


def reembed(
    root: str | Path,
    embedder: Embedder | str,
    scopes: Sequence[ScopeLike] | None = None,
    *,
    quiet: bool = True,
    on_scope: Callable[[Reembedded], None] | None = None,
) -> list[Reembedded]:
    """Move ``scopes`` (every scope under ``root`` when None) to ``embedder`` (an ``Embedder``, or a spec such as
    ``"e5-small"``), one after the other; ``quiet=False`` shows a progress bar per scope on stderr, ``on_scope``
    is called with each scope's outcome as it is done. The work folder
    is removed at the end (its cache included: it holds vectors of these scopes' texts). Stop any server of the
    store first."""
    root = Path(root)
    target = embedder_from_spec(embedder) if isinstance(embedder, str) else embedder
    run_lock = root / WORK_LOCK  # one run per root: runs share the work folder and its journal
    proclock.acquire(run_lock, f"store {root} (another graphrecall reembed runs on it)")
    try:
        swapping.finish(root)
        if scopes is None:
            with Memory.open(root, embedder=_StoredEmbedder(target.id, target.dim)) as mem:
                chosen = mem.scopes()
        else:
            chosen = [as_scope(s) for s in scopes]
            missing = [s for s in chosen if not _stored(root, s)]
            if missing:
                raise NotFound(f"no memory stored for scope {missing[0]} under {root}")
        done = []
        for s in chosen:
            done.append(reembed_scope(root, s, target, quiet=quiet))
            if on_scope is not None:
                on_scope(done[-1])
        shutil.rmtree(work_dir(root), ignore_errors=True)
        return done
    finally:
        proclock.release(run_lock)


def _stored(root: Path, scope: Scope) -> bool:
    """Whether the scope has anything under ``root``: a write log, rows in a bucket of any embedder, or a database
    of its own written before buckets."""
    if legacy_path(root, scope.org_id, scope.user_id).exists() or log_path(root, scope).exists():
        return True
    for m in buckets.manifests(root, scope.org_id):
        if m.path_for(scope.user_id).exists():
            bucket = BucketDatabase(m.path_for(scope.user_id), embedder_id=m.embedder_id, dim=m.dim)
            try:
                if bucket.member(scope.user_id) is not None:
                    return True
            finally:
                bucket.close()
    return False
