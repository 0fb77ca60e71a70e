"""End-to-end QA on LoCoMo: ingest each conversation once, answer its questions (categories 1-4 by default) with
the Reader, and score token F1 and LLM-judge accuracy per category.

    python -m benchmarks.locomo.qa --data ../shared/data/locomo/locomo_dev.json.gz --llm openai:gpt-4o-mini \\
        --judge openai:gpt-4o [--categories 1,2,3,4] [--limit N] [--concurrency 2] [--out DIR]

Same harness as ``benchmarks.longmemeval.qa`` (resumable ``qa.jsonl``, ``summary.json``, ``report.md``,
``accuracy.png``). The question date is the day after the conversation's last session.

With ``--ray [ADDRESS]`` each conversation is a Ray task (docs/scaling.md): a worker ingests it (and extracts, with
``--extract``) into a store of its own once, answers its questions not yet in ``qa.jsonl`` (``--concurrency``
threads) and returns their rows, which are written as each conversation finishes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.arguments import build_embedder
from benchmarks.jsonfile import data_file
from benchmarks.longmemeval.judge import is_yes
from benchmarks.longmemeval.qa import (
    QASpec,
    Row,
    WorkerModels,
    add_common_arguments,
    build_llm,
    load_done,
    run_all,
    summarize,
    usage_fields,
    write_outputs,
)
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings, raymap
from graphrecall.llm import LLM
from graphrecall.prompts import load_prompt

from . import data

SCOPE_ORG = "qa-locomo"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.locomo.qa", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, type=data_file, help="locomo*.json[.gz]")
    add_common_arguments(p)
    p.add_argument("--categories", default="1,2,3,4", help="comma-separated QA categories (5 = adversarial)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/locomo_qa"))
    return p


def judge_answer(judge: LLM, qa: data.QA, response: str) -> tuple[bool, str, Row]:
    prompt = load_prompt("judge_locomo").render(question=qa.question, answer=qa.answer, response=response)
    resp = judge.complete_sync(prompt, max_tokens=10, purpose="judge")
    return is_yes(resp.text), resp.text.strip(), usage_fields("judge", resp.usage)


def answer_one(mem: Memory, conv: data.Conversation, qa: data.QA, reader: LLM, judge: LLM, args: Any) -> Row:
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


@dataclass(frozen=True)
class Pending:
    """A Ray task's item: one conversation and those of its questions that are not yet answered."""

    conv: data.Conversation
    questions: tuple[data.QA, ...]


class ConversationWorker(WorkerModels):
    """A Ray worker's reader, judge and embedder for LoCoMo conversations, each in a temporary store."""

    def __init__(self, spec: QASpec) -> None:
        super().__init__(spec, "locomo-qa-")
        self.judge = build_llm(spec.judge, spec.judge_base_url, spec.timeout)

    def run(self, item: Pending, concurrency: int) -> list[Row]:
        scope = Scope(org_id=SCOPE_ORG, user_id=item.conv.sample_id)
        with self.store() as mem:
            mem.add_sessions(scope, list(item.conv.sessions))
            if self.spec.extract:
                mem.extract(scope)

            def one(qa: data.QA) -> Row:
                try:
                    return answer_one(mem, item.conv, qa, self.reader, self.judge, self.spec)
                except Exception as e:  # that question's row carries the error and is retried on resume
                    return {"id": qa.id, "error": f"{type(e).__name__}: {e}"}

            with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
                return list(pool.map(one, item.questions))


def conversation_task(spec: QASpec, concurrency: int, item: Pending) -> list[Row]:
    """One conversation on a Ray worker, with the worker's ``ConversationWorker`` (built on its first task)."""
    return raymap.worker_state(("locomo-qa", spec.key()), lambda: ConversationWorker(spec)).run(
        item, concurrency
    )


def run_on_ray(
    items: Sequence[tuple[data.Conversation, data.QA]], args: argparse.Namespace, ray: raymap.RayOptions
) -> list[Row]:
    """The questions not yet in ``qa.jsonl``, a Ray task per conversation; rows are appended as each conversation
    comes back, so the file resumes exactly as a local run's."""
    jsonl = args.out / "qa.jsonl"
    done = load_done(jsonl)
    by_conv: dict[str, Pending] = {}
    for conv, qa in items:
        if qa.id not in done:
            held = by_conv.get(conv.sample_id, Pending(conv, ()))
            by_conv[conv.sample_id] = Pending(conv, (*held.questions, qa))
    work = partial(conversation_task, QASpec.from_args(args), args.concurrency)
    new: dict[str, Row] = {}
    outcomes = raymap.run_map(
        work, list(by_conv.values()), ray=ray, desc="conversations", progress=not args.no_progress
    )
    with jsonl.open("a", encoding="utf-8") as out:
        for o in outcomes:
            rows = (
                o.value
                if o.value is not None
                else [{"id": qa.id, "error": o.error} for qa in o.item.questions]
            )
            for row in rows:
                out.write(json.dumps(row, default=str) + "\n")
                new[str(row["id"])] = row
            out.flush()
    found = {**done, **new}
    return [found[qa.id] for _, qa in items if qa.id in found]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    this_run = Run.begin()
    ray = raymap.options_from_args(args, parser)  # before any data is read: --ray without Ray stops here
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
    if ray is not None:
        rows = run_on_ray(items, args, ray)
    else:
        with Memory.open(root, embedder=embedder, settings=Settings(root=root), llm=reader) as mem:
            for conv in {
                c.sample_id: c for c, _ in items
            }.values():  # ingest is idempotent: a rerun adds nothing
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
        "ray": None if ray is None else f"{ray.address or 'local'}, {ray.num_cpus} CPU per conversation",
        "wall_s (this run)": round(time.perf_counter() - started, 1),
    }  # fmt: skip
    report = write_outputs(args.out, "LoCoMo QA", summary, config, this_run)
    acc = summary["accuracy"]
    print(f"judge accuracy {'n/a' if acc is None else f'{acc:.1%}'}, F1 {summary.get('f1', 0):.3f} "
          f"over {summary['n']} questions; report: {report}")  # fmt: skip
    return 0 if summary["n"] == len(items) else 1


if __name__ == "__main__":
    raise SystemExit(main())
