"""End-to-end QA on LongMemEval: ingest each question's haystack into a fresh scope, answer with the Reader,
grade with an LLM judge per category, and report accuracy, tokens and cost.

    python -m benchmarks.longmemeval.qa --data ../shared/data/longmemeval/longmemeval_s_dev.json.gz \\
        --llm openai:gpt-4o-mini --judge openai:gpt-4o [--official-judge ~/src/LongMemEval] \\
        [--extract] [--limit N] [--types multi-session,...] [--ids a,b] [--concurrency 4] [--out DIR]

Resumable: every finished question is one line of ``qa.jsonl`` in ``--out``; a rerun skips those (failed
questions, recorded with ``error``, are retried). With ``--ray [ADDRESS]`` each question is a Ray task (docs/scaling.md):
a worker rebuilds the reader, judge and embedder from ``QASpec`` and answers in a store of its own. Outputs: ``qa.jsonl``, ``summary.json``, ``report.md`` and
``accuracy.png``. The generic pieces (thread pool with a progress bar, resume, summary, report, chart) are shared
with ``benchmarks.locomo.qa``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.arguments import add_embedder_argument, build_embedder
from benchmarks.jsonfile import data_file, write_json, write_markdown
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings, raymap
from graphrecall.embed import CachedEmbedder
from graphrecall.llm import LLM, llm_from_settings

from . import data
from .harness import temporary_store
from .judge import Judge, load_official

T = TypeVar("T")
Row = dict[str, Any]
SCOPE_ORG = "qa-bench"


# == generic harness pieces (also used by benchmarks.locomo.qa) ==================================================
def load_done(path: Path) -> dict[str, Row]:
    """Finished rows of an earlier run, by id; rows that recorded an error are left out, so they run again."""
    done: dict[str, Row] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                if not row.get("error"):
                    done[str(row["id"])] = row
    return done


def run_all(
    items: Sequence[T],
    key: Callable[[T], str],
    work: Callable[[T], Row],
    jsonl: Path,
    *,
    concurrency: int = 1,
    desc: str = "questions",
    progress: bool = True,
    ray: raymap.RayOptions | None = None,
) -> list[Row]:
    """Run ``work`` over the items not already in ``jsonl`` (a thread pool, or Ray tasks with ``ray``: then
    ``work`` must pickle), appending each row as it finishes; return every finished row (earlier and new) in item
    order. One failing item must not stop the run: its row carries the error and is retried on resume."""
    done = load_done(jsonl)
    todo = [it for it in items if key(it) not in done]
    if len(todo) < len(items):
        print(f"{len(items) - len(todo)} {desc} already in {jsonl}, {len(todo)} to run", file=sys.stderr)
    new: dict[str, Row] = {}
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    outcomes = raymap.run_map(work, todo, ray=ray, concurrency=concurrency, desc=desc, progress=progress)
    with jsonl.open("a", encoding="utf-8") as out:
        for o in outcomes:
            row = o.value if o.value is not None else {"id": key(o.item), "error": o.error}
            out.write(json.dumps(row, default=str) + "\n")
            out.flush()
            new[str(row["id"])] = row
    rows = {**done, **new}
    return [rows[key(it)] for it in items if key(it) in rows]


def summarize(rows: Iterable[Row], categories: Callable[[Row], Sequence[str]]) -> dict[str, Any]:
    """Accuracy overall and per category (a row may count in several, e.g. its type and "abstention"), with
    token and cost totals summed from the rows (so a resumed run reports the whole run)."""
    ok = [r for r in rows if not r.get("error")]
    per: dict[str, list[Row]] = defaultdict(list)
    for r in ok:
        for c in categories(r):
            per[c].append(r)

    def acc(rs: list[Row], field: str = "correct") -> float | None:
        vals = [r[field] for r in rs if r.get(field) is not None]
        return sum(bool(v) for v in vals) / len(vals) if vals else None

    tokens = {
        k: sum(int(r.get(k, 0) or 0) for r in ok)
        for k in ("reader_input_tokens", "reader_output_tokens", "judge_input_tokens", "judge_output_tokens",
                  "extract_input_tokens", "extract_output_tokens")
    }  # fmt: skip
    cost = {
        k: sum(float(r.get(k, 0.0) or 0.0) for r in ok)
        for k in ("reader_cost_usd", "judge_cost_usd", "extract_cost_usd")
    }
    return {
        "n": len(ok),
        "accuracy": acc(ok),
        "abstained": sum(bool(r.get("abstained")) for r in ok),
        "by_category": {
            c: {
                "n": len(rs),
                "accuracy": acc(rs),
                "abstained": sum(bool(r.get("abstained")) for r in rs),
                **({"f1": sum(r["f1"] for r in rs) / len(rs)} if rs and "f1" in rs[0] else {}),
            }
            for c, rs in sorted(per.items())
        },
        **({"f1": sum(r["f1"] for r in ok) / len(ok)} if ok and "f1" in ok[0] else {}),
        "tokens": tokens,
        "cost_usd": cost,
        "answer_latency_s_mean": (sum(float(r.get("answer_s", 0.0)) for r in ok) / len(ok)) if ok else None,
    }


def bar_chart(summary: dict[str, Any], path: Path, title: str) -> None:
    """Per-category accuracy as a horizontal bar chart (matplotlib, Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = [(c, v["accuracy"] or 0.0, v["n"]) for c, v in summary["by_category"].items()]
    cats.append(("overall", summary["accuracy"] or 0.0, summary["n"]))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(cats) + 1.2))
    ax.barh([f"{c} (n={n})" for c, _, n in cats], [a * 100 for _, a, _ in cats], color="#4477aa")
    for i, (_, a, _) in enumerate(cats):
        ax.text(a * 100 + 1, i, f"{a:.0%}", va="center", fontsize=8)
    ax.set_xlim(0, 110)
    ax.set_xlabel("accuracy (%)")
    ax.set_title(title, fontsize=10)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render_report(title: str, summary: dict[str, Any], config: dict[str, Any], chart: str | None) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.1%}"

    has_f1 = "f1" in summary
    lines = [f"# {title}", "", f"Command: `{config['command']}`", ""]
    lines += [f"- {k}: {v}" for k, v in config.items() if k != "command"]
    lines += ["", f"**Overall: {pct(summary['accuracy'])}** judge accuracy over {summary['n']} questions"
              + (f", token F1 {summary['f1']:.3f}" if has_f1 else "")
              + f"; {summary['abstained']} abstained.", ""]  # fmt: skip
    head = "| category | n | accuracy | abstained |" + (" F1 |" if has_f1 else "")
    lines += [head, "|---|---:|---:|---:|" + ("---:|" if has_f1 else "")]
    for c, v in summary["by_category"].items():
        f1 = f" {v['f1']:.3f} |" if has_f1 and "f1" in v else (" |" if has_f1 else "")
        lines.append(f"| {c} | {v['n']} | {pct(v['accuracy'])} | {v['abstained']} |{f1}")
    t, cost = summary["tokens"], summary["cost_usd"]
    lines += [
        "",
        "| tokens | input | output | cost (USD) |",
        "|---|---:|---:|---:|",
        f"| reader | {t['reader_input_tokens']} | {t['reader_output_tokens']} | {cost['reader_cost_usd']:.4f} |",
        f"| judge | {t['judge_input_tokens']} | {t['judge_output_tokens']} | {cost['judge_cost_usd']:.4f} |",
        f"| extraction | {t['extract_input_tokens']} | {t['extract_output_tokens']} | {cost['extract_cost_usd']:.4f} |",
        "",
        f"Mean answer latency: {summary['answer_latency_s_mean'] or 0:.1f} s per question.",
    ]
    if chart:
        lines += ["", f"![accuracy per category]({chart})"]
    return "\n".join(lines) + "\n"


