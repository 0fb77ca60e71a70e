"""Running one Cypher statement on a Kuzu connection: the only way the store passes parameters to Kuzu.

Two leaks of Kuzu 0.11.3's Python binding decide how (measured with Kuzu alone, ``tests/integration/
test_kuzu_params.py``):

- ``Connection.execute(str, params)`` prepares the statement with the parameters (``Connection._prepare``, meant for
  dataframes), copies their values there and never frees the copies: 2,000 calls with 7,680 numbers each grew a
  process by ~2 GB. A statement prepared alone and executed with the parameters frees them.
- Every ``Connection.prepare`` keeps ~4.7 KB that is never freed, whatever the statement (40,000 prepares of one
  small query grew a process by 183 MB; executing one prepared statement 40,000 times grew it by nothing). A
  process that wrote and extracted 3,000 users of 20 rounds grew by ~4.6 MB per user this way (docs/benchmarks.md,
  "A fleet of users on one node").

So each connection prepares a statement once and keeps it (in an attribute of the connection, so the statements go
with it; ``close`` drops them before the connection closes), keyed by its text: the store's statements are a fixed
set (values always go in parameters), so what is kept is bounded by the code, not the data. Kuzu binds a prepared
statement again at each execution, against the catalog as it is then (a statement prepared before an ``ALTER
TABLE`` sees the new column), so a kept statement never runs against a stale schema. A statement that failed to
prepare (a table not there yet) is not kept. Past ``MAX_PREPARED`` texts on one connection, which only a statement
with a value written into its text would reach, statements are prepared each time again and a warning says so once.
"""

from __future__ import annotations

import logging
from typing import Any

import kuzu

log = logging.getLogger(__name__)

MAX_PREPARED = 2_048
"""Statement texts kept per connection (the store uses a few hundred)."""

_KEPT = "_graphrecall_prepared"  # the connection's attribute holding its statements by text


def execute(
    conn: kuzu.Connection, cypher: str, params: dict[str, Any] | None = None
) -> kuzu.QueryResult | list[kuzu.QueryResult]:
    """``conn.execute(cypher, params)`` with the statement prepared once per connection (module docstring)."""
    if not params:
        return conn.execute(cypher)
    return conn.execute(prepared(conn, cypher), params)


def prepared(conn: kuzu.Connection, cypher: str) -> kuzu.PreparedStatement:
    """The connection's prepared statement for ``cypher``, prepared now if it has none (one thread uses a
    connection at a time: a reader's is its thread's, the writer's is under the write lock)."""
    kept: dict[str, kuzu.PreparedStatement] | None = getattr(conn, _KEPT, None)
    if kept is None:
        kept = {}
        setattr(conn, _KEPT, kept)
    statement = kept.get(cypher)
    if statement is not None:
        return statement
    statement = conn.prepare(cypher)
    if not statement.is_success():
        return statement  # ``execute`` raises its error; prepared again next time
    if len(kept) < MAX_PREPARED:
        kept[cypher] = statement
        if len(kept) == MAX_PREPARED:
            log.warning(
                "a Kuzu connection keeps %d statement texts prepared; it prepares any other each time (each "
                "costs memory that Kuzu 0.11.3 never frees): a statement with a value in its text? %.200s",
                len(kept),
                cypher,
            )
    return statement


def kept(conn: kuzu.Connection) -> int:
    """How many statements the connection keeps prepared (for tests and diagnostics)."""
    return len(getattr(conn, _KEPT, None) or {})


def close(conn: kuzu.Connection) -> None:
    """Drop the connection's prepared statements, then close it."""
    setattr(conn, _KEPT, None)
    conn.close()
