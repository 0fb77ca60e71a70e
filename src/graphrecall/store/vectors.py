"""How the vectors of rounds and passages are stored: IEEE half precision (binary16), in Kuzu and beside it.

Why: a round has two vectors (its user turn's, its replies'), kept in Kuzu (the record) and in the derived vector
index (what a search scans). At float32 and 384 dimensions that was 6 KB of every round's ~12 KB (and Kuzu's
checkpoint, which rewrites a growing node group's column chunks out of place, left as much again in freed pages;
docs/benchmarks.md "Bytes per round in a bucket"). Half precision halves all of it. What it costs: each component
is rounded to 11 significant bits (relative error <= 2^-11), which moves a cosine similarity by ~1e-5; measured on
the ranking dumps (docs/benchmarks.md): scores moved in the fifth decimal, orders only where two scores were that
close.

One rounding, everywhere: a vector is rounded when it is first written (``rounded``: the write log's entries, so
the log's tail serves the values Kuzu will hold), Kuzu keeps the binary16 bit patterns in an ``INT16[dim]`` column
(Kuzu 0.11.3 has no half-precision type; a ``BLOB`` costs as much memory at checkpoint as float32, measured), and
the derived index keeps the same values (``index.vector``, ``vectors.f16``), so a rebuild from Kuzu restores exactly
what was indexed. Searches compute in float32 over those values.

Facts, events and entities keep ``FLOAT[dim]`` in Kuzu: Kuzu computes their similarities itself
(``array_cosine_similarity`` in ``store.facts``: duplicates, versioning, entity resolution), and they are a few per
session, not two per chat turn. Their derived indexes (``fact_vec``, ``event_vec``: what a search scans) keep
float16 all the same, like every derived vector index: a user with 10 facts and 10 events kept 30 KB of float32
there, half of its derived indexes (docs/benchmarks.md, "Footprint of a user"). The index rounds what Kuzu holds
(``rounded``: one rounding, so a rebuild from Kuzu gives the same values); a search's fact and event cosines move
by ~1e-5, as the rounds' did. An index of float32 vectors written by an earlier release is rebuilt from Kuzu when
the scope is opened (one log line: ``index.scope``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from graphrecall.store.schema import HALF_VECTORS

F32 = npt.NDArray[np.float32]


NEGATIVE_ZERO = -32768
"""The bits of float16 -0.0, which is INT16's smallest value: never stored. A ``COPY`` of an ``INT16`` column that
holds -32768 among small values stores every value of the chunk without its sign in Kuzu 0.11.3 (measured: the
passages of a real model's vectors came back all positive); +0.0 is the same number."""


def is_half(table: str, column: str) -> bool:
    """Whether a bucket stores this vector column in half precision (``schema.HALF_VECTORS``)."""
    return (table, column) in HALF_VECTORS


def rounded(vectors: Any) -> F32:
    """float32 vectors rounded to the nearest half-precision values (still float32): what storing them keeps."""
    return np.asarray(vectors, dtype=np.float32).astype(np.float16).astype(np.float32)


def half_column(vectors: Any, dim: int) -> pa.FixedSizeListArray:
    """An ``INT16[dim]`` column of binary16 bit patterns from a 2-D array or a sequence of 1-D vectors."""
    arr = np.ascontiguousarray(
        np.asarray([np.asarray(v, dtype=np.float32) for v in vectors]).reshape(-1, dim), dtype=np.float32
    )
    bits = arr.astype(np.float16).view(np.int16)
    bits[bits == NEGATIVE_ZERO] = 0
    return pa.FixedSizeListArray.from_arrays(pa.array(bits.ravel(), type=pa.int16()), dim)


def decode(value: Sequence[int] | Any) -> F32:
    """One stored half-precision vector (Kuzu returns ``INT16[]`` as a list of ints) as float32."""
    return np.asarray(value, dtype=np.int16).view(np.float16).astype(np.float32)


def matrix(column: pa.Array | pa.ChunkedArray, dim: int) -> F32:
    """An arrow ``INT16[dim]`` (or ``FLOAT[dim]``) column as an (n, dim) float32 matrix, without Python lists."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise ValueError("a vector column holds nulls; indexed rows need a vector")
    flat: npt.NDArray[Any] = np.asarray(column.flatten().to_numpy(zero_copy_only=False))
    if flat.dtype == np.int16:
        flat = flat.view(np.float16)
    return flat.astype(np.float32).reshape(-1, dim)


def to_half(column: pa.Array | pa.ChunkedArray, dim: int) -> pa.FixedSizeListArray:
    """A ``FLOAT[dim]`` column read from a store of earlier code as the ``INT16[dim]`` column stored now."""
    return half_column(matrix(column, dim), dim)


def from_half(column: pa.Array | pa.ChunkedArray, dim: int) -> pa.FixedSizeListArray:
    """An ``INT16[dim]`` column as ``FLOAT[dim]`` (a store in the layout of earlier code: ``legacy.write_legacy``)."""
    flat = matrix(column, dim).ravel()
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)
