"""Kuzu storage: one database per scope, schema, single-writer discipline, the LRU pool, queries."""

from graphrecall.store.database import ScopeDatabase, WriteTxn
from graphrecall.store.pool import DatabasePool

__all__ = ["DatabasePool", "ScopeDatabase", "WriteTxn"]
