"""How much of a bucket's file a rewrite would give back (``store.compact``): Kuzu 0.11.3 does not reuse most of what
it frees, so a bucket's file grows with the operations it served, not with the data it holds.

What is measured, from Kuzu's own accounting (one ``fsm_info``, one ``storage_info`` and one count per table: a few
milliseconds, under the bucket's read gate like any read):

- **free pages**: the pages of Kuzu's free-space map (``CALL fsm_info()``), left by rewritten column chunks;
- **dead rows**: a node table keeps the slots of its deleted rows (an erased user's rounds, a replaced round) in its
  column chunks: the table's pages times the share of its slots (``storage_info``'s values of the ``key`` column)
  that no live row holds (``count``);
- **oversized edge headers**: after a few checkpoints a relationship table's CSR header columns (offset and length,
  each direction) are written out for a whole node group, 131,072 nodes, whatever the table holds (4 MB per table
  and direction in a bucket of a few users); a rewrite sizes them to the nodes there are.

Why this and not a trial rewrite (``compact.rewrite`` into a scratch file, then compare sizes): a rewrite reads and
copies every row (seconds per 10,000 rounds, and the bucket paused meanwhile), and maintenance asks about every
bucket on every pass. Why not "file size minus what the live rows need", computed from row counts and column
types: Kuzu's compression, its per-table floors (~1 MB per primary-key index) and the gaps it keeps in edge lists
make that a guess in both directions, and a guess that errs high compacts a healthy bucket again and again. The
three parts above are each a lower bound of what a rewrite gives back, so the bound in ``Settings`` is never passed
by a bucket a rewrite cannot shrink. What they cannot see is the primary-key indexes' own growth under churn and
the slack of column chunks grown by appends: measured (docs/benchmarks.md "Compaction"), the estimate found 50% of
what a rewrite gave back for a bucket churned by small writes and 86-99% after bulk ingest or erasure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from graphrecall.store import schema

PAGE_BYTES = 4096  # Kuzu's page


class Readable(Protocol):
    path: Any

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]: ...


@dataclass(frozen=True)
class FreeSpace:
    """A bucket's file and the bytes of it a rewrite would give back, at least (module docstring)."""

    file_bytes: int
    free_pages_bytes: int
    dead_rows_bytes: int
    header_bytes: int

    @property
    def free_bytes(self) -> int:
        return min(self.file_bytes, self.free_pages_bytes + self.dead_rows_bytes + self.header_bytes)

    @property
    def free_fraction(self) -> float:
        return self.free_bytes / self.file_bytes if self.file_bytes else 0.0


def measure(bucket: Readable) -> FreeSpace:
    """The free space of an open bucket (``BucketDatabase``)."""
    free_pages = int(bucket.query("CALL fsm_info() RETURN sum(num_pages)")[0][0] or 0)
    slots: dict[str, dict[int, int]] = {}  # node table -> node group -> slots (live and deleted rows)
    dead = 0
    for table in ("Scope", *schema.SCOPE_TABLES):
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
            live = int(bucket.query(f"MATCH (n:{table}) RETURN count(n)")[0][0])
            pages = sum(int(c[2]) for c in chunks)
            dead += int(pages * max(0, total - live) / total)
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
            headers += int(int(pages) * max(0, int(values) - need) / int(values))
    return FreeSpace(
        file_bytes=bucket.path.stat().st_size,
        free_pages_bytes=free_pages * PAGE_BYTES,
        dead_rows_bytes=dead * PAGE_BYTES,
        header_bytes=headers * PAGE_BYTES,
    )
