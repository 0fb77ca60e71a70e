"""What extraction costs: LLM calls and tokens per session and per 1,000 messages, on LongMemEval sessions.

    python benchmarks/extraction/cost.py --data /work/shared/data/longmemeval/longmemeval_s_dev.json.gz \
        --limit-sessions 50                                   # scripted LLM: counts calls and prompt tokens
    python benchmarks/extraction/cost.py --data ... --limit-sessions 3 \
        --llm openai:local --base-url http://127.0.0.1:8181/v1  # a real model: everything, and the wall time

Sessions are taken in order from the first questions' haystacks (one user per question, so later sessions meet
the facts of earlier ones and versioning is exercised) and extracted one by one, as ``Memory.extract`` does.
The scripted model answers with one fact per user message (its first sentence) and NEW for every versioning
question: realistic prompt sizes and call counts, no judgement of quality.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument, build_embedder
from benchmarks.jsonfile import data_file, write_json
from benchmarks.provenance import Run
from graphrecall import Memory
from graphrecall.extract import ExtractionConfig
from graphrecall.llm import LLM, ChatMessage, ScriptedLLM, Step, llm_from_settings

_LINE = re.compile(r"^(m\d+) \[user\]: (.+)$", re.M)


def scripted_reply(messages: list[ChatMessage]) -> dict[str, Any]:
    prompt = messages[-1].content
    if "New facts, each followed" in prompt:
        labels = re.findall(r"^(n\d+): ", prompt, re.M)
        return {
            "decisions": [
                {"fact": n, "decision": "NEW", "target": None, "reason": "scripted"} for n in labels
            ]
        }
    if "Decide whether a newly mentioned entity" in prompt:
        return {"match": None, "confidence": 0.0, "reason": "scripted"}
    facts = []
    for label, text in _LINE.findall(prompt):
        first = re.split(r"(?<=[.!?])\s", text.strip())[0][:200]
        facts.append({"text": f"The user said: {first}", "kind": "other", "message_ids": [label]})
    return {"facts": facts[:8], "events": [], "entities": [], "relations": []}


def load_sessions(path: Path, limit: int) -> list[tuple[str, str, list[dict[str, Any]]]]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as f:
        data = json.load(f)
    out: list[tuple[str, str, list[dict[str, Any]]]] = []
    seen: set[str] = set()
    for q in data:
        for sid, date, msgs in zip(
            q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
        ):
            if sid in seen or not msgs:
                continue
            seen.add(sid)
            out.append((sid, date, msgs))
            if len(out) >= limit:
                return out
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=data_file, required=True)
    p.add_argument("--limit-sessions", type=int, default=50)
    p.add_argument("--llm", default="scripted", help="scripted, or provider:model (e.g. openai:local)")
    p.add_argument("--base-url", default=None)
    add_embedder_argument(p, default="hashing")
    p.add_argument("--timeout", type=float, default=900.0, help="per LLM call, seconds (real models)")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = p.parse_args(argv)
    this_run = Run.begin()

    sessions = load_sessions(args.data, args.limit_sessions)
    llm: LLM = (
        ScriptedLLM([Step(None, scripted_reply)], ordered=False)
        if args.llm == "scripted"
        else llm_from_settings(args.llm, args.base_url, timeout=args.timeout, max_retries=1)
    )
    embedder = build_embedder(args.embedder)
    per_session: list[dict[str, Any]] = []
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as root,
        Memory.open(
            root, embedder=embedder, llm=llm, extraction=ExtractionConfig(llm_timeout_s=args.timeout)
        ) as mem,
    ):
        for i, (sid, date, msgs) in enumerate(sessions, start=1):
            mem.add_session(("bench", "user"), msgs, session_id=sid, date=date)
            t0 = time.perf_counter()
            r = mem.extract(("bench", "user"), session_id=sid)
            per_session.append(
                {"session": sid, "messages": len(msgs), "calls": r.llm_calls, "input_tokens": r.input_tokens,
                 "output_tokens": r.output_tokens, "facts": r.facts_added, "failed": r.sessions_failed,
                 "seconds": round(time.perf_counter() - t0, 2)}
            )  # fmt: skip
            print(f"[{i}/{len(sessions)}] {per_session[-1]}", file=sys.stderr)
        by_purpose = {k: v.model_dump() for k, v in llm.usage.by_purpose().items()}
    n = len(per_session)
    msgs_total = sum(s["messages"] for s in per_session)
    calls = sum(s["calls"] for s in per_session)
    tin = sum(s["input_tokens"] for s in per_session)
    tout = sum(s["output_tokens"] for s in per_session)
    figures = {
        "llm": args.llm,
        "embedder": args.embedder,
        "sessions": n,
        "messages": msgs_total,
        "failed_sessions": sum(s["failed"] for s in per_session),
        "calls_per_session": round(calls / n, 3),
        "max_calls_in_a_session": max(s["calls"] for s in per_session),
        "input_tokens_per_session": round(tin / n, 1),
        "output_tokens_per_session": round(tout / n, 1),
        "calls_per_1k_messages": round(1000 * calls / msgs_total, 1),
        "input_tokens_per_1k_messages": round(1000 * tin / msgs_total),
        "output_tokens_per_1k_messages": round(1000 * tout / msgs_total),
        "median_seconds_per_session": statistics.median(s["seconds"] for s in per_session),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "by_purpose": by_purpose,
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        write_json(args.out, {"figures": figures, "sessions": per_session}, this_run)
    target = figures["calls_per_session"] <= 2.0
    print(f"target <= 2 LLM calls per session on average: {'met' if target else 'MISSED'}", file=sys.stderr)
    return 0 if target else 1


if __name__ == "__main__":
    sys.exit(main())