def write_outputs(out: Path, title: str, summary: dict[str, Any], config: dict[str, Any], run: Run) -> Path:
    """summary.json, accuracy.png and report.md in ``out``; returns the report's path."""
    write_json(out / "summary.json", {"config": config, "summary": summary}, run, indent=1)
    chart: str | None = "accuracy.png"
    try:
        bar_chart(summary, out / "accuracy.png", title)
    except ImportError:  # matplotlib missing: the report still says everything in tables
        chart = None
    return write_markdown(out / "report.md", render_report(title, summary, config, chart), run)


def build_llm(spec: str, base_url: str | None, timeout: float) -> LLM:
    return llm_from_settings(spec, base_url, timeout=timeout)


def usage_fields(prefix: str, usage: Any) -> Row:
    return {
        f"{prefix}_input_tokens": usage.input_tokens,
        f"{prefix}_output_tokens": usage.output_tokens,
        f"{prefix}_cost_usd": usage.cost_usd,
    }


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", required=True, help="reader model, provider:model (e.g. openai:gpt-4o-mini)")
    p.add_argument("--base-url", default=None, help="reader base URL (OpenAI-compatible server, Ollama host)")
    p.add_argument("--judge", required=True, help="judge model, provider:model")
    p.add_argument("--judge-base-url", default=None)
    p.add_argument(
        "--extract", action="store_true", help="extract facts/events (reader LLM) before answering"
    )
    p.add_argument("--limit", type=int, default=None, help="first N selected questions")
    p.add_argument("--concurrency", type=int, default=2, help="questions answered in parallel (threads)")
    p.add_argument("--tools", choices=("auto", "native", "text", "none"), default="auto")
    p.add_argument("--max-tool-steps", type=int, default=4)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per LLM request")
    p.add_argument(
        "--token-budget", type=int, default=None, help="cap on the reader's context (small models)"
    )
    add_embedder_argument(p)
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    p.add_argument("--no-progress", action="store_true")
    raymap.add_ray_arguments(p, what="questions")


