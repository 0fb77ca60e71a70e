"""A scope's derived-index marks as the ``Scope`` row keeps them (schema 7: one integer column per indexed table)."""

from __future__ import annotations

from graphrecall.store.derived import INDEXED_TABLES, mark_params, marks_of, parse_marks
from graphrecall.store.schema import MARK_COLUMNS, scope_columns


def test_every_indexed_table_has_its_mark_column_last_in_the_scope_table() -> None:
    assert set(MARK_COLUMNS) == INDEXED_TABLES
    assert scope_columns()[-len(MARK_COLUMNS) :] == list(
        MARK_COLUMNS.values()
    )  # where ALTER ... ADD puts them


def test_marks_read_back_as_the_json_they_replaced_kept_them() -> None:
    """A table never bumped has no mark (null or 0 in its column), as it had no key in the JSON."""
    json_marks = parse_marks('{"Event": 3, "Fact": 4, "Round": 4}')
    columns = mark_params(json_marks)
    assert columns == {"mark_round": 4, "mark_passage": 0, "mark_fact": 4, "mark_event": 3}
    assert marks_of([columns[c] for c in MARK_COLUMNS.values()]) == json_marks
    assert marks_of([None, None, None, None]) == {}
    assert mark_params(json_marks, ["Fact"]) == {"mark_fact": 4}  # a write sets only the tables it changed
