"""pyarrow columns in the shapes Kuzu's ``COPY`` expects, shared by every writer in ``store``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

TS = pa.timestamp("us")


def vector_column(vectors: Any, dim: int) -> pa.FixedSizeListArray:
    """A ``FLOAT[dim]`` column from a 2-D array or a sequence of 1-D vectors."""
    arr = np.ascontiguousarray(
        np.asarray([np.asarray(v, dtype=np.float32) for v in vectors]), dtype=np.float32
    )
    return pa.FixedSizeListArray.from_arrays(pa.array(arr.ravel(), type=pa.float32()), dim)


def edge_table(pairs: Sequence[tuple[str, str]]) -> pa.Table:
    """A relationship table: ``from`` and ``to`` primary keys."""
    return pa.table({"from": [a for a, _ in pairs], "to": [b for _, b in pairs]})