@dataclass(frozen=True)
class QASpec:
    """What a question's run needs, as plain values, so that a Ray worker rebuilds the reader, the judge and the
    embedder itself (LLM clients and stores do not travel; paths are absolute)."""

    llm: str
    base_url: str | None
    judge: str
    judge_base_url: str | None
    timeout: float
    embedder: str
    embed_cache: str | None
    extract: bool
    tools: str
    max_tool_steps: int
    token_budget: int | None
    official_judge: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> QASpec:
        cache = getattr(args, "embed_cache", None)
        official = getattr(args, "official_judge", None)
        return cls(
            llm=args.llm, base_url=args.base_url, judge=args.judge, judge_base_url=args.judge_base_url,
            timeout=args.timeout, embedder=args.embedder, embed_cache=str(cache.resolve()) if cache else None,
            extract=args.extract, tools=args.tools, max_tool_steps=args.max_tool_steps,
            token_budget=args.token_budget, official_judge=str(Path(official).resolve()) if official else None,
        )  # fmt: skip

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class WorkerModels:
    """A Ray worker's reader and embedder, built from the spec on its first task and kept for the next; each task
    answers in a temporary store of its own (``store()``), so nothing on the driver's disk is shared between
    processes and nothing is left behind when Ray kills the worker at the end of the run."""

    def __init__(self, spec: QASpec, prefix: str) -> None:
        self.spec = spec
        self.prefix = prefix
        self.reader = build_llm(spec.llm, spec.base_url, spec.timeout)
        self.embedder = build_embedder(spec.embedder, Path(spec.embed_cache) if spec.embed_cache else None)

    def store(self) -> contextlib.AbstractContextManager[Memory]:
        return temporary_store(self.prefix, self.embedder, Settings(), llm=self.reader)

    def close(self) -> None:
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.close()


# == LongMemEval ================================================================================================
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.longmemeval.qa", description=__doc__.split("\n")[0]
    )
    p.add_argument("--data", required=True, type=data_file, help="longmemeval_*.json[.gz]")
    add_common_arguments(p)
    p.add_argument(
        "--official-judge", type=Path, default=None, help="local LongMemEval checkout: use its judge prompts"
    )
    p.add_argument("--types", default=None, help="comma-separated question types")
    p.add_argument("--ids", default=None, help="comma-separated question ids")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/longmemeval_qa"))
    return p


def categories(row: Row) -> list[str]:
    cats = [str(row["question_type"])]
    if str(row["id"]).endswith(data.ABSTENTION_SUFFIX):
        cats.append("abstention")
    return cats


def answer_question(
    mem: Memory,
    q: data.Question,
    reader: LLM,
    judge: Judge,
    *,
    extract: bool,
    tools: str,
    max_tool_steps: int,
    token_budget: int | None = None,
) -> Row:
    """Fresh scope, ingest, (extract), answer, judge; the scope is erased afterwards."""
    scope = Scope(org_id=SCOPE_ORG, user_id=q.question_id)
    mem.forget(scope)
    t0 = time.perf_counter()
    mem.add_sessions(scope, data.session_inputs(q))
    ingest_s = time.perf_counter() - t0
    row: Row = {"id": q.question_id, "question_type": q.question_type}
    try:
        if extract:
            ex = mem.extract(scope)
            row.update(extract_input_tokens=ex.input_tokens, extract_output_tokens=ex.output_tokens,
                       extract_cost_usd=ex.cost_usd, extract_failed=ex.sessions_failed)  # fmt: skip
        t1 = time.perf_counter()
        ans = mem.answer(
            scope, q.question, question_date=data.parse_date(q.question_date), llm=reader,
            tools=tools, max_tool_steps=max_tool_steps, token_budget=token_budget,  # type: ignore[arg-type]
        )  # fmt: skip
        answer_s = time.perf_counter() - t1
    finally:
        mem.forget(scope)
    verdict = judge.judge(q.question_type, q.question, q.answer, ans.text, q.is_abstention)
    evidence = {r.id for r in data.all_rounds(q) if r.evidence}
    row.update(
        question=q.question, question_date=q.question_date, gold=q.answer, hypothesis=ans.text,
        correct=verdict.correct, judge_reply=verdict.raw, judge_prompt=verdict.prompt_name,
        abstained=ans.abstained, verdict=ans.verdict, mode=ans.mode, classified_as=ans.question_type,
        cited=[c.hit_id for c in ans.citations], cited_evidence=sorted(evidence & {c.hit_id for c in ans.citations}),
        tool_calls=[t.name for t in ans.tool_trace], tool_errors=sum(t.error is not None for t in ans.tool_trace),
        stopped_by_step_limit=ans.stopped_by_step_limit, ingest_s=round(ingest_s, 2), answer_s=round(answer_s, 2),
        stage_latency_s={k: round(v.latency_s, 3) for k, v in ans.stages.items()},
        **usage_fields("reader", ans.usage), **usage_fields("judge", verdict.usage),
    )  # fmt: skip
    return row


