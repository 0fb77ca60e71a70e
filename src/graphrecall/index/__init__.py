"""Derived indexes beside a scope's Kuzu database (lexical: tantivy; vector: exact scan, usearch HNSW when large), rebuildable from Kuzu.

Kuzu stays the store of record; nothing here is a second truth. See ``scope.ScopeIndexes`` for the layout and the
open-check-rebuild rule, and docs/benchmarks.md ("Index layer") for the measurements behind the choice.
"""

from graphrecall.index.lexical import LexicalIndex, TantivyLexicalIndex
from graphrecall.index.manifest import IndexCorrupt, Manifest
from graphrecall.index.scope import IndexSource, IndexSpace, ScopeIndexes, index_dir
from graphrecall.index.vector import ExactVectorIndex, TieredVectorIndex, VectorIndex

__all__ = [
    "ExactVectorIndex",
    "IndexCorrupt",
    "IndexSource",
    "IndexSpace",
    "LexicalIndex",
    "Manifest",
    "ScopeIndexes",
    "TantivyLexicalIndex",
    "TieredVectorIndex",
    "VectorIndex",
    "index_dir",
]
