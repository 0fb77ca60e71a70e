"""Never leave a node table's rows ending one past a multiple of 2,048: Kuzu 0.11.3 then misreads list filters.

The defect (measured with Kuzu alone, ``tests/integration/test_node_groups.py``): once a checkpoint has written a
table whose rows end exactly one past a multiple of 2,048 (2,049 rows, 4,097, ...; 2,048 is the batch, or "vector",
Kuzu's scans read: its node groups on disk hold 131,072 rows, ``store.compact``), every filter that tests that last
row with a list (``x.id IN $ids``, ``list_contains($ids, x.id)``, an ``IN`` on any column) returns the row before it
instead, until a later checkpoint finds two or more slots in that last batch. ``=``, comparisons and key lookups
are right. The store reads by ``IN $ids`` everywhere (a search's fact visibility, ``get_facts``, the rounds behind
facts...), so in a bucket the row before can be *another user's*: ``add_fact`` failed to find the fact it had just
written (a ``KeyError``, found by ``benchmarks/perf/buckets.py`` at the bucket's 2,049th fact), and a read of the
newest row of a table returned its neighbour's.

The rule kept here: before a transaction that may have added rows commits, every node table whose rows (by their
internal offsets, which Kuzu never reuses) end one past a multiple of 2,048 gets one more row, created and deleted in
the same transaction. Kuzu keeps a deleted row's slot, so the batch then holds two slots and the filter reads
right; nothing is visible (the row never outlives the transaction, and its key, ``PAD_KEY``, can be no scope's
user id or row key). A database that a checkpoint already left in that state (written before this rule) is
mended when it is opened (``mend``). Cost: one scan of internal ids per node table per commit (~1 ms for 100,000
rows on the test machine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from graphrecall.store.schema import SCOPE_TABLES

BATCH_ROWS = 2_048
"""The rows one Kuzu 0.11.3 scan batch holds (its vector capacity, 2^11): the unit of the defect."""

PAD_KEY = ".pad"
"""The key of the row that pads a batch: a user id never starts with a dot (``models.validate_identifier``) and
a scope's row key starts with its prefix (``0:``, ``1:`` ...), so no real row can have it."""

NODE_TABLES: tuple[str, ...] = ("Scope", *SCOPE_TABLES)
"""A bucket's node tables."""

Run = Callable[[str, dict[str, Any] | None], list[list[Any]]]


def exposed(run: Run, tables: Sequence[str], padded: dict[str, int] | None = None) -> dict[str, int]:
    """The ``tables`` whose last live row opens a batch (its offset a multiple of 2,048, past the first), with that
    offset; a table already padded at that offset (``padded``) is left out. Why the memory of what was padded:
    Kuzu counts only live rows, so after a pad the last live row still opens its batch although the pad's deleted
    slot follows it, and padding again at every commit would add a dead slot each time."""
    out: dict[str, int] = {}
    for table in tables:
        [[last]] = run(f"MATCH (n:{table}) RETURN max(offset(id(n)))", None)
        if last is None or last < BATCH_ROWS or last % BATCH_ROWS:
            continue
        if padded is not None and padded.get(table) == last:
            continue
        out[table] = int(last)
    return out


def pad(run: Run, tables: Sequence[str], padded: dict[str, int] | None = None) -> dict[str, int]:
    """Inside the caller's open transaction: give each exposed table of ``tables`` a second slot in its last batch
    (a row created and deleted). Returns the tables padded, with the offset each was padded after; the
    caller records them in ``padded`` once the transaction has committed."""
    found = exposed(run, tables, padded)
    for table in found:
        run(f"CREATE (:{table} {{key: $k}})", {"k": PAD_KEY})
        run(f"MATCH (n:{table} {{key: $k}}) DELETE n", {"k": PAD_KEY})
    return found
