"""Each default the store shares with ``Settings`` is defined once (``graphrecall.config``): the store's classes,
built directly by tests and benchmarks, behave as a ``Memory`` built with default settings does.

Why a test: the flush age once had three defaults (20 s in ``Settings``, 5 s in ``ScopeLogs``, 0.5 s in
``Flusher``), so what a benchmark measured through the classes was not what the product ran."""

from __future__ import annotations

import inspect
from typing import Any

from graphrecall.config import Settings
from graphrecall.store.database import BucketDatabase
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.pool import DatabasePool
from graphrecall.store.wal.flusher import BATCH_ENTRIES, Flusher


def default(cls: Any, name: str) -> Any:
    return inspect.signature(cls).parameters[name].default


def test_the_store_classes_default_to_the_settings_defaults() -> None:
    s = Settings()
    assert default(Flusher, "max_age_s") == default(ScopeLogs, "max_age_s") == s.flush_max_age_s
    assert default(ScopeLogs, "resident_rounds") == s.resident_rounds
    assert default(DatabasePool, "capacity") == s.pool_size
    assert default(DatabasePool, "buffer_pool_size") == default(BucketDatabase, "buffer_pool_size")
    assert default(DatabasePool, "buffer_pool_size") == s.buffer_pool_bytes
    assert default(DatabasePool, "buckets_per_org") == s.buckets_per_org
    assert default(Flusher, "batch_entries") == default(ScopeLogs, "batch_entries") == BATCH_ENTRIES


def test_derived_defaults_follow_what_they_derive_from(tmp_path: Any) -> None:
    """The checkpoint age follows the flush age; the open logs, the pool's size; the flush slots, the cores."""
    from graphrecall.store.wal.log import WriteLog

    with WriteLog(tmp_path / "u.log.sqlite") as wlog:
        assert Flusher(wlog, lambda es: None, start=False).checkpoint_age_s == 2 * Settings().flush_max_age_s
        assert Flusher(wlog, lambda es: None, max_age_s=0.1, start=False).checkpoint_age_s == 1.0
    pool = DatabasePool(tmp_path, embedder_id="e", dim=8, capacity=3)
    logs = ScopeLogs(pool, 8)
    try:
        assert logs._capacity == 6
        assert logs._flush_slots._value == Settings().flush_concurrency  # type: ignore[attr-defined]
    finally:
        logs.close()
        pool.close()
