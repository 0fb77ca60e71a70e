"""LoCoMo retrieval benchmark: does the search find the dialog turns each question's answer rests on, beside BM25.

Each conversation is stored once in its own scope through ``Memory.add_sessions`` (sessions with their dates;
speaker A as the user and speaker B as the other party, or with ``--both-user`` both as user turns) and every
question of categories 1-4 is searched with ``Memory.search`` (question date: the day after the last session).
A question's evidence dialog ids (``D3:7``) are mapped to the rounds that hold those turns, using the library's own
round builder, so labels name exactly what the store holds; neither retriever ever sees them.

Metrics per question, per system (ours, each ``--variant``, BM25 over the same rounds in the same run):

- ``turn.evidence_recall@k``: the fraction of the question's evidence turns whose round is in the top k rounds;
- ``session.recall_any@5`` (and the usual recall/nDCG at the other cut-offs) over sessions ranked by their best
  round, evidence sessions being those holding an evidence turn.

``--variant``/``--folds`` work as in the LongMemEval harness (same cross-validation code), choosing on
``turn.evidence_recall@10`` (ties: ``session.recall_any@5``) with folds stratified by category.

    python -m benchmarks.locomo.retrieval --data ../shared/data/locomo/locomo_dev.json.gz [--both-user] --out DIR

With ``--ray [ADDRESS]`` each conversation is a Ray task (docs/scaling.md): a worker rebuilds its store and
embedder from ``ConvSpec`` and returns the conversation's rows, written as they arrive, as here.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument, build_embedder, token_budgets
from benchmarks.jsonfile import data_file, write_json, write_markdown
from benchmarks.locomo import data
from benchmarks.longmemeval import cv, harness, metrics
from benchmarks.longmemeval.bm25 import BM25
from benchmarks.longmemeval.retrieval import SYSTEMS
from benchmarks.percentile import percentile
from benchmarks.provenance import Run
from benchmarks.variants import add_variant_argument
from graphrecall import Memory, ingest, raymap
from graphrecall.config import Settings
from graphrecall.embed import CachedEmbedder, Embedder, embedder_from_spec
from graphrecall.models import Scope

SEARCH_K = 50
KS = (5, 10)
PRIMARY, TIEBREAK = "turn.evidence_recall@10", "session.recall_any@5"
SHOWN = (
    "turn.evidence_recall@10",
    "session.recall_any@5",
    "session.recall_all@10",
    "turn.recall_all@10",
    "turn.ndcg_any@10",
)
_DIA_SPLIT = re.compile(r"[;,\s]+")


@dataclass(frozen=True)
class LabelledRound:
    id: str
    session_id: str
    text: str
    dia_ids: tuple[str, ...]


def labelled_rounds(conv: data.Conversation) -> list[LabelledRound]:
    """The rounds ``Memory`` builds from each session (library round builder), with the dia ids they hold."""
    out: list[LabelledRound] = []
    for session, dias in zip(conv.sessions, conv.dia_ids, strict=True):
        sid = str(session["session_id"])
        msgs = ingest.validate_messages(session["messages"])
        rows = ingest.message_rows(sid, msgs, start_idx=0, date=datetime(2000, 1, 1))
        dia_of = {row.id: dia for row, dia in zip(rows, dias, strict=True)}
        for r in ingest.build_rounds(sid, rows):
            out.append(
                LabelledRound(
                    r.id, sid, f"{r.user_text}\n{r.reply_text}", tuple(dia_of[m] for m in r.message_ids)
                )
            )
    return out


def evidence_turns(qa: data.QA, round_of: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The question's evidence dia ids that exist in the conversation (a few entries pack several ids into one
    string, e.g. ``"D8:6; D9:17"``), and the ids that name no turn."""
    ids = [d for e in qa.evidence for d in _DIA_SPLIT.split(e) if d]
    ids = list(dict.fromkeys(ids))
    return [d for d in ids if d in round_of], [d for d in ids if d not in round_of]


def evidence_recall(
    ranked: Sequence[str], evidence: Sequence[str], round_of: Mapping[str, str], k: int
) -> float:
    """Fraction of the evidence turns whose round is among the top ``k`` rounds."""
    top = set(ranked[:k])
    return sum(round_of[d] in top for d in evidence) / len(evidence) if evidence else 0.0