class QAWorker(WorkerModels):
    """A Ray worker's reader, judge and embedder for LongMemEval questions."""

    def __init__(self, spec: QASpec) -> None:
        super().__init__(spec, "lme-qa-")
        official = load_official(spec.official_judge) if spec.official_judge else None
        self.judge = Judge(build_llm(spec.judge, spec.judge_base_url, spec.timeout), official)

    def run(self, q: data.Question) -> Row:
        s = self.spec
        with self.store() as mem:
            return answer_question(
                mem, q, self.reader, self.judge, extract=s.extract, tools=s.tools,
                max_tool_steps=s.max_tool_steps, token_budget=s.token_budget,
            )  # fmt: skip


def question_task(spec: QASpec, q: data.Question) -> Row:
    """One question on a Ray worker, with the worker's ``QAWorker`` for this spec (built on its first task)."""
    return raymap.worker_state(("lme-qa", spec.key()), lambda: QAWorker(spec)).run(q)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    this_run = Run.begin()
    ray = raymap.options_from_args(args, parser)  # before any data is read: --ray without Ray stops here
    types = [t.strip() for t in args.types.split(",")] if args.types else None
    ids = {i.strip() for i in args.ids.split(",")} if args.ids else None
    questions = data.load(args.data, types=types, include_abstention=True)
    if ids is not None:
        questions = [q for q in questions if q.question_id in ids]
    questions = questions[: args.limit] if args.limit is not None else questions
    if not questions:
        print("no questions selected", file=sys.stderr)
        return 2
    official = load_official(args.official_judge) if args.official_judge else None
    reader = build_llm(args.llm, args.base_url, args.timeout)
    judge = Judge(build_llm(args.judge, args.judge_base_url, args.timeout), official)
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.out / "store"
    embedder = build_embedder(args.embedder, args.embed_cache)
    started = time.perf_counter()
    jsonl = args.out / "qa.jsonl"
    if ray is not None:
        rows = run_all(
            questions, lambda q: q.question_id, partial(question_task, QASpec.from_args(args)), jsonl,
            progress=not args.no_progress, ray=ray,
        )  # fmt: skip
    else:
        with Memory.open(root, embedder=embedder, settings=Settings(root=root), llm=reader) as mem:
            rows = run_all(
                questions,
                lambda q: q.question_id,
                lambda q: answer_question(
                    mem,
                    q,
                    reader,
                    judge,
                    extract=args.extract,
                    tools=args.tools,
                    max_tool_steps=args.max_tool_steps,
                    token_budget=args.token_budget,
                ),
                jsonl,
                concurrency=args.concurrency,
                progress=not args.no_progress,
            )
    summary = summarize(rows, categories)
    config = {
        "command": "python -m benchmarks.longmemeval.qa " + " ".join(sys.argv[1:] if argv is None else argv),
        "data": str(args.data),
        "reader": args.llm,
        "judge": args.judge,
        "judge_prompts": f"official ({args.official_judge})" if official else "ours (prompts/judge_*.md)",
        "extraction": args.extract,
        "tools": f"{args.tools}, max {args.max_tool_steps} steps",
        "embedder": embedder.id,
        "questions selected": len(questions),
        "ray": None if ray is None else f"{ray.address or 'local'}, {ray.num_cpus} CPU per task",
        "errors": len(questions) - summary["n"],
        "wall_s (this run)": round(time.perf_counter() - started, 1),
    }
    report = write_outputs(args.out, "LongMemEval QA", summary, config, this_run)
    acc = summary["accuracy"]
    print(
        f"accuracy {'n/a' if acc is None else f'{acc:.1%}'} over {summary['n']} questions; report: {report}"
    )
    return 0 if summary["n"] == len(questions) else 1


if __name__ == "__main__":
    raise SystemExit(main())
