"""Compare two ranking dumps (``benchmarks.rankings.dump``): the same searches, the same hits in the same order.

    python -m benchmarks.rankings.compare before.json.gz after.json.gz [--tolerance 0]

Ids and kinds must match exactly and in order; scores and signals (the same names) must agree within
``--tolerance`` (absolute, default 0: the same floats). Prints a summary (searches and questions per source,
how many are identical, the largest score difference) and the first differences; exits 1 when any search differs
or is missing from either side, so a script or CI step can rely on it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Rows = Sequence[Mapping[str, Any]]


@dataclass
class Comparison:
    searches: int = 0
    identical: int = 0  # ids, kinds, and every float within the tolerance
    exact: int = 0  # ... and every float bit for bit
    max_diff: float = 0.0
    missing: list[str] = field(default_factory=list)  # keys on one side only
    differences: list[str] = field(default_factory=list)  # one line per differing search
    questions: Counter[str] = field(default_factory=Counter)  # source -> distinct questions compared

    @property
    def ok(self) -> bool:
        return not self.missing and self.identical == self.searches


def load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def diff_search(before: Rows, after: Rows, tolerance: float) -> tuple[str | None, float, bool]:
    """(the first difference in words, or None; the largest float difference; whether all floats are equal)."""
    ids_b, ids_a = [h["id"] for h in before], [h["id"] for h in after]
    if ids_b != ids_a:
        i = next(
            (i for i, (x, y) in enumerate(zip(ids_b, ids_a, strict=False)) if x != y),
            min(len(ids_b), len(ids_a)),
        )
        return f"ids differ from rank {i + 1}: {ids_b[i : i + 3]} -> {ids_a[i : i + 3]}", 0.0, False
    worst = 0.0
    problem: str | None = None
    for rank, (hb, ha) in enumerate(zip(before, after, strict=True), start=1):
        if hb["kind"] != ha["kind"]:
            return f"rank {rank}: kind {hb['kind']} -> {ha['kind']}", worst, False
        if set(hb["signals"]) != set(ha["signals"]):
            return f"rank {rank}: signals {sorted(hb['signals'])} -> {sorted(ha['signals'])}", worst, False
        pairs = [("score", hb["score"], ha["score"])]
        pairs += [(name, hb["signals"][name], ha["signals"][name]) for name in sorted(hb["signals"])]
        for name, x, y in pairs:
            d = abs(float(x) - float(y))
            worst = max(worst, d)
            if d > tolerance and problem is None:
                problem = f"rank {rank} {hb['id']}: {name} {x!r} -> {y!r}"
    return problem, worst, worst == 0.0


def compare(before: Mapping[str, Any], after: Mapping[str, Any], tolerance: float = 0.0) -> Comparison:
    sb, sa = before["searches"], after["searches"]
    out = Comparison()
    out.missing = [f"only before: {k}" for k in sorted(set(sb) - set(sa))]
    out.missing += [f"only after: {k}" for k in sorted(set(sa) - set(sb))]
    seen: set[str] = set()
    for key in sorted(set(sb) & set(sa)):
        out.searches += 1
        question = key.rsplit(":", 1)[0]
        if question not in seen:
            seen.add(question)
            out.questions[question.split("/", 1)[0]] += 1
        problem, worst, exact = diff_search(sb[key], sa[key], tolerance)
        out.max_diff = max(out.max_diff, worst)
        if problem is None:
            out.identical += 1
            out.exact += exact
        else:
            out.differences.append(f"{key}: {problem}")
    return out


def report(c: Comparison, before: Mapping[str, Any], after: Mapping[str, Any], shown: int = 20) -> str:
    per_source = ", ".join(f"{src} {n}" for src, n in sorted(c.questions.items()))
    lines = [
        f"before {before.get('commit')} / after {after.get('commit')} (k = {before.get('k')})",
        f"{c.searches} searches of {sum(c.questions.values())} questions ({per_source})",
        f"identical: {c.identical}/{c.searches} (bit for bit: {c.exact}); largest float difference {c.max_diff:.3g}",
    ]
    if c.missing:
        lines.append(f"{len(c.missing)} searches on one side only, e.g. {c.missing[0]}")
    lines += c.differences[:shown]
    if len(c.differences) > shown:
        lines.append(f"... and {len(c.differences) - shown} more")
    lines.append("IDENTICAL" if c.ok else "DIFFERENT")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.rankings.compare", description=__doc__.split("\n")[0]
    )
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--tolerance", type=float, default=0.0, help="largest absolute float difference accepted")
    p.add_argument("--shown", type=int, default=20, help="differences printed at most")
    args = p.parse_args(argv)
    before, after = load(args.before), load(args.after)
    c = compare(before, after, args.tolerance)
    print(report(c, before, after, args.shown))
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())
