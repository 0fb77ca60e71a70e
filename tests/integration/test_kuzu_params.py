"""Kuzu 0.11.3's Python binding leaks the parameters of a query given as a string, and ~4.7 KB at every
``Connection.prepare``; ``store.statements.execute``, which every store query goes through, prepares each statement
alone, once per connection, and leaks neither way.

Found when a process that wrote 2,400 users of 20 rounds each grew to 23 GB and was killed (docs/benchmarks.md, "A
fleet of users on one node"). Each way runs in a fresh process with Kuzu alone, so its resident memory is its own:
300 statements, each given 7,680 numbers (20 rows of a 384-d vector, what one ingest batch passes)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import gc, importlib.util, sys
    import kuzu
    from graphrecall.store.statements import execute

    def rss_mb():
        return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) // 1024

    db = kuzu.Database(sys.argv[1], buffer_pool_size=64 << 20, max_db_size=1 << 34)
    conn = kuzu.Connection(db)
    values = list(range(384 * 20))
    for i in range(320):
        if i == 20:  # past the first calls' one-off allocations
            gc.collect()
            start = rss_mb()
        if sys.argv[2] == "string":
            conn.execute("RETURN size($x)", {"x": values}).close()
        else:
            execute(conn, "RETURN size($x)", {"x": values}).close()
    gc.collect()
    print(rss_mb() - start)
    """
)


def _growth_mb(tmp_path: Path, way: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / way), way], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("way", "leaks"), [("string", True), ("prepared", False)])
def test_parameters_given_with_a_query_string_leak_and_a_prepared_statement_frees_them(
    tmp_path: Path, way: str, leaks: bool
) -> None:
    grew = _growth_mb(tmp_path, way)
    if leaks:  # a canary: when a Kuzu release fixes the binding this fails, and store.statements can go
        assert grew > 150, f"{grew} MB: Kuzu no longer leaks a query string's parameters"
    else:
        assert grew < 40, f"{grew} MB over 300 statements"


PREPARES = textwrap.dedent(
    """
    import gc, importlib.util, sys
    import kuzu
    from graphrecall.store.statements import execute

    def rss_mb():
        return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) // 1024

    db = kuzu.Database(sys.argv[1], buffer_pool_size=64 << 20, max_db_size=1 << 34)
    conn = kuzu.Connection(db)
    for i in range(20_200):
        if i == 200:
            gc.collect()
            start = rss_mb()
        if sys.argv[2] == "prepare-each":
            conn.execute(conn.prepare("RETURN $x + 1"), {"x": i}).close()
        else:
            execute(conn, "RETURN $x + 1", {"x": i}).close()
    gc.collect()
    print(rss_mb() - start)
    """
)


@pytest.mark.parametrize(("way", "leaks"), [("prepare-each", True), ("kept", False)])
def test_each_prepare_leaks_and_a_statement_prepared_once_per_connection_does_not(
    tmp_path: Path, way: str, leaks: bool
) -> None:
    """Found when a process that wrote and extracted 3,000 users grew by ~4.6 MB per user after the fix above."""
    done = subprocess.run(
        [sys.executable, "-c", PREPARES, str(tmp_path / way), way],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    grew = int(done.stdout.strip().splitlines()[-1])
    if leaks:  # a canary, as above: 20,000 prepares
        assert grew > 50, f"{grew} MB: Kuzu no longer leaks at each prepare"
    else:
        assert grew < 10, f"{grew} MB over 20,000 executions of one kept statement"
