"""``store.statements``: each Kuzu connection prepares a statement text once and keeps it (Kuzu 0.11.3 leaks memory
at every prepare, tests/integration/test_kuzu_params.py); a kept statement sees the schema as it is when it runs."""

from __future__ import annotations

import importlib.util  # noqa: F401  (kuzu's pyarrow scan path needs importlib.util imported)
import logging
from collections.abc import Iterator
from pathlib import Path

import kuzu
import pytest

from graphrecall.store import statements
from graphrecall.store.database import _drain


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[kuzu.Connection]:
    db = kuzu.Database(str(tmp_path / "x.kuzu"), buffer_pool_size=16 << 20, max_db_size=1 << 30)
    c = kuzu.Connection(db)
    c.execute("CREATE NODE TABLE T(id STRING, v INT64, PRIMARY KEY(id))")
    yield c
    statements.close(c)
    db.close()


def run(conn: kuzu.Connection, cypher: str, **params: object) -> list[list[object]]:
    return _drain(statements.execute(conn, cypher, params))


def test_a_statement_text_is_prepared_once_per_connection_and_runs_with_each_call_s_parameters(
    conn: kuzu.Connection,
) -> None:
    for i in range(5):
        run(conn, "CREATE (:T {id: $i, v: $v})", i=f"r{i}", v=i)
    assert run(conn, "MATCH (t:T) WHERE t.v >= $lo RETURN t.id ORDER BY t.id", lo=3) == [["r3"], ["r4"]]
    assert run(conn, "MATCH (t:T) WHERE t.v >= $lo RETURN t.id ORDER BY t.id", lo=4) == [["r4"]]
    assert statements.kept(conn) == 2


def test_a_kept_statement_runs_against_the_schema_as_it_is_now(conn: kuzu.Connection) -> None:
    run(conn, "CREATE (:T {id: $i, v: $v})", i="a", v=1)
    conn.execute("ALTER TABLE T ADD w INT64 DEFAULT 7")
    run(conn, "CREATE (:T {id: $i, v: $v})", i="b", v=2)  # prepared before the ALTER, kept
    assert run(conn, "MATCH (t:T) WHERE t.id = $i RETURN t.w", i="b") == [[7]]


def test_a_statement_that_fails_to_prepare_is_not_kept_and_works_once_its_table_exists(
    conn: kuzu.Connection,
) -> None:
    with pytest.raises(RuntimeError, match="U does not exist"):
        run(conn, "CREATE (:U {id: $i})", i="x")
    assert statements.kept(conn) == 0
    conn.execute("CREATE NODE TABLE U(id STRING, PRIMARY KEY(id))")
    run(conn, "CREATE (:U {id: $i})", i="x")
    assert run(conn, "MATCH (u:U) WHERE u.id = $i RETURN count(*)", i="x") == [[1]]


def test_past_the_bound_statements_are_prepared_each_time_and_a_warning_says_why(
    conn: kuzu.Connection, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(statements, "MAX_PREPARED", 3)
    with caplog.at_level(logging.WARNING, logger="graphrecall.store.statements"):
        for i in range(6):  # a value written into the text: six texts
            assert run(conn, f"RETURN $x + {i}", x=1) == [[1 + i]]
    assert statements.kept(conn) == 3
    assert caplog.text.count("statement with a value in its text") == 1


def test_closing_a_connection_drops_what_it_kept(tmp_path: Path) -> None:
    db = kuzu.Database(str(tmp_path / "y.kuzu"), buffer_pool_size=16 << 20, max_db_size=1 << 30)
    c = kuzu.Connection(db)
    run(c, "RETURN $x", x=1)
    assert statements.kept(c) == 1
    statements.close(c)
    assert statements.kept(c) == 0 and c.is_closed
    db.close()


def test_no_store_module_prepares_a_statement_but_this_one() -> None:
    """Every other ``Connection.prepare`` would leak again: statements go through ``statements.execute`` or
    ``statements.prepared``."""
    src = Path(statements.__file__).parents[1]
    offenders = [
        f"{p.relative_to(src)}:{n}"
        for p in sorted(src.rglob("*.py"))
        if p.name != "statements.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if ".prepare(" in line and "await prepare()" not in line
    ]
    assert not offenders, offenders
