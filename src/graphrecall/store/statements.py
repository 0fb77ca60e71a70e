"""Running one Cypher statement on a Kuzu connection: the only way the store passes parameters to Kuzu.

Kuzu 0.11.3's Python binding leaks every parameter it is given with a query *string*: ``Connection.execute(str,
params)`` prepares the statement with the parameters (``Connection._prepare``, meant for dataframes), copies their
values there and never frees the copies; they live as long as the connection, which for a bucket is the life of the
process. A statement prepared alone and executed with the parameters frees them. Measured with Kuzu alone
(``tests/integration/test_kuzu_params.py``): 2,000 calls with 7,680 numbers each grew a process by ~2 GB the first
way and not at all the second; a process that wrote 2,400 users of 20 rounds each grew to 23 GB and was killed
before this (docs/benchmarks.md, "A fleet of users on one node").
"""

from __future__ import annotations

from typing import Any

import kuzu


def execute(
    conn: kuzu.Connection, cypher: str, params: dict[str, Any] | None = None
) -> kuzu.QueryResult | list[kuzu.QueryResult]:
    """``conn.execute(cypher, params)`` with the statement prepared first, alone (module docstring)."""
    if not params:
        return conn.execute(cypher)
    return conn.execute(conn.prepare(cypher), params)
