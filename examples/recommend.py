"""Personalised recommendations from memory (the Reader's synthesis mode): the user's stated likes, dislikes and
history shape the answer, and the answer names the preferences it used.

    python examples/recommend.py --llm openai:gpt-4o-mini "Can you suggest a restaurant for Friday?"
    python examples/recommend.py --scripted                     # a canned demo, no model needed
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

from graphrecall import Memory, Scope
from graphrecall.llm import LLM, ScriptedLLM, Step, llm_from_settings
from graphrecall.read import Answer

HISTORY = [
    ("2024-02-03T19:00:00", "I'm vegetarian, and I love spicy food, especially Sichuan and Thai.",
     "Noted! Sichuan has great vegetarian dishes like mapo tofu without pork."),
    ("2024-02-20T12:30:00", "We tried that loud ramen bar downtown; too noisy for me, I prefer quiet places.",
     "Sorry it was loud. Quieter spots are easier for conversation."),
    ("2024-03-11T08:15:00", "My budget for eating out is about 30 dollars per person.",
     "Good to know, I'll keep suggestions in that range."),
]  # fmt: skip


def store_history(mem: Memory, scope: Scope) -> None:
    for i, (when, user, reply) in enumerate(HISTORY):
        mem.add_session(
            scope, [{"role": "user", "content": user}, {"role": "assistant", "content": reply}],
            session_id=f"s{i + 1}", date=when,
        )  # fmt: skip


def scripted_llm() -> ScriptedLLM:
    """Answers only if the prompt really carries the user's preferences (so the demo proves retrieval)."""
    reply = (
        "PREFERENCES:\n- vegetarian [s1@0]\n- loves spicy Sichuan and Thai food [s1@0]\n- prefers quiet places [s2@0]\n"
        "ANSWER: Book a quiet Sichuan restaurant and order mapo tofu made without pork; keep it around $30 each.\n"
        "EVIDENCE: [s1@0], [s2@0]"
    )
    return ScriptedLLM([Step("I'm vegetarian", reply)])


def recommend(mem: Memory, scope: Scope, request: str, llm: LLM, question_date: str | None = None) -> Answer:
    return mem.answer(scope, request, question_date=question_date, mode="synthesis", llm=llm)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("request", nargs="?", default="Can you suggest a restaurant for dinner on Friday?")
    p.add_argument("--llm", help="provider:model (default: $GRAPHRECALL_LLM)")
    p.add_argument("--base-url", help="OpenAI-compatible server or Ollama host")
    p.add_argument("--scripted", action="store_true", help="use a canned model reply (no LLM needed)")
    args = p.parse_args(argv)
    scope = Scope(org_id="demo", user_id="bob")
    with tempfile.TemporaryDirectory() as tmp:
        embedder = None
        if args.scripted:
            from graphrecall.embed import HashingEmbedder

            embedder = HashingEmbedder(64)
        with Memory.open(Path(tmp) / "store", embedder=embedder) as mem:
            store_history(mem, scope)
            llm = scripted_llm() if args.scripted else llm_from_settings(args.llm, args.base_url)
            ans = recommend(mem, scope, args.request, llm, question_date="2024-04-01T12:00:00")
    print(ans.text)
    print("\nbecause you told me:")
    for pref in ans.preferences:
        print(f"  - {pref}")
    for c in ans.citations:
        print(f"  [{c.hit_id}] {c.date:%Y-%m-%d}: {c.snippet[:90]}" if c.date else f"  [{c.hit_id}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