@dataclass
class QuestionResult:
    """Everything measured for one question; one JSONL line."""

    question_id: str
    sample_id: str
    category: str
    evidence_turns: list[str]
    unknown_evidence: list[str]
    evidence_rounds: list[str]
    evidence_sessions: list[str]
    ranked: dict[str, list[str]]
    scores: dict[str, dict[str, float]]  # system -> "level.metric" -> value
    search_s: float
    context: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def score(
    ranked_by_system: Mapping[str, list[str]],
    evidence: Sequence[str],
    rounds: Sequence[LabelledRound],
    round_of: Mapping[str, str],
    ks: Sequence[int] = KS,
    context: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, float]]:
    session_of = {r.id: r.session_id for r in rounds}
    ev_rounds = sorted({round_of[d] for d in evidence})
    ev_sessions = sorted({session_of[r] for r in ev_rounds})
    out: dict[str, dict[str, float]] = {}
    for name, ranked in ranked_by_system.items():
        sessions = metrics.sessions_from_rounds(ranked, session_of)
        row = {f"turn.{m}": v for m, v in metrics.score(ranked, ev_rounds, ks).items()}
        row |= {f"session.{m}": v for m, v in metrics.score(sessions, ev_sessions, ks).items()}
        row |= {f"turn.evidence_recall@{k}": evidence_recall(ranked, evidence, round_of, k) for k in ks}
        out[name] = row
    if context and "ours" in out:
        for budget, probe in context.items():
            for prefix, inside in (("context.", probe), ("context.whole.", probe.get("whole"))):
                if inside is None:  # a row cached before the whole-round comparison
                    continue
                out["ours"][f"{prefix}sessions_all@{budget}"] = harness.covers_all(
                    inside["sessions"], ev_sessions
                )
                out["ours"][f"{prefix}rounds_all@{budget}"] = harness.covers_all(inside["rounds"], ev_rounds)
    return out


def run_conversation(
    mem: Memory,
    conv: data.Conversation,
    qas: Sequence[data.QA],
    variants: Sequence[tuple[str, harness.VariantSearch]],
    budgets: Sequence[int],
    layout: str,
) -> tuple[list[QuestionResult], float]:
    """Ingest ``conv`` into a fresh scope, search every question with each system, erase the scope."""
    scope = Scope(org_id="locomo", user_id=f"{conv.sample_id}-{layout}")
    mem.forget(scope)
    rounds = labelled_rounds(conv)
    round_of = {d: r.id for r in rounds for d in r.dia_ids}
    t0 = time.perf_counter()
    mem.add_sessions(scope, list(conv.sessions))
    ingest_s = time.perf_counter() - t0
    qd = conv.last_date + timedelta(days=1)
    bm = BM25([r.text for r in rounds])
    known = {r.id for r in rounds}
    out: list[QuestionResult] = []
    try:
        for qa in qas:
            evidence, unknown = evidence_turns(qa, round_of)
            t1 = time.perf_counter()
            ranked = {"ours": [h.id for h in mem.search(scope, qa.question, k=SEARCH_K, question_date=qd)]}
            search_s = time.perf_counter() - t1
            for name, search in variants:
                ranked[name] = search(scope, qa.question, SEARCH_K, qd)
            ranked["bm25"] = [rounds[i].id for i in bm.rank(qa.question, SEARCH_K)]
            strays = [rid for lst in ranked.values() for rid in lst if rid not in known]
            if strays:
                raise RuntimeError(
                    f"{qa.id}: search returned rounds the benchmark cannot label: {strays[:3]}"
                )
            context = harness.context_probe(mem, scope, qa.question, qd, budgets) if evidence else {}
            ev_rounds = sorted({round_of[d] for d in evidence})
            out.append(
                QuestionResult(
                    question_id=qa.id,
                    sample_id=conv.sample_id,
                    category=qa.category_name,
                    evidence_turns=evidence,
                    unknown_evidence=unknown,
                    evidence_rounds=ev_rounds,
                    evidence_sessions=sorted({r.split("@")[0] for r in ev_rounds}),
                    ranked=ranked,
                    scores=score(ranked, evidence, rounds, round_of, KS, context) if evidence else {},
                    search_s=search_s,
                    context=context,
                )
            )
    finally:
        mem.forget(scope)
    return out, ingest_s


