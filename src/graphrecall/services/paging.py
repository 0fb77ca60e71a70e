"""Paging past the end, answered without asking Kuzu to.

Kuzu (0.11) crashes the whole process (a segmentation fault, not an error) on ``SKIP n`` over the aggregating
queries that list facts and sessions once ``n`` runs far past the rows (``?offset=32768`` on a scope of one fact
did; tests/integration/test_http_contract.py found it). A page that starts at or past the last row is empty by
definition, so it is answered here after one cheap count, and the crashing query is never sent.
"""

from __future__ import annotations

from graphrecall.store.database import ScopeDatabase


def past_the_end(db: ScopeDatabase, label: str, offset: int) -> bool:
    """Whether a page starting at ``offset`` over the ``label`` nodes is empty because there are no more."""
    if offset <= 0:
        return False
    return offset >= int(db.query(f"MATCH (n:{label}) RETURN count(n)")[0][0])
