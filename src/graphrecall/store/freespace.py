"""How much of a bucket's file a rewrite would give back (``store.compact``): Kuzu 0.11.3 reuses little of what it
frees, so a bucket's file grows with the operations it served, not with the data it holds.

Two estimates, each cheap (one ``fsm_info``, one ``storage_info`` and one count per table: milliseconds, under the
bucket's read gate like any read); the larger is the bucket's free space.

**What Kuzu's own accounting shows** (less than a rewrite gives back: 73-94% of it in the measurements, after churn
or erasure):
- *free pages*: the pages of Kuzu's free-space map (``CALL fsm_info()``), left by rewritten column chunks;
- *dead rows*: a node table keeps the slots of its deleted rows (an erased user's rounds, a replaced round) in its
  column chunks: the table's pages times the share of its slots (``storage_info``'s values of the ``key`` column)
  that no live row holds;
- *oversized edge headers*: after a few checkpoints a relationship table's CSR header columns (offset and length,
  each direction) are written out for a whole node group, 131,072 nodes, whatever the table holds (4 MB per table
  and direction in a bucket of a few users); a rewrite sizes them to the nodes there are.

**Growth since the last rewrite**: a compaction records, beside the bucket (``<bucket>.rewritten.json``), the size
of the file it wrote and each table's rows and bytes. The file should now be that size plus what the rows added
since need at the rewrite's bytes per row (and less for the rows deleted); the rest is free. This sees what the
first estimate cannot: the primary-key indexes' growth under churn (new keys' pages, old ones never freed) and the
slack of column chunks grown by appends (all that a rewrite gave back after a bulk ingest); it came within 3
points of what each rewrite gave back (docs/benchmarks.md "Compaction"). The record is trusted only for the file it describes (its inode: a file
put there otherwise, a restored copy say, has another).

Why not a trial rewrite (``compact.rewrite`` into a scratch file, then compare sizes): it reads and copies every
row (seconds per 10,000 rounds, the bucket's requests held meanwhile), and maintenance asks about every bucket on
every pass. Why not "file size minus what the live rows need" from row counts and column types alone: Kuzu's
compression, its per-table floors (~1 MB per primary-key index) and the gaps it keeps in edge lists make that a
guess in both directions, and a guess that errs high compacts a healthy bucket again and again; the second estimate
takes those from a file Kuzu just wrote instead.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from graphrecall.store import schema

PAGE_BYTES = 4096  # Kuzu's page
ANCHOR_SUFFIX = ".rewritten.json"
NODE_TABLES = ("Scope", *schema.SCOPE_TABLES)
# What a row added since the last rewrite costs beyond its column pages (its primary-key slot and key string), and
# an edge; a table first filled since then, its primary-key index's first pages (~1 MB: 256 partitions).
KEY_BYTES = 64
EDGE_BYTES = 32
TABLE_FLOOR_BYTES = 256 * PAGE_BYTES
# Pages of a CSR header column that a rewrite writes anyway (measured: 13-29 pages per column of a table of a few
# edges, written by COPY).
HEADER_KEPT_PAGES = 32

Query = Callable[[str], list[list[Any]]]


class Readable(Protocol):
    path: Any

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]: ...


@dataclass(frozen=True)
class FreeSpace:
    """A bucket's file and the bytes of it a rewrite would give back (module docstring)."""

    file_bytes: int
    free_pages_bytes: int
    dead_rows_bytes: int
    header_bytes: int
    since_rewrite_bytes: int | None = None  # None: no record of a rewrite of this file

    @property
    def free_bytes(self) -> int:
        seen = self.free_pages_bytes + self.dead_rows_bytes + self.header_bytes
        return min(self.file_bytes, max(seen, self.since_rewrite_bytes or 0))

    @property
    def free_fraction(self) -> float:
        return self.free_bytes / self.file_bytes if self.file_bytes else 0.0


def anchor_path(path: Path) -> Path:
    return Path(f"{path}{ANCHOR_SUFFIX}")


def counts(query: Query) -> dict[str, int]:
    """Live rows of every node table and edges of every pair of relationship tables (``REL:From:To``)."""
    out = {t: int(query(f"MATCH (n:{t}) RETURN count(n)")[0][0]) for t in NODE_TABLES}
    for rel, src, dst in schema.edge_tables():
        out[f"{rel}:{src}:{dst}"] = int(query(f"MATCH (:{src})-[r:{rel}]->(:{dst}) RETURN count(r)")[0][0])
    return out


