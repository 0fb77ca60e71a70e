"""A guided tour: ingest a few months of one user's chats, then ask memory questions and show the evidence.

    python examples/demo.py [--root DIR]

Uses the bundled all-MiniLM-L6-v2 embedder (offline). Without ``--root`` the store lives in a temporary directory
that is removed at the end, so the demo can be run any number of times.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep the output to what the demo prints

from graphrecall import Memory, Scope
from graphrecall.formats import read_sessions

HISTORY = Path(__file__).with_name("chat_history.json")
SCOPE = Scope(org_id="demo", user_id="alex")
QUESTION_DATE = "2024-07-01T09:00:00"  # "now", for the questions below: after the last session in the history
QUESTIONS = [
    "Where do I live now?",
    "What is my dog's name?",
    "What did I plan for my trip?",
    "What diet am I following?",
    "Where do I work now?",
]


def show(memory: Memory, question: str) -> None:
    print(f"\nQ: {question}")
    for hit in memory.search(SCOPE, question, k=3, question_date=QUESTION_DATE):
        signals = ", ".join(f"{name} {value:.2f}" for name, value in sorted(hit.signals.items()))
        when = hit.date.strftime("%Y-%m-%d") if hit.date else "?"
        snippet = textwrap.shorten(" ".join(hit.text.split()), 150, placeholder=" …")
        print(f"  {hit.rank}. [{when}] {hit.session_id} score {hit.score:.4f} ({signals})\n     {snippet}")


def run(root: Path) -> None:
    started = time.perf_counter()
    with Memory.open(root) as memory:
        sessions = read_sessions(HISTORY)
        result = memory.add_sessions(SCOPE, sessions)
        print(
            f"Ingested {HISTORY.name} into {root}: {result.sessions_added} new sessions, "
            f"{result.messages_added} new messages ({result.messages_skipped} already stored)"
        )
        for question in QUESTIONS:
            show(memory, question)
        context = memory.context(SCOPE, "Where do I live now?", token_budget=300, question_date=QUESTION_DATE)
        print(f"\nContext for a reader ({context.token_count} of {context.token_budget} tokens):\n")
        print(textwrap.indent(context.text, "  "))
    print(f"Done in {time.perf_counter() - started:.1f} s.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="store directory to keep (default: a temporary one)")
    args = parser.parse_args(argv)
    if args.root is not None:
        run(args.root)
    else:
        with tempfile.TemporaryDirectory(prefix="graphrecall-demo-") as tmp:
            run(Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
