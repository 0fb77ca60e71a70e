"""End-to-end QA on LoCoMo: ingest each conversation once, answer its questions (categories 1-4 by default) with
the Reader, and score token F1 and LLM-judge accuracy per category.

    python -m benchmarks.locomo.qa --data ../shared/data/locomo/locomo_dev.json.gz --llm openai:gpt-4o-mini \\
        --judge openai:gpt-4o [--categories 1,2,3,4] [--limit N] [--concurrency 2] [--out DIR]

Same harness as ``benchmarks.longmemeval.qa`` (resumable ``qa.jsonl``, ``summary.json``, ``report.md``,
``accuracy.png``). The question date is the day after the conversation's last session.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from benchmarks.longmemeval.judge import is_yes
from benchmarks.longmemeval.qa import (
    Row,
    add_common_arguments,
    build_embedder,
    build_llm,
    run_all,
    summarize,
    usage_fields,
    write_outputs,
)
from graphrecall import Memory, Scope, Settings
from graphrecall.llm import LLM
from graphrecall.prompts import load_prompt

from . import data

SCOPE_ORG = "qa-locomo"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.locomo.qa", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, type=Path, help="locomo*.json[.gz]")
    add_common_arguments(p)
    p.add_argument("--categories", default="1,2,3,4", help="comma-separated QA categories (5 = adversarial)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/locomo_qa"))
    return p


def judge_answer(judge: LLM, qa: data.QA, response: str) -> tuple[bool, str, Row]:
    prompt = load_prompt("judge_locomo").render(question=qa.question, answer=qa.answer, response=response)
    resp = judge.complete_sync(prompt, max_tokens=10, purpose="judge")
    return is_yes(resp.text), resp.text.strip(), usage_fields("judge", resp.usage)


def answer_one(
    mem: Memory, conv: data.Conversation, qa: data.QA, reader: LLM, judge: LLM, args: argparse.Namespace
) -> Row:
    scope = Scope(org_id=SCOPE_ORG, user_id=conv.sample_id)
    t0 = time.perf_counter()
    ans = mem.answer(
        scope, qa.question, question_date=conv.last_date + timedelta(days=1), llm=reader,
        tools=args.tools, max_tool_steps=args.max_tool_steps, token_budget=args.token_budget,
    )  # fmt: skip
    answer_s = time.perf_counter() - t0
    correct, raw, judge_usage = judge_answer(judge, qa, ans.text)
    return {
        "id": qa.id, "category": qa.category_name, "question": qa.question, "gold": qa.answer,
        "hypothesis": ans.text, "f1": data.token_f1(ans.text, qa.answer), "correct": correct, "judge_reply": raw,
        "abstained": ans.abstained, "verdict": ans.verdict, "mode": ans.mode,
        "cited": [c.hit_id for c in ans.citations], "tool_calls": [t.name for t in ans.tool_trace],
        "answer_s": round(answer_s, 2), **usage_fields("reader", ans.usage), **judge_usage,
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cats = {int(c) for c in args.categories.split(",") if c.strip()}
    convs = data.load(args.data, cats)
    items = [(c, qa) for c in convs for qa in c.qa]
    items = items[: args.limit] if args.limit is not None else items
    if not items:
        print("no questions selected", file=sys.stderr)
        return 2
    reader = build_llm(args.llm, args.base_url, args.timeout)
    judge = build_llm(args.judge, args.judge_base_url, args.timeout)
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.out / "store"
    embedder = build_embedder(args.embedder, args.embed_cache)
    started = time.perf_counter()
    with Memory.open(root, embedder=embedder, settings=Settings(root=root), llm=reader) as mem:
        for conv in {c.sample_id: c for c, _ in items}.values():  # ingest is idempotent: a rerun adds nothing
            scope = Scope(org_id=SCOPE_ORG, user_id=conv.sample_id)
            mem.add_sessions(scope, list(conv.sessions))
            if args.extract:
                mem.extract(scope)
        rows = run_all(
            items, lambda it: it[1].id, lambda it: answer_one(mem, it[0], it[1], reader, judge, args),
            args.out / "qa.jsonl", concurrency=args.concurrency, progress=not args.no_progress,
        )  # fmt: skip
    summary = summarize(rows, lambda r: [str(r["category"])])
    config = {
        "command": "python -m benchmarks.locomo.qa " + " ".join(sys.argv[1:] if argv is None else argv),
        "data": str(args.data), "reader": args.llm, "judge": args.judge, "categories": sorted(cats),
        "extraction": args.extract, "tools": f"{args.tools}, max {args.max_tool_steps} steps",
        "embedder": embedder.id, "questions selected": len(items), "errors": len(items) - summary["n"],
        "wall_s (this run)": round(time.perf_counter() - started, 1),
    }  # fmt: skip
    report = write_outputs(args.out, "LoCoMo QA", summary, config)
    acc = summary["accuracy"]
    print(f"judge accuracy {'n/a' if acc is None else f'{acc:.1%}'}, F1 {summary.get('f1', 0):.3f} "
          f"over {summary['n']} questions; report: {report}")  # fmt: skip
    return 0 if summary["n"] == len(items) else 1


if __name__ == "__main__":
    raise SystemExit(main())
