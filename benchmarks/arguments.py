"""Command-line argument types that more than one benchmark accepts.

Why a module of its own: two benchmarks taking the same option must parse it the same way, and one benchmark must
not reach into another's private helpers to do so (a refactor of one would silently change the other's command
line).
"""

from __future__ import annotations

import argparse


def token_budgets(text: str) -> list[int]:
    """An argparse ``type`` for ``--context-budgets 2000,4000``: distinct positive token budgets, ascending.

    An empty string gives no budgets (the context check is skipped); anything else that is not a comma-separated
    list of positive integers is a usage error (exit 2), not a traceback halfway through a run.
    """
    try:
        budgets = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--context-budgets must be comma-separated integers, got {text!r}"
        ) from None
    if budgets and budgets[0] < 1:
        raise argparse.ArgumentTypeError(f"--context-budgets must be positive, got {text!r}")
    return budgets
