"""Where a store's bytes go: each bucket's file by Kuzu table and column, its free pages, and each scope's derived
index files, per round.

    python -m benchmarks.perf.buckets --parts rounds --sizes 10000 --work /tmp/b
    python -m benchmarks.perf.breakdown /tmp/b/rounds10000 --rounds 10000

Kuzu's own accounting, read-only (the buckets must be closed): ``CALL storage_info(<table>)`` gives each column
chunk's pages (4 KiB), ``CALL fsm_info()`` the free ranges (pages a checkpoint freed and nothing has reused since:
Kuzu 0.11.3 rewrites a growing column chunk elsewhere and truncates only free pages at the end of the file). What
neither names is the primary-key hash indexes, the catalog and the page metadata ("other").
"""

from __future__ import annotations

import argparse
import importlib.util  # noqa: F401  (kuzu's pyarrow scan path needs importlib.util imported)
from collections import Counter
from pathlib import Path
from typing import Any

import kuzu

PAGE = 4096


def bucket(path: Path) -> dict[str, int]:
    """Bytes of one bucket file by ``table.column`` (a column's children summed: a string's offsets and data, a
    list's), plus ``free`` and ``other``."""
    db = kuzu.Database(str(path), read_only=True)
    conn = kuzu.Connection(db)

    def rows(cypher: str) -> list[list[Any]]:
        result = conn.execute(cypher)
        assert not isinstance(result, list)
        out: list[list[Any]] = []
        while result.has_next():
            out.append(list(result.get_next()))
        return out

    try:
        out: Counter[str] = Counter()
        for [table] in rows("CALL show_tables() RETURN name"):
            for kind, column, pages in rows(
                f"CALL storage_info('{table}') RETURN table_type, column_name, num_pages"
            ):
                out[f"{table}.{_part(str(kind), str(column))}"] += int(pages) * PAGE
        [[free]] = rows("CALL fsm_info() RETURN sum(num_pages)")
        out["free"] = int(free or 0) * PAGE
        out["other"] = path.stat().st_size - sum(out.values())
        return dict(out)
    finally:
        conn.close()
        db.close()


def _part(kind: str, column: str) -> str:
    """A column chunk's column (its offsets, data, nulls and index children folded in); a relationship table's
    chunks as its CSR headers (offsets and lengths per source node) or its edges."""
    if kind != "NODE":
        return "csr headers" if "csr_" in column else "edges"
    suffixes = ("_null", "_index", "_data", "_offset", "_size")
    while column.endswith(suffixes):
        column = column.rsplit("_", 1)[0]
    return column


def indexes(root: Path) -> dict[str, int]:
    """Bytes of every scope's derived indexes by index and file kind (``vec-round_user/vectors.f16``, ...)."""
    out: Counter[str] = Counter()
    for d in root.rglob("*.kuzu.idx"):
        for f in d.rglob("*"):
            if f.is_file():
                part = f.relative_to(d).parts
                name = part[0] + "/" + (f.suffix.lstrip(".") if part[0].startswith("lex-") else f.name)
                out[name] += f.stat().st_size
    return dict(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", type=Path, help="a store's root (what Memory.open was given)")
    ap.add_argument("--rounds", type=int, required=True, help="rounds stored, to divide by")
    ap.add_argument(
        "--min-bytes", type=int, default=10, help="leave out lines below this many bytes per round"
    )
    a = ap.parse_args()
    parts: Counter[str] = Counter()
    for f in a.root.rglob("*.kuzu"):
        if ".buckets" in f.parts:
            parts.update({f"kuzu {k}": v for k, v in bucket(f).items()})
    parts.update({f"index {k}": v for k, v in indexes(a.root).items()})
    total = sum(v for v in parts.values())
    print(f"| part | bytes per round |\n|---|---:|\n| total | {total / a.rounds:,.0f} |")
    for name, v in sorted(parts.items(), key=lambda kv: -kv[1]):
        if v / a.rounds >= a.min_bytes:
            print(f"| {name} | {v / a.rounds:,.0f} |")


if __name__ == "__main__":
    main()
