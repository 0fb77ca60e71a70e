"""What ``Memory.feedback`` records: a caller saying a hit was useful, or wrong.

- A **fact** marked useful is observed once more (``reinforcement`` + 1, ``last_seen`` now: its salience rises) and
  confirmed: a dispute is lifted. Marked wrong, it is **disputed** (``disputed_at``, an optional note): it stays in
  history and search, shown as disputed, and leaves the profile until someone marks it useful.
- A **round** or an **event** keeps a net count, ``feedback``: useful minus wrong. Ranking reads it only when
  ``RetrievalConfig.feedback_weight`` is above 0 (off by default: docs/months.md "Feedback" measured it).

Why columns on the rows and not a table of feedback events: every populated node table costs each bucket ~1 MB,
every relationship pair ~9 MB (store/schema.py), and what ranking and the profile read is the net state, not the
history of clicks; the count of feedback given is kept by the usage log for the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from graphrecall.store.database import MATCH_SCOPE, ScopeDatabase, WriteTxn, owned

FeedbackKind = Literal["fact", "round", "event"]


@dataclass(frozen=True)
class Found:
    """The row a feedback id names."""

    kind: FeedbackKind
    id: str


def find(db: ScopeDatabase, item_id: str) -> Found | None:
    """The fact, round or event with this id (a hit's id, or a fact's), looked up by key in that order."""
    for kind, table in (("fact", "Fact"), ("round", "Round"), ("event", "Event")):
        if db.query(f"MATCH (n:{table} {{key: $k}}) RETURN n.id", {"k": db.key(item_id)}):
            return Found(kind, item_id)  # type: ignore[arg-type]
    return None


def on_fact(txn: WriteTxn, fact_id: str, *, useful: bool, note: str | None, now: datetime) -> None:
    if useful:
        txn.execute(
            "MATCH (f:Fact {key: $k}) SET f.reinforcement = coalesce(f.reinforcement, 1) + 1, f.last_seen = $t, "
            "f.disputed_at = NULL, f.dispute_note = NULL",
            {"k": txn.key(fact_id), "t": now},
        )
    else:
        txn.execute(
            "MATCH (f:Fact {key: $k}) SET f.disputed_at = $t, f.dispute_note = $n",
            {"k": txn.key(fact_id), "t": now, "n": note},
        )


def on_row(txn: WriteTxn, kind: FeedbackKind, row_id: str, *, useful: bool) -> int:
    """A round's or event's net count moved by one; returns the new count."""
    table = "Round" if kind == "round" else "Event"
    rows = txn.execute(
        f"MATCH (n:{table} {{key: $k}}) SET n.feedback = coalesce(n.feedback, 0) + $d RETURN n.feedback",
        {"k": txn.key(row_id), "d": 1 if useful else -1},
    )
    return int(rows[0][0]) if rows else 0


def round_feedback(db: ScopeDatabase) -> dict[str, int]:
    """Round id -> net feedback, for the scope's rounds that have any (read by ranking when its weight is on)."""
    rows = db.query(
        f"{MATCH_SCOPE}MATCH {owned('r', 'Round')} WHERE r.feedback IS NOT NULL AND r.feedback <> 0 "
        "RETURN r.id, r.feedback"
    )
    return {r[0]: int(r[1]) for r in rows}


def fact_state(db: ScopeDatabase, fact_id: str) -> tuple[int, datetime | None]:
    """(reinforcement, disputed_at) of a fact."""
    rows = db.query("MATCH (f:Fact {key: $k}) RETURN f.reinforcement, f.disputed_at", {"k": db.key(fact_id)})
    return (int(rows[0][0] or 1), rows[0][1]) if rows else (1, None)