@dataclass(frozen=True)
class ConvSpec:
    """What a conversation's run depends on, as plain values, so that a Ray worker rebuilds the same store and
    embedder (paths absolute)."""

    embedder: str
    embed_cache: str
    embed_seed: str | None
    variants: dict[str, dict[str, Any]]
    budgets: list[int]
    layout: str

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class ConvRunner:
    """The spec's embedder, conversation after conversation, each in a temporary store of its own."""

    def __init__(self, spec: ConvSpec) -> None:
        self.spec = spec
        self.embedder: Embedder = build_embedder(
            spec.embedder, Path(spec.embed_cache), seed=Path(spec.embed_seed) if spec.embed_seed else None
        )
        self.settings = (
            Settings.from_env()
        )  # GRAPHRECALL_PASSAGE_FROM_CHARS and the like, as a deployment sets them

    def run(self, conv: data.Conversation) -> tuple[list[QuestionResult], float]:
        with harness.temporary_store("locomo-retrieval-", self.embedder, self.settings) as mem:
            variants = harness.variant_searchers(mem, self.settings.retrieval, self.spec.variants)
            return run_conversation(mem, conv, conv.qa, variants, self.spec.budgets, self.spec.layout)

    def close(self) -> None:
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.close()


def conversation_task(spec: ConvSpec, conv: data.Conversation) -> tuple[list[QuestionResult], float]:
    """One conversation on a Ray worker, with the worker's ``ConvRunner`` for this spec (built on its first task)."""
    return raymap.worker_state(("locomo-retrieval", spec.key()), lambda: ConvRunner(spec)).run(conv)


def summarize(rows: Sequence[QuestionResult], systems: Sequence[str]) -> dict[str, Any]:
    """Means overall and per category for each system, over the questions with at least one evidence turn."""
    scored = [r for r in rows if r.scores]
    out: dict[str, Any] = {
        "n_questions": len(rows),
        "n_scored": len(scored),
        "n_without_evidence": len(rows) - len(scored),
        "systems": list(systems),
    }
    for name in systems:
        out[name] = {
            "overall": metrics.mean_scores(r.scores[name] for r in scored),
            "by_category": {
                c: {"n": n, **m}
                for c, (n, m) in metrics.by_group((r.category, r.scores[name]) for r in scored).items()
            },
        }
    search = sorted(r.search_s for r in rows)
    out["timing"] = {
        "search_mean_s": sum(search) / len(search) if search else 0.0,
        "search_p50_s": percentile(search, 50) if search else 0.0,
    }
    return out


def render_systems_table(
    summary: dict[str, Any], systems: Sequence[str], variants: Mapping[str, Any], shown: Sequence[str]
) -> list[str]:
    """One row per system with its overrides and the ``shown`` overall means."""
    out = []
    for name in systems:
        over = json.dumps(variants[name]) if name in variants else "(defaults)" if name == "ours" else "-"
        cells = [f"{summary[name]['overall'].get(m, float('nan')):.3f}" for m in shown]
        out.append(f"| {name} | `{over}` | " + " | ".join(cells) + " |")
    return out


