"""A chat assistant with long-term memory: each turn puts the user's profile (what memory holds about them, by
kind) and what matters from earlier conversations into the system prompt, answers with any configured LLM, and
stores the new turns so later turns (and later sessions) can recall them. When a chat ends, its facts are
extracted, so the next chat's profile knows them.

    python examples/chat_loop.py --llm openai:gpt-4o-mini            # interactive, a real model
    python examples/chat_loop.py --llm openai:local --base-url http://127.0.0.1:8181/v1
    python examples/chat_loop.py --scripted                          # a canned demo, no model needed
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from graphrecall import Memory, Scope
from graphrecall.llm import LLM, ChatMessage, ScriptedLLM, Step, llm_from_settings

SYSTEM = (
    "You are a helpful assistant with long-term memory.\n\n{profile}\nBelow are excerpts of earlier "
    "conversations with this user (dated). Use them and the profile when they are relevant; do not mention them "
    "when they are not.\n\n{memory}"
)


class MemoryChat:
    """One user's chat session: ``send(text)`` returns the reply and stores both turns in memory."""

    def __init__(
        self,
        memory: Memory,
        scope: Scope,
        llm: LLM,
        *,
        session_id: str | None = None,
        token_budget: int = 1200,
        profile_budget: int = 400,
    ) -> None:
        self.memory = memory
        self.scope = scope
        self.llm = llm
        self.session_id = session_id or datetime.now().strftime("chat-%Y%m%d-%H%M%S")
        self.token_budget = token_budget
        self.profile_budget = profile_budget
        self.turns: list[ChatMessage] = []

    def send(self, text: str, *, at: datetime | None = None) -> str:
        when = at or datetime.now()
        # Who the user is (facts by kind, each with its session and date), as of now, within its own budget.
        profile = self.memory.profile(self.scope, as_of=when, token_budget=self.profile_budget)
        found = self.memory.search(self.scope, text, 8, question_date=when)
        past = [h for h in found if h.session_id != self.session_id]  # this session is already in the prompt
        context = "\n".join(
            f"- ({h.date:%Y-%m-%d}) {' '.join(h.text.split())[:300]}" for h in past[:5] if h.date
        )
        system = ChatMessage.system(
            SYSTEM.format(profile=profile.text, memory=context or "(nothing relevant yet)")
        )
        reply = self.llm.complete_sync(
            [system, *self.turns[-10:], ChatMessage.user(text)], purpose="chat"
        ).text.strip()
        self.turns += [ChatMessage.user(text), ChatMessage.assistant(reply)]
        self.memory.add_messages(
            self.scope,
            [{"role": "user", "content": text}, {"role": "assistant", "content": reply or "(no reply)"}],
            session_id=self.session_id,
            date=when,
        )
        return reply


def scripted_llm() -> ScriptedLLM:
    """Replies that depend on what memory put into the prompt, so the demo shows recall really happening."""

    def remembers_biscuit(messages: list[ChatMessage]) -> bool:
        return "beagle named Biscuit" in messages[0].content  # the system prompt holds the recalled memory

    def knows_her_name(messages: list[ChatMessage]) -> bool:  # ... and the profile
        return remembers_biscuit(messages) and "The user's name is Alice." in messages[0].content

    return ScriptedLLM(
        [
            Step(knows_her_name, "Biscuit, your beagle! Take him on a long walk in the park, Alice."),
            Step(remembers_biscuit, "Biscuit, your beagle! Take him on a long walk in the park."),
            Step(None, "Got it, I'll remember that."),
        ],
        ordered=False,
    )


def demo(root: Path) -> list[tuple[str, str]]:
    """Two sessions a week apart: the second recalls what was said in the first."""
    from graphrecall.embed import HashingEmbedder

    scope = Scope(org_id="demo", user_id="alice")
    start = datetime(2024, 5, 1, 18, 0)
    transcript: list[tuple[str, str]] = []
    with Memory.open(root, embedder=HashingEmbedder(64)) as mem:
        llm = scripted_llm()
        first = MemoryChat(mem, scope, llm, session_id="monday")
        for text in ("I just adopted a beagle named Biscuit.", "He loves long walks."):
            transcript.append((text, first.send(text, at=start)))
        # The application knows her name from the sign-up form she filled in during that chat: no LLM needed.
        mem.add_fact(scope, "The user's name is Alice.", kind="attribute", source="monday")
        later = MemoryChat(mem, scope, llm, session_id="next-week")
        question = "What should I do with my beagle this weekend?"
        transcript.append((question, later.send(question, at=start + timedelta(days=7))))
    return transcript


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", help="provider:model (default: $GRAPHRECALL_LLM)")
    p.add_argument("--base-url", help="OpenAI-compatible server or Ollama host")
    p.add_argument("--root", type=Path, help="store directory (default: a temporary one)")
    p.add_argument("--org", default="demo")
    p.add_argument("--user", default="me")
    p.add_argument("--scripted", action="store_true", help="run a canned two-session demo without a model")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.root or Path(tmp) / "store"
        if args.scripted:
            for said, reply in demo(root):
                print(f"you> {said}\nbot> {reply}")
            return 0
        llm = llm_from_settings(args.llm, args.base_url)
        with Memory.open(root, llm=llm) as mem:
            chat = MemoryChat(mem, Scope(org_id=args.org, user_id=args.user), llm)
            print("chat with memory; an empty line quits", file=sys.stderr)
            while (text := input("you> ").strip()) != "":
                print(f"bot> {chat.send(text)}")
            if chat.turns:  # what was learned reaches the next chat's profile
                mem.extract(chat.scope, session_id=chat.session_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