def table_bytes(query: Query) -> dict[str, int]:
    """The column pages of each node table, in bytes."""
    out = {}
    for t in NODE_TABLES:
        out[t] = PAGE_BYTES * int(query(f"CALL storage_info('{t}') RETURN sum(num_pages)")[0][0] or 0)
    return out


def record_rewrite(path: Path, rows: dict[str, int], sizes: dict[str, int]) -> None:
    """After a compaction put its rewrite at ``path``: what it wrote, for ``measure``'s second estimate (best
    effort: without it, only the first is made)."""
    doc = {"inode": path.stat().st_ino, "bytes": path.stat().st_size, "rows": rows, "table_bytes": sizes}
    tmp = anchor_path(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True))
    os.replace(tmp, anchor_path(path))


def measure(bucket: Readable) -> FreeSpace:
    """The free space of an open bucket (``BucketDatabase``)."""
    path = Path(bucket.path)
    live = counts(bucket.query)
    free_pages = int(bucket.query("CALL fsm_info() RETURN sum(num_pages)")[0][0] or 0)
    slots: dict[str, dict[int, int]] = {}  # node table -> node group -> slots (live and deleted rows)
    dead = 0
    for table in NODE_TABLES:
        chunks = bucket.query(
            f"CALL storage_info('{table}') RETURN node_group_id, column_name, num_pages, num_values"
        )
        groups: dict[int, int] = {}
        for group, column, _, values in chunks:
            if column == "key":
                groups[int(group)] = groups.get(int(group), 0) + int(values)
        slots[table] = groups
        total = sum(groups.values())
        if total:
            pages = sum(int(c[2]) for c in chunks)
            dead += int(pages * max(0, total - live[table]) / total)
    headers = 0
    for rel in [*schema.rel_names(), "OWNS"]:
        src, dst = schema.rel_ends(rel) or ("Scope", "")
        ends = {"fwd": [src], "bwd": [dst] if dst else list(schema.ANCHORED)}
        for group, column, pages, values in bucket.query(
            f"CALL storage_info('{rel}') RETURN node_group_id, column_name, num_pages, num_values"
        ):
            direction, _, part = str(column).partition("_")
            if part not in ("csr_offset", "csr_length") or not values:
                continue
            need = max(slots.get(t, {}).get(int(group), 0) for t in ends[direction])
            usable = max(0, int(pages) - HEADER_KEPT_PAGES)
            headers += int(usable * max(0, int(values) - need) / int(values))
    size = path.stat().st_size
    return FreeSpace(
        file_bytes=size,
        free_pages_bytes=free_pages * PAGE_BYTES,
        dead_rows_bytes=dead * PAGE_BYTES,
        header_bytes=headers * PAGE_BYTES,
        since_rewrite_bytes=_since_rewrite(path, size, live),
    )


def _since_rewrite(path: Path, size: int, live: dict[str, int]) -> int | None:
    """The file's size beyond what its last rewrite wrote and the rows added since need (module docstring); None
    without a record of a rewrite of this very file."""
    doc: dict[str, Any] | None = None
    with contextlib.suppress(OSError, ValueError):
        doc = json.loads(anchor_path(path).read_text())
    if not isinstance(doc, dict) or doc.get("inode") != path.stat().st_ino:
        return None
    rows, sizes = doc.get("rows", {}), doc.get("table_bytes", {})
    expected = float(doc.get("bytes", 0))
    for key, now in live.items():
        then = int(rows.get(key, 0))
        if ":" in key:  # edges
            expected += (now - then) * EDGE_BYTES
        elif then:
            expected += (now - then) * (sizes.get(key, 0) / then + KEY_BYTES)
        elif (
            now
        ):  # a table filled since: its floor, and rows of an unknown size (the largest table's per row)
            per_row = max((sizes.get(t, 0) / n for t, n in rows.items() if ":" not in t and n), default=0.0)
            expected += TABLE_FLOOR_BYTES + now * (per_row + KEY_BYTES)
    return max(0, int(size - expected))