def render_markdown(summary: dict[str, Any], config: dict[str, Any]) -> str:
    systems = summary["systems"]
    budgets = config["context_budgets"]
    lines = [
        f"# LoCoMo retrieval ({config['layout']})",
        "",
        f"Questions: {summary['n_questions']} of categories {config['categories']} in "
        f"{config['n_conversations']} conversations; scored (evidence maps to a stored turn): {summary['n_scored']}. "
        "Ours = graphrecall `Memory.search`; BM25 = plain Okapi over the same rounds.",
        "",
        f"Command: `{config['command']}`  ",
        f"Embedder: `{config.get('embedder', 'minilm')}` ({config.get('embedder_id', '?')})",
        "",
        "## Overall (k = 10 unless stated)",
        "",
        "| system | overrides | " + " | ".join(SHOWN) + " |",
        "|---|---|" + "---:|" * len(SHOWN),
    ]
    lines += render_systems_table(summary, systems, config.get("variants") or {}, SHOWN)
    for metric in ("turn.evidence_recall@10", "session.recall_any@5"):
        lines += [
            "",
            f"## {metric} by category",
            "",
            "| category | n | " + " | ".join(systems) + " |",
            "|---|---:|" + "---:|" * len(systems),
        ]
        for c, m in summary["ours"]["by_category"].items():
            cells = [f"{summary[s]['by_category'][c].get(metric, float('nan')):.3f}" for s in systems]
            lines.append(f"| {c} | {m['n']} | " + " | ".join(cells) + " |")
    if budgets:
        names = [f"context.{w}_all@{b}" for b in budgets for w in ("sessions", "rounds")]
        lines += [
            "",
            "## Context coverage (ours): all evidence sessions / rounds inside `Memory.context`",
            "",
            "| category | n | " + " | ".join(names) + " |",
            "|---|---:|" + "---:|" * len(names),
        ]
        rows = [("ALL", summary["n_scored"], summary["ours"]["overall"])]
        rows += [(c, m["n"], m) for c, m in summary["ours"]["by_category"].items()]
        for c, n, m in rows:
            lines.append(
                f"| {c} | {n} | " + " | ".join(f"{m.get(x, float('nan')):.3f}" for x in names) + " |"
            )
    if summary.get("cv"):
        lines += ["", cv.render_markdown(summary["cv"], SHOWN, group_label="category")]
    tm = summary["timing"]
    lines += [
        "",
        "## Time",
        "",
        f"- ingest: {config['ingest_s']:.1f} s for {config['n_conversations']} conversations "
        f"({config['n_rounds']} rounds); search (k={SEARCH_K}) mean {tm['search_mean_s'] * 1000:.0f} ms, "
        f"p50 {tm['search_p50_s'] * 1000:.0f} ms",
        "",
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.locomo.retrieval", description=__doc__.split("\n")[0]
    )
    p.add_argument("--data", required=True, type=data_file, help="locomo*.json[.gz]")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/locomo_retrieval"))
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    p.add_argument("--embed-seed", type=Path, default=None, help="another run's embedding cache, read-only")
    add_embedder_argument(p)
    p.add_argument("--categories", default="1,2,3,4", help="comma-separated QA categories (5 = adversarial)")
    p.add_argument(
        "--both-user", action="store_true", help="store both speakers as user turns (default: B as assistant)"
    )
    p.add_argument(
        "--resume", action="store_true", help="reuse cached questions searched with the same settings"
    )
    p.add_argument(
        "--context-budgets",
        type=token_budgets,
        default=[2000, 4000],
        help="token budgets at which Memory.context is checked for holding all evidence, e.g. 2000,4000",
    )
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds over questions (0: none)")
    p.add_argument("--seed", type=int, default=0)
    add_variant_argument(
        p,
        reserved=SYSTEMS,
        help="an extra system: RetrievalConfig overrides, searched over the same stored conversation (repeatable)",
    )
    raymap.add_ray_arguments(p, what="conversations")
    return p


