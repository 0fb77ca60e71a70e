"""A content-hash cache in front of any embedder.

Re-ingesting identical text costs nothing: vectors are keyed by (embedder id, kind, sha256 of the text). The cache
is in memory (bounded LRU) and optionally persistent in a SQLite file, so benchmark reruns over the same haystacks
do not re-embed.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from graphrecall.embed.base import Embedder, TextKind, Vectors, Wrapper

BUSY_TIMEOUT_S = 60.0  # how long a write waits for another process's write to the same cache file


def cache_key(embedder_id: str, kind: TextKind, text: str) -> bytes:
    """The key of one vector in a cache file: model id, text kind and text, hashed (20 bytes). A file written by
    one model never answers for another."""
    return hashlib.sha256(f"{embedder_id}\x00{kind}\x00{text}".encode()).digest()[:20]


class CachedEmbedder(Wrapper):
    def __init__(self, inner: Embedder, *, capacity: int = 50_000, path: str | Path | None = None) -> None:
        super().__init__(inner)
        self._capacity = capacity
        self._mem: OrderedDict[bytes, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # Several processes may share one file (benchmark workers on one machine, Ray tasks): WAL lets readers
            # run beside the one writer, and the busy timeout makes a writer wait its turn instead of failing.
            # Local disks only: SQLite's locking is unreliable on network file systems.
            self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=BUSY_TIMEOUT_S)
            self._db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS vec (k BLOB PRIMARY KEY, v BLOB NOT NULL)")
            self._db.commit()

    def _key(self, text: str, kind: TextKind) -> bytes:
        return cache_key(self.inner.id, kind, text)

    def embed(self, texts: Sequence[str], *, kind: TextKind = "document") -> Vectors:
        keys = [self._key(t, kind) for t in texts]
        out: list[Vectors | None] = [None] * len(texts)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            for i, k in enumerate(keys):
                v = self._mem.get(k)
                if v is not None:
                    self._mem.move_to_end(k)
                    out[i] = v
                else:
                    missing.setdefault(k, []).append(i)
            if missing and self._db is not None:
                found = self._disk_get(list(missing))
                for k, v in found.items():
                    for i in missing.pop(k):
                        out[i] = v
                    self._remember(k, v)
        self.hits += len(texts) - sum(len(ix) for ix in missing.values())
        if missing:
            todo = list(missing)
            vecs = self.inner.embed([texts[missing[k][0]] for k in todo], kind=kind)
            self.misses += len(todo)
            with self._lock:
                for k, v in zip(todo, vecs, strict=True):
                    for i in missing[k]:
                        out[i] = v
                    self._remember(k, v)
                if self._db is not None:
                    self._db.executemany(
                        "INSERT OR IGNORE INTO vec (k, v) VALUES (?, ?)",
                        [
                            (k, np.asarray(v, dtype=np.float32).tobytes())
                            for k, v in zip(todo, vecs, strict=True)
                        ],
                    )
                    self._db.commit()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([v for v in out if v is not None]).astype(np.float32, copy=False)

    def _remember(self, k: bytes, v: Vectors) -> None:
        self._mem[k] = v
        if len(self._mem) > self._capacity:
            self._mem.popitem(last=False)

    def _disk_get(self, keys: list[bytes]) -> dict[bytes, Vectors]:
        assert self._db is not None
        found: dict[bytes, Vectors] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for k, blob in self._db.execute(f"SELECT k, v FROM vec WHERE k IN ({marks})", chunk):
                found[bytes(k)] = np.frombuffer(blob, dtype=np.float32).copy()
        return found

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
