"""Where a scope's rows live: the bucket databases of an organisation, and which of them holds a user.

Layout: ``<root>/<org>/.buckets/<embedder>/`` holds ``manifest.json`` and the bucket files ``b<n>.kuzu`` (with Kuzu's
``.wal`` beside them while open). A user's rows are in bucket ``stable_hash(user_id) % buckets`` of the folder of
the embedder that wrote them; its derived indexes (``<root>/<org>/<user>.kuzu.idx/``) and write log
(``<user>.log.sqlite``) stay beside the organisation's folder, one per user.

Why a folder per embedder: a bucket's vector columns have one dimension, and a store may hold scopes written with
different models (each scope records its own; ``graphrecall reembed`` moves one at a time). Why a manifest: the
number of buckets is fixed when the folder is created (``Settings.buckets_per_org`` then) and read from the manifest
ever after, so changing the setting never moves a user to another bucket. Why a hash of the user id and no table of
users: any process finds a user's bucket without opening anything. The folder's name starts with a dot, so no walk
of an organisation's files takes it for a user (identifiers never start with a dot).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from graphrecall.index.manifest import fsync_dir

FOLDER = ".buckets"
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1


def stable_hash(user_id: str) -> int:
    """A hash of the user id that every process and version computes alike (Python's ``hash`` is salted)."""
    return int.from_bytes(hashlib.blake2b(user_id.encode(), digest_size=8).digest(), "big")


def embedder_folder(embedder_id: str, dim: int) -> str:
    """The folder name of an embedder's buckets: readable, and unique by a digest of the id and dimension (ids
    such as ``sentence-transformers/all-MiniLM-L6-v2`` hold characters a file name cannot)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embedder_id).strip("._")[:48] or "embedder"
    digest = hashlib.blake2b(f"{embedder_id}\0{dim}".encode(), digest_size=4).hexdigest()
    return f"{slug}-{dim}-{digest}"


@dataclass(frozen=True)
class Manifest:
    """One embedder's buckets of one organisation."""

    folder: Path
    embedder_id: str
    dim: int
    buckets: int

    def bucket_of(self, user_id: str) -> int:
        return stable_hash(user_id) % self.buckets

    def path(self, n: int) -> Path:
        return self.folder / f"b{n:03d}.kuzu"

    def path_for(self, user_id: str) -> Path:
        """The bucket file that holds (or will hold) the user's rows."""
        return self.path(self.bucket_of(user_id))

    def existing(self) -> list[Path]:
        """The bucket files created so far (a bucket is created with its first scope)."""
        return [p for n in range(self.buckets) if (p := self.path(n)).exists()]


def org_folder(root: Path, org_id: str) -> Path:
    return Path(root) / org_id / FOLDER


def read_manifest(folder: Path) -> Manifest | None:
    """The manifest of an embedder's folder, or None when there is none (nothing stored with it yet)."""
    try:
        doc = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    return Manifest(
        folder=folder, embedder_id=doc["embedder_id"], dim=int(doc["dim"]), buckets=int(doc["buckets"])
    )


def manifest(root: Path, org_id: str, embedder_id: str, dim: int) -> Manifest | None:
    """The organisation's manifest for this embedder, or None when the organisation has none yet."""
    return read_manifest(org_folder(root, org_id) / embedder_folder(embedder_id, dim))


def ensure_manifest(root: Path, org_id: str, embedder_id: str, dim: int, buckets: int) -> Manifest:
    """The manifest, written (synced, then renamed into place) with ``buckets`` if the organisation has none for
    this embedder yet; an existing one keeps its count."""
    folder = org_folder(root, org_id) / embedder_folder(embedder_id, dim)
    found = read_manifest(folder)
    if found is not None:
        return found
    if buckets < 1:
        raise ValueError("an organisation needs at least one bucket")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{MANIFEST}.tmp-{uuid.uuid4().hex}"  # one per writer: threads and processes may race
    doc = {"version": MANIFEST_VERSION, "embedder_id": embedder_id, "dim": dim, "buckets": buckets}
    with open(tmp, "w") as f:
        f.write(json.dumps(doc, sort_keys=True))
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, folder / MANIFEST)  # the first writer wins; a racing process reads the winner's count
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    fsync_dir(folder)
    found = read_manifest(folder)
    assert found is not None
    return found


def manifests(root: Path, org_id: str) -> list[Manifest]:
    """Every embedder's manifest of the organisation."""
    base = org_folder(root, org_id)
    if not base.is_dir():
        return []
    return [m for d in sorted(base.iterdir()) if d.is_dir() and (m := read_manifest(d)) is not None]