def _parse_categories(text: str) -> set[int]:
    try:
        cats = {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise SystemExit(f"--categories must be comma-separated integers, got {text!r}") from None
    if not cats or not cats <= set(data.CATEGORIES):
        raise SystemExit(f"--categories must be a non-empty subset of 1..5, got {text!r}")
    return cats


def _load_cache(path: Path, wanted: Mapping[str, Any], budgets: Sequence[int]) -> dict[str, QuestionResult]:
    """Cached rows searched with the same layout and settings for every wanted system, probed at every budget."""
    done: dict[str, QuestionResult] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = QuestionResult(**json.loads(line))
                had = row.extra.get("systems", {})
                ok = all(n in had and had[n] == wanted[n] for n in wanted)
                if ok and (not row.evidence_turns or all(str(b) in row.context for b in budgets)):
                    done[row.question_id] = row
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    this_run = Run.begin()
    ray = raymap.options_from_args(args, parser)  # before any data is read: --ray without Ray stops here
    categories = _parse_categories(args.categories)
    layout = "both-user" if args.both_user else "a-user-b-assistant"
    convs = data.load(args.data, categories, both_user=args.both_user)
    if not any(c.qa for c in convs):
        print("no questions selected", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    jsonl = args.out / "retrieval.jsonl"
    if not args.resume and jsonl.exists():
        jsonl.unlink()
    embedder_id = embedder_from_spec(args.embedder).id  # no weights loaded
    # rows record what they were searched with: a cached row of another model or layout is not reused
    wanted: dict[str, Any] = {"ours": {}, "layout": layout, "embedder": embedder_id} | dict(args.variant)
    budgets = args.context_budgets
    done = _load_cache(jsonl, wanted, budgets) if args.resume else {}
    settings = Settings.from_env()
    todo = [c for c in convs if any(qa.id not in done for qa in c.qa)]
    spec = ConvSpec(
        embedder=args.embedder,
        embed_cache=str(args.embed_cache.resolve()),
        embed_seed=str(args.embed_seed.resolve()) if args.embed_seed else None,
        variants=dict(args.variant),
        budgets=list(budgets),
        layout=layout,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows: dict[str, QuestionResult] = dict(done)
    failed: dict[str, str] = {}
    ingest_s = 0.0
    runner: ConvRunner | None = None
    t_start = time.perf_counter()
    try:
        if todo:
            if ray is None:
                runner = ConvRunner(spec)
                work: Any = runner.run
            else:
                work = partial(conversation_task, spec)
            outcomes = raymap.run_map(work, todo, ray=ray, desc="conversations", progress=ray is not None)
            with jsonl.open("a") as out:
                for o in outcomes:
                    conv = o.item
                    if o.value is None:
                        failed[conv.sample_id] = o.error or "no result"
                        print(f"{conv.sample_id}: FAILED: {o.error}", flush=True)
                        continue
                    results, secs = o.value
                    ingest_s += secs
                    for r in results:
                        r.extra["systems"] = wanted
                        rows[r.question_id] = r
                        out.write(json.dumps(r.__dict__) + "\n")
                    out.flush()
                    print(f"{conv.sample_id}: {len(results)} questions, ingest {secs:.1f} s", flush=True)
    finally:
        if runner is not None:
            runner.close()
    if failed:
        print(f"{len(failed)} conversations failed (rerun with --resume to retry them):", file=sys.stderr)
        for sid, err in failed.items():
            print(f"  {sid}: {err}", file=sys.stderr)
        return 1
    ordered = [rows[qa.id] for c in convs for qa in c.qa]
    systems = ["ours", *(name for name, _ in args.variant), "bm25"]
    summary = summarize(ordered, systems)
    candidates = systems[:-1]
    scored = [r for r in ordered if r.scores]
    if args.folds:
        items = [cv.Item(r.question_id, r.category, {s: r.scores[s] for s in candidates}) for r in scored]
        summary["cv"] = cv.cross_validate(
            items,
            candidates,
            k=args.folds,
            seed=args.seed,
            primary=PRIMARY,
            tiebreak=TIEBREAK,
            default="ours",
        ).as_dict()
    config: dict[str, Any] = {
        "command": "python -m benchmarks.locomo.retrieval "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "data": str(args.data),
        "embedder": args.embedder,
        "embedder_id": embedder_id,
        "layout": layout,
        "categories": sorted(categories),
        "n_conversations": len(convs),
        "n_rounds": sum(len(labelled_rounds(c)) for c in convs),
        "question_date": "the day after the conversation's last session",
        "search_k": SEARCH_K,
        "retrieval_config": settings.retrieval.model_dump(),
        "variants": dict(args.variant),
        "context_budgets": budgets,
        "ingest_s": ingest_s,
        "ray": None if ray is None else {"address": ray.address or "local", "num_cpus": ray.num_cpus},
        "questions_from_cache": len(done),
        "wall_s": time.perf_counter() - t_start,
        "unknown_evidence": sorted({d for r in ordered for d in r.unknown_evidence}),
    }
    result = {"config": config, "summary": summary, "questions": [r.__dict__ for r in ordered]}
    write_json(args.out / "retrieval.json", result, this_run, indent=1)
    md = render_markdown(summary, config)
    write_markdown(args.out / "retrieval.md", md, this_run)
    print(md)
    print(f"wrote {args.out / 'retrieval.json'} and {args.out / 'retrieval.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
