"""``store.known.KnownIds``: the ids a database holds, loaded without the write lock and still exact when commits
land while the load scans (the invariant in store/known.py)."""

from __future__ import annotations

import threading
from typing import Any

from graphrecall.store.known import KnownIds


class ScanningDatabase:
    """A database whose Session scan runs ``during_scan`` after it has read its rows (commits landing mid-load)."""

    def __init__(self, sessions: set[str], messages: set[str]) -> None:
        self.tables = {"Session": set(sessions), "Message": set(messages)}
        self.during_scan: list[Any] = []

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        table = cypher.split("(n:")[1].split(")")[0]
        rows = [[i] for i in sorted(self.tables[table])]
        if table == "Session":
            for commit in self.during_scan:
                commit()
        return rows

    def query_each(self, cypher: str, param_sets: list[dict[str, Any]]) -> list[list[Any]]:
        raise AssertionError("not used")

    def commit(self, known: KnownIds, added: dict[str, list[str]], deleted: dict[str, list[str]]) -> None:
        """What ``ScopeDatabase.write`` does: change the tables, then report the commit."""
        for table, ids in deleted.items():
            self.tables[table].difference_update(ids)
        for table, ids in added.items():
            self.tables[table].update(ids)
        known.committed(added, deleted)


def test_commits_that_land_while_the_ids_load_are_not_lost() -> None:
    db = ScanningDatabase({"s1", "s2"}, {"m1", "m2"})
    known = KnownIds(db)
    # Both commits land after the Session scan read its rows and before the Message scan: the scan saw neither for
    # sessions, and the Message scan sees both.
    db.during_scan = [
        lambda: db.commit(known, {"Session": ["s3"], "Message": ["m3"]}, {}),
        lambda: db.commit(known, {}, {"Session": ["s1"], "Message": ["m1"]}),
    ]
    assert known.stored("Session", ["s1", "s2", "s3"]) == {"s2", "s3"}
    assert known.stored("Message", ["m1", "m2", "m3"]) == {"m2", "m3"}


def test_a_commit_replayed_over_a_scan_that_saw_it_changes_nothing() -> None:
    db = ScanningDatabase({"s1"}, set())
    known = KnownIds(db)
    db.commit(known, {"Session": ["s2"]}, {})  # before any load: not recorded, the scan reads it
    assert known.holds("Session", "s2") and known.holds("Session", "s1")
    db.commit(known, {}, {"Session": ["s2"]})  # after the load: applied at once
    assert not known.holds("Session", "s2")


def test_the_load_does_not_wait_for_the_write_lock() -> None:
    """A scope moving into Kuzu holds its database's write lock for the whole flush; planning a turn meanwhile must
    not wait for it (it did: a 0.5-2 s stall of every write to that scope under load)."""
    db = ScanningDatabase({"s1"}, {"m1"})
    db.write_lock = threading.RLock()  # type: ignore[attr-defined]
    known = KnownIds(db)
    answered = threading.Event()
    with db.write_lock:  # type: ignore[attr-defined]
        worker = threading.Thread(target=lambda: known.holds("Session", "s1") and answered.set())
        worker.start()
        worker.join(5)
    assert answered.is_set()
