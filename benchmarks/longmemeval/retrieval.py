"""LongMemEval_S retrieval benchmark: graphrecall's hybrid search against plain BM25, session and turn level.

For each question a fresh scope is filled with the question's haystack through ``Memory.add_sessions`` and
searched with ``Memory.search`` (library defaults, ``question_date`` given), then erased. Labels (answer session ids,
``has_answer``) are used for scoring only; neither retriever ever sees them.

Turn level deviates from the official code on purpose: the official corpus holds user turns only, which leaves the
single-session-assistant questions (evidence only in assistant turns) without any relevant document. Our unit is a
round (a user turn and the reply that followed), and a round is relevant when it holds an evidence message.

    python -m benchmarks.longmemeval.retrieval --data /path/longmemeval_s_dev.json.gz [--ray [ADDRESS]]

With ``--ray`` each question is a Ray task (docs/scaling.md): a worker builds its own store and embedder from the
plain settings in ``RunSpec`` and returns the question's row, which is written as it arrives, as here.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument, token_budgets
from benchmarks.arguments import build_embedder as build_embedder_from
from benchmarks.jsonfile import data_file, write_json, write_markdown
from benchmarks.longmemeval import cv, data, harness, metrics
from benchmarks.longmemeval.bm25 import BM25
from benchmarks.percentile import percentile
from benchmarks.provenance import Run
from benchmarks.variants import add_variant_argument, config_overrides
from graphrecall import Memory, raymap
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.embed import CachedEmbedder, Embedder, embedder_from_spec
from graphrecall.models import Scope

SEARCH_K = 50
SYSTEMS = ("ours", "bm25")
LEVELS = ("session", "turn")


@dataclass
class QuestionResult:
    """Everything measured for one question; one JSONL line."""

    question_id: str
    question_type: str
    n_sessions: int
    n_rounds: int
    evidence_sessions: list[str]
    evidence_rounds: list[str]
    ranked: dict[str, list[str]]  # system -> round ids, best first (top SEARCH_K)
    scores: dict[str, dict[str, dict[str, float]]]  # system -> level -> metric -> value
    first_rank: dict[str, dict[str, int | None]]  # system -> level -> rank of first evidence
    ingest_s: float
    search_s: float
    bm25_s: float
    turn_scoreable: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    # str(token budget) -> {"rounds": round ids inside Memory.context, "sessions": their sessions, "tokens": used}
    context: dict[str, dict[str, Any]] = field(default_factory=dict)


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--k-eval must be comma-separated integers, got {text!r}") from None
    if not ks or ks[0] < 1 or ks[-1] > SEARCH_K:
        raise argparse.ArgumentTypeError(f"--k-eval values must lie in 1..{SEARCH_K}, got {text!r}")
    return ks


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.longmemeval.retrieval", description=__doc__.split("\n")[0]
    )
    p.add_argument("--data", required=True, type=data_file, help="longmemeval_s*.json[.gz]")
    p.add_argument("--limit", type=int, default=None, help="first N scoreable questions only")
    p.add_argument("--types", default=None, help="comma-separated question types to keep")
    p.add_argument(
        "--per-type",
        type=int,
        default=None,
        metavar="N",
        help="the first N scoreable questions of each type, in file order (a subset spread over the types; "
        "--limit applies after it)",
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/longmemeval"))
    p.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    add_embedder_argument(p)
    p.add_argument("--k-eval", type=_parse_ks, default=[5, 10], help="cut-offs, e.g. 5,10")
    p.add_argument(
        "--resume",
        action="store_true",
        help="reuse per-question rows in retrieval.jsonl that were searched with the same settings (rescored, "
        "not re-ingested); only missing or changed questions are ingested",
    )
    p.add_argument(
        "--context-budgets",
        type=token_budgets,
        default=[2000, 4000],
        help="token budgets at which Memory.context is checked for holding all gold sessions, e.g. 2000,4000",
    )
    p.add_argument(
        "--embed-seed",
        type=Path,
        default=None,
        help="another run's embedding cache, read-only, consulted before the model (never written)",
    )
    p.add_argument(
        "--reverse",
        action="store_true",
        help="ingest questions last-first (same results; lets a run going forwards share work via --embed-seed)",
    )
    p.add_argument(
        "--cached-only",
        action="store_true",
        help="score only the questions cached with these settings, ingest nothing",
    )
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds over questions (0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fold assignment")
    p.add_argument(
        "--config",
        type=config_overrides,
        default=None,
        help='RetrievalConfig overrides for "ours" as JSON, e.g. \'{"rrf_k": 30}\'',
    )
    add_variant_argument(
        p,
        reserved=SYSTEMS,
        help="an extra system: RetrievalConfig overrides on top of ours, searched over the same ingested scope "
        "and scored side by side (repeatable); e.g. --variant 'k30={\"rrf_k\": 30}'",
    )
    raymap.add_ray_arguments(p, what="questions")
    return p


def score_question(
    q: data.Question,
    ranked_by_system: dict[str, list[str]],
    labelled: Sequence[data.LabelledRound],
    ks: Sequence[int],
    context: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, dict[str, int | None]], bool, list[str]]:
    session_of = {r.id: r.session_id for r in labelled}
    ev_rounds = sorted(data.evidence_rounds(q, labelled))
    scores, firsts = score_ranked(
        ranked_by_system, session_of, list(q.answer_session_ids), ev_rounds, ks, context
    )
    return scores, firsts, bool(ev_rounds), ev_rounds


def score_ranked(
    ranked_by_system: Mapping[str, list[str]],
    session_of: Mapping[str, str],
    ev_sessions: Sequence[str],
    ev_rounds: Sequence[str],
    ks: Sequence[int],
    context: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, dict[str, int | None]]]:
    """Session and turn metrics of each system's ranking (turn level only when there are evidence rounds)."""
    scores: dict[str, dict[str, dict[str, float]]] = {}
    firsts: dict[str, dict[str, int | None]] = {}
    for name, ranked in ranked_by_system.items():
        sessions = metrics.sessions_from_rounds(ranked, session_of)
        scores[name] = {"session": metrics.score(sessions, ev_sessions, ks)}
        firsts[name] = {"session": metrics.first_rank(sessions, ev_sessions)}
        if ev_rounds:
            scores[name]["turn"] = metrics.score(ranked, ev_rounds, ks)
            firsts[name]["turn"] = metrics.first_rank(ranked, ev_rounds)
    if context:
        scores["ours"]["context"] = context_scores(context, ev_sessions, ev_rounds)
    return scores, firsts


def context_scores(
    context: Mapping[str, Mapping[str, Any]], ev_sessions: Sequence[str], ev_rounds: Sequence[str]
) -> dict[str, float]:
    """Per budget: are all gold sessions (and all evidence rounds, when there are any) inside the context."""
    out: dict[str, float] = {}
    for budget, probe in context.items():
        for prefix, inside in (("", probe), ("whole.", probe.get("whole"))):
            if inside is None:  # a row cached before the whole-round comparison
                continue
            out[f"{prefix}sessions_all@{budget}"] = harness.covers_all(inside["sessions"], ev_sessions)
            if ev_rounds:
                out[f"{prefix}rounds_all@{budget}"] = harness.covers_all(inside["rounds"], ev_rounds)
            if "evidence_shown" in inside:
                out[f"{prefix}evidence_shown@{budget}"] = inside["evidence_shown"]
    return out


def run_question(
    mem: Memory,
    q: data.Question,
    ks: Sequence[int],
    variants: Sequence[tuple[str, harness.VariantSearch]] = (),
    budgets: Sequence[int] = (),
) -> QuestionResult:
    scope = Scope(org_id="lme", user_id=q.question_id)
    mem.forget(scope)
    labelled = data.all_rounds(q)
    t0 = time.perf_counter()
    mem.add_sessions(scope, data.session_inputs(q))
    t1 = time.perf_counter()
    hits = mem.search(scope, q.question, k=SEARCH_K, question_date=q.question_date)
    t2 = time.perf_counter()
    ranked = {"ours": [h.id for h in hits]}
    qd = data.parse_date(q.question_date)
    for name, search in variants:
        ranked[name] = search(scope, q.question, SEARCH_K, qd)
    gold = set(q.answer_session_ids)
    evidence = [t.content for s in q.sessions if s.session_id in gold for t in s.turns if t.has_answer]
    context = harness.context_probe(mem, scope, q.question, qd, budgets, evidence)
    t2v = time.perf_counter()
    mem.forget(scope)
    bm = BM25([r.text for r in labelled])
    ranked["bm25"] = [labelled[i].id for i in bm.rank(q.question, SEARCH_K)]
    t3 = time.perf_counter()
    known = {r.id for r in labelled}
    unknown = [rid for lst in ranked.values() for rid in lst if rid not in known]
    if unknown:
        raise RuntimeError(
            f"{q.question_id}: search returned rounds the benchmark cannot label: {unknown[:3]}"
        )
    scores, firsts, scoreable, ev_rounds = score_question(q, ranked, labelled, ks, context)
    return QuestionResult(
        question_id=q.question_id,
        question_type=q.question_type,
        n_sessions=len(q.sessions),
        n_rounds=len(labelled),
        evidence_sessions=list(q.answer_session_ids),
        evidence_rounds=ev_rounds,
        ranked=ranked,
        scores=scores,
        first_rank=firsts,
        ingest_s=t1 - t0,
        search_s=t2 - t1,
        bm25_s=t3 - t2v,
        turn_scoreable=scoreable,
        context=context,
    )


@dataclass(frozen=True)
class RunSpec:
    """Everything a question's run depends on, as plain values, so that a Ray worker on another machine rebuilds
    the same store and embedder from it (paths are absolute: a worker's working directory is its own)."""

    # a spec (benchmarks.arguments.embedder_spec): a model is cached in embed_cache, hashing is not
    embedder: str
    embed_cache: str
    embed_seed: str | None
    config: dict[str, Any]  # RetrievalConfig overrides for "ours"
    variants: dict[str, dict[str, Any]]
    ks: list[int]
    budgets: list[int]
    wanted: dict[str, Any]

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class QuestionRunner:
    """The spec's embedder and settings, question after question; each question gets a temporary store of its own
    (``harness.temporary_store``), removed when the question is done."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.embedder = build_embedder(spec)
        self.settings = (
            Settings.from_env()
        )  # GRAPHRECALL_PASSAGE_FROM_CHARS and the like, as a deployment sets them
        if spec.config:
            self.settings.retrieval = RetrievalConfig.model_validate(
                self.settings.retrieval.model_dump() | spec.config
            )

    def run(self, q: data.Question) -> QuestionResult:
        with harness.temporary_store("lme-retrieval-", self.embedder, self.settings) as mem:
            variants = harness.variant_searchers(mem, self.settings.retrieval, self.spec.variants)
            r = run_question(mem, q, self.spec.ks, variants, self.spec.budgets)
        r.extra["systems"] = self.spec.wanted
        r.extra["embedder"] = self.embedder.id
        return r

    def close(self) -> None:
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.close()


def build_embedder(spec: RunSpec) -> Embedder:
    """The run's embedder: a model behind the run's cache file (and seed), hashing uncached."""
    return build_embedder_from(
        spec.embedder, Path(spec.embed_cache), seed=Path(spec.embed_seed) if spec.embed_seed else None
    )


def question_task(spec: RunSpec, q: data.Question) -> QuestionResult:
    """One question on a Ray worker: the worker's runner for this spec (built on its first task) runs it."""
    runner = raymap.worker_state(("lme-retrieval", spec.key()), lambda: QuestionRunner(spec))
    return runner.run(q)


def summarize(rows: Sequence[QuestionResult], ks: Sequence[int]) -> dict[str, Any]:
    """Means overall and per question type, for each system and level (turn level over scoreable questions)."""
    out: dict[str, Any] = {"n_questions": len(rows), "n_turn_scoreable": sum(r.turn_scoreable for r in rows)}
    systems = list(dict.fromkeys(name for r in rows for name in r.scores))
    out["systems"] = systems
    for sys_name in systems:
        out[sys_name] = {}
        for level in LEVELS:
            keep = [r for r in rows if level in r.scores.get(sys_name, {})]
            out[sys_name][level] = {
                "overall": metrics.mean_scores(r.scores[sys_name][level] for r in keep),
                "by_type": {
                    t: {"n": n, **m}
                    for t, (n, m) in metrics.by_group(
                        (r.question_type, r.scores[sys_name][level]) for r in keep
                    ).items()
                },
            }
    ctx = [r for r in rows if "context" in r.scores.get("ours", {})]
    if ctx:
        out["context"] = {
            "overall": metrics.mean_scores(r.scores["ours"]["context"] for r in ctx),
            "by_type": {
                t: {"n": n, **m}
                for t, (n, m) in metrics.by_group(
                    (r.question_type, r.scores["ours"]["context"]) for r in ctx
                ).items()
            },
        }
    ingest = [r.ingest_s for r in rows]
    search = [r.search_s for r in rows]
    out["timing"] = {
        "ingest_total_s": sum(ingest),
        "search_total_s": sum(search),
        "bm25_total_s": sum(r.bm25_s for r in rows),
        "ingest_mean_s": sum(ingest) / len(rows) if rows else 0.0,
        "search_mean_s": sum(search) / len(rows) if rows else 0.0,
        "search_p50_s": percentile(search, 50) if rows else 0.0,
        "search_max_s": max(search, default=0.0),
        "rounds_total": sum(r.n_rounds for r in rows),
    }
    return out


PRIMARY, TIEBREAK = "session.ndcg_any@10", "session.recall_all@10"
CV_SHOWN = (
    "session.recall_all@10",
    "session.ndcg_any@10",
    "session.recall_any@5",
    "turn.recall_any@10",
    "turn.ndcg_any@10",
)


def cv_items(rows: Sequence[QuestionResult], systems: Sequence[str]) -> list[cv.Item]:
    """Questions as cross-validation items: each system's session and turn metrics as ``level.metric``."""
    return [
        cv.Item(
            id=r.question_id,
            group=r.question_type,
            scores={
                name: {
                    f"{level}.{m}": v for level in LEVELS for m, v in r.scores[name].get(level, {}).items()
                }
                for name in systems
            },
        )
        for r in rows
    ]


def run_cv(rows: Sequence[QuestionResult], systems: Sequence[str], folds: int, seed: int) -> cv.CVResult:
    """Cross-validate the choice among ``systems`` (``ours`` = the defaults first) on session ndcg_any@10."""
    return cv.cross_validate(
        cv_items(rows, systems),
        systems,
        k=folds,
        seed=seed,
        primary=PRIMARY,
        tiebreak=TIEBREAK,
        default="ours",
    )


def render_context(summary: dict[str, Any]) -> str:
    """All gold sessions (and all evidence rounds) inside ``Memory.context`` per budget, overall and per type."""
    ctx = summary.get("context")
    if not ctx:
        return ""
    names = list(ctx["overall"])
    lines = [
        "## Context coverage (defaults): all gold sessions / all evidence rounds inside `Memory.context`",
        "",
        "| type | n | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
        "| ALL | "
        + str(summary["n_questions"])
        + " | "
        + " | ".join(f"{ctx['overall'][m]:.3f}" for m in names)
        + " |",
    ]
    for t, m in ctx["by_type"].items():
        lines.append(
            f"| {t} | {m['n']} | " + " | ".join(f"{m.get(x, float('nan')):.3f}" for x in names) + " |"
        )
    return "\n".join(lines)


def _metric_names(ks: Sequence[int]) -> list[str]:
    return [f"{m}@{k}" for k in ks for m in ("recall_any", "recall_all", "ndcg_any")]


def render_markdown(summary: dict[str, Any], config: dict[str, Any], ks: Sequence[int]) -> str:
    lines = [
        "# LongMemEval_S retrieval (dev split)",
        "",
        f"Questions: {summary['n_questions']} (abstention questions skipped); turn level scoreable: "
        f"{summary['n_turn_scoreable']}. Ours = graphrecall `Memory.search` with library defaults; "
        "BM25 = plain Okapi (k1=1.5, b=0.75) over the same rounds.",
        "",
        f"Command: `{config['command']}`",
        "",
    ]
    names = _metric_names(ks)
    for level in LEVELS:
        lines += [f"## {level.capitalize()} level", "", "| metric | ours | BM25 |", "|---|---:|---:|"]
        for m in names:
            ours = summary["ours"][level]["overall"].get(m, float("nan"))
            bm = summary["bm25"][level]["overall"].get(m, float("nan"))
            lines.append(f"| {m} | {ours:.3f} | {bm:.3f} |")
        lines += ["", f"### {level.capitalize()} level by question type (ours / BM25)", ""]
        lines.append("| type | n | " + " | ".join(names) + " |")
        lines.append("|---|---:|" + "---:|" * len(names))
        for t, ours_t in summary["ours"][level]["by_type"].items():
            bm_t = summary["bm25"][level]["by_type"].get(t, {})
            cells = [f"{ours_t.get(m, float('nan')):.3f} / {bm_t.get(m, float('nan')):.3f}" for m in names]
            lines.append(f"| {t} | {ours_t['n']} | " + " | ".join(cells) + " |")
        lines.append("")
    if config.get("variants"):
        lines += [render_systems(summary, config), ""]
    if summary.get("context"):
        lines += [render_context(summary), ""]
    if summary.get("cv"):
        lines += [cv.render_markdown(summary["cv"], CV_SHOWN), ""]
    tm = summary["timing"]
    lines += [
        "## Time",
        "",
        f"- ingest: {tm['ingest_total_s']:.1f} s total, {tm['ingest_mean_s']:.2f} s per question "
        f"({tm['rounds_total']} rounds)",
        f"- search (k={SEARCH_K}): {tm['search_total_s']:.1f} s total, mean {tm['search_mean_s'] * 1000:.0f} ms, "
        f"p50 {tm['search_p50_s'] * 1000:.0f} ms, max {tm['search_max_s'] * 1000:.0f} ms",
        f"- BM25 baseline (index + rank): {tm['bm25_total_s']:.1f} s total",
        f"- embedder `{config.get('embedder')}` ({config.get('embedder_id')}); its cache: "
        f"{config['embed_cache_hits']} hits, {config['embed_cache_misses']} misses",
        "",
    ]
    return "\n".join(lines)


def render_systems(summary: dict[str, Any], config: dict[str, Any]) -> str:
    """One row per system (ours, each --variant, BM25): the figures the targets are stated in."""
    lines = [
        "## Systems side by side (k = 10)",
        "",
        "| system | overrides | session recall_all | session ndcg_any | turn recall_any | turn ndcg_any | "
        "lowest type (session recall_all) |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    variants = config.get("variants") or {}
    for name in summary["systems"]:
        sess, turn = summary[name]["session"], summary[name]["turn"]
        low_t, low = min(
            ((t, m.get("recall_all@10", float("nan"))) for t, m in sess["by_type"].items()),
            key=lambda kv: kv[1],
            default=("-", float("nan")),
        )
        over = json.dumps(variants[name]) if name in variants else "(defaults)" if name == "ours" else "-"
        lines.append(
            f"| {name} | `{over}` | {sess['overall'].get('recall_all@10', float('nan')):.3f} | "
            f"{sess['overall'].get('ndcg_any@10', float('nan')):.3f} | "
            f"{turn['overall'].get('recall_any@10', float('nan')):.3f} | "
            f"{turn['overall'].get('ndcg_any@10', float('nan')):.3f} | {low_t} {low:.3f} |"
        )
    return "\n".join(lines)


def print_table(summary: dict[str, Any], ks: Sequence[int]) -> None:
    names = _metric_names(ks)
    print(f"\n{'level/type':<34}{'n':>4}  " + "  ".join(f"{m:>17}" for m in names))
    for level in LEVELS:
        rows = [("ALL", summary["ours"][level]["overall"], summary["bm25"][level]["overall"], None)]
        for t, m in summary["ours"][level]["by_type"].items():
            rows.append((t, m, summary["bm25"][level]["by_type"][t], m["n"]))
        for t, ours, bm, n in rows:
            label = f"{level}:{t}"
            cells = "  ".join(f"{ours.get(m, 0):.3f} / {bm.get(m, 0):.3f}".rjust(17) for m in names)
            print(f"{label:<34}{'' if n is None else n:>4}  {cells}")
    print("(each cell: ours / BM25)")


def _load_done(path: Path) -> dict[str, QuestionResult]:
    done: dict[str, QuestionResult] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = QuestionResult(**json.loads(line))
                done[row.question_id] = row
    return done


def reusable(
    row: QuestionResult, wanted: Mapping[str, Any], budgets: Sequence[int], embedder_id: str
) -> bool:
    """A cached row serves this run when it was searched with the same embedder (a row that does not name one,
    written before rows did, serves no run) and the same overrides for every wanted system (``ours`` and each
    variant), and probed at every context budget."""
    had = row.extra.get("systems", {"ours": None})
    return (
        row.extra.get("embedder") == embedder_id
        and all(name in had and had[name] == wanted[name] for name in wanted)
        and all(str(b) in row.context for b in budgets)
    )


def rescore(
    row: QuestionResult,
    q: data.Question,
    wanted: Mapping[str, Any],
    budgets: Sequence[int],
    ks: Sequence[int],
) -> QuestionResult:
    """A cached row narrowed to this run's systems and budgets, scored again at this run's cut-offs (no
    ingest, no search)."""
    ranked = {name: row.ranked[name] for name in (*wanted, "bm25")}
    context = {str(b): row.context[str(b)] for b in budgets}
    # Labels come from the row (computed when it was searched); a round id is "<session id>@<index>", and every
    # ranked id was checked against the library's round builder then. Rebuilding the rounds here would cost
    # their term indexing (seconds per question) for nothing.
    known = {s.session_id for s in q.sessions}
    session_of = {rid: rid.rsplit("@", 1)[0] for lst in ranked.values() for rid in lst}
    strays = sorted({sid for sid in session_of.values() if sid not in known})
    if strays:
        raise ValueError(f"{q.question_id}: cached rounds name sessions not in the haystack: {strays[:3]}")
    scores, firsts = score_ranked(ranked, session_of, row.evidence_sessions, row.evidence_rounds, ks, context)
    extra = row.extra | {"systems": {name: wanted[name] for name in wanted}}
    return replace(row, ranked=ranked, scores=scores, first_rank=firsts, context=context, extra=extra)


def first_of_each_type(questions: Sequence[data.Question], n: int) -> list[data.Question]:
    """The first ``n`` questions of each type, in their order (``--per-type``)."""
    seen: dict[str, int] = {}
    out: list[data.Question] = []
    for q in questions:
        seen[q.question_type] = seen.get(q.question_type, 0) + 1
        if seen[q.question_type] <= n:
            out.append(q)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    this_run = Run.begin()
    ray = raymap.options_from_args(args, parser)  # before any data is read: --ray without Ray stops here
    types = [t.strip() for t in args.types.split(",")] if args.types else None
    questions = data.load(args.data, limit=None if args.per_type else args.limit, types=types)
    if args.per_type:
        questions = first_of_each_type(questions, args.per_type)[: args.limit]
    if not questions:
        print("no questions selected", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    jsonl = args.out / "retrieval.jsonl"
    resume = args.resume or args.cached_only  # --cached-only never deletes the cache it reads
    done = _load_done(jsonl) if resume else {}
    if not resume and jsonl.exists():
        jsonl.unlink()
    settings = Settings.from_env()
    if args.config:
        settings.retrieval = RetrievalConfig.model_validate(settings.retrieval.model_dump() | args.config)
    # What each system was searched with, recorded per row so a cache is reused only for the same settings.
    wanted: dict[str, Any] = {"ours": args.config or {}} | dict(args.variant)
    budgets = args.context_budgets
    embedder_id = embedder_from_spec(args.embedder).id  # no weights loaded
    if args.cached_only:
        usable = {
            q.question_id
            for q in questions
            if q.question_id in done and reusable(done[q.question_id], wanted, budgets, embedder_id)
        }
        if len(usable) < len(questions):
            print(
                f"--cached-only: {len(questions) - len(usable)} questions without a usable cached row are left out"
            )
        questions = [q for q in questions if q.question_id in usable]
        if not questions:
            print("no cached questions to score", file=sys.stderr)
            return 2
    todo = [
        q
        for q in (reversed(questions) if args.reverse else questions)
        if not (q.question_id in done and reusable(done[q.question_id], wanted, budgets, embedder_id))
    ]
    spec = RunSpec(
        embedder=args.embedder,
        embed_cache=str(args.embed_cache.resolve()),
        embed_seed=str(args.embed_seed.resolve()) if args.embed_seed else None,
        config=args.config or {},
        variants=dict(args.variant),
        ks=list(args.k_eval),
        budgets=list(budgets),
        wanted=wanted,
    )
    # A SIGTERM (e.g. ``kill`` on a background run) unwinds like Ctrl-C, so the temporary store is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    fresh: dict[str, QuestionResult] = {}
    failed: dict[str, str] = {}
    runner: QuestionRunner | None = None
    t_start = time.perf_counter()
    try:
        if todo:
            where = "here" if ray is None else f"as Ray tasks ({ray.address or 'local Ray'})"
            print(
                f"{len(questions) - len(todo)} questions from the cache, {len(todo)} to ingest {where}",
                flush=True,
            )
            if ray is None:
                runner = QuestionRunner(spec)
                work: Any = runner.run
            else:
                work = partial(question_task, spec)
            outcomes = raymap.run_map(work, todo, ray=ray, desc="questions", progress=ray is not None)
            with jsonl.open("a") as out:
                for i, o in enumerate(outcomes, start=1):
                    q = o.item
                    if o.value is None:
                        failed[q.question_id] = o.error or "no result"
                        print(f"[{i}/{len(todo)}] {q.question_id} FAILED: {o.error}", flush=True)
                        continue
                    r = o.value
                    fresh[q.question_id] = r
                    out.write(json.dumps(r.__dict__) + "\n")
                    out.flush()
                    k10 = max(args.k_eval)
                    ours, bm = r.scores["ours"]["session"], r.scores["bm25"]["session"]
                    print(
                        f"[{i}/{len(todo)}] {q.question_id} {q.question_type:<26} "
                        f"ingest {r.ingest_s:5.1f}s search {r.search_s * 1000:4.0f}ms  "
                        f"sess recall_all@{k10} {ours[f'recall_all@{k10}']:.0f}/{bm[f'recall_all@{k10}']:.0f}  "
                        f"first evidence round {r.first_rank['ours'].get('turn')}/{r.first_rank['bm25'].get('turn')}",
                        flush=True,
                    )
    finally:
        if runner is not None:
            runner.close()
    if failed:
        print(
            f"{len(failed)} questions failed (the others are in {jsonl}; rerun with --resume to retry them):",
            file=sys.stderr,
        )
        for qid, err in failed.items():
            print(f"  {qid}: {err}", file=sys.stderr)
        return 1
    wall_s = time.perf_counter() - t_start
    local = runner.embedder if runner is not None and isinstance(runner.embedder, CachedEmbedder) else None
    rows = [
        fresh[q.question_id]
        if q.question_id in fresh
        else rescore(done[q.question_id], q, wanted, budgets, args.k_eval)
        for q in questions
    ]
    summary = summarize(rows, args.k_eval)
    if args.folds:
        summary["cv"] = run_cv(rows, list(wanted), args.folds, args.seed).as_dict()
    config: dict[str, Any] = {
        "command": "python -m benchmarks.longmemeval.retrieval "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "data": str(args.data),
        "limit": args.limit,
        "per_type": args.per_type,
        "types": types,
        "k_eval": args.k_eval,
        "search_k": SEARCH_K,
        "embedder": args.embedder,
        "embedder_id": embedder_id,
        "retrieval_config": settings.retrieval.model_dump(),
        "config_overrides": args.config,
        "variants": dict(args.variant),
        "reranker": settings.reranker,
        "embed_cache_hits": local.hits if local else 0,
        "embed_cache_misses": local.misses if local else 0,
        "ray": None if ray is None else {"address": ray.address or "local", "num_cpus": ray.num_cpus},
        "context_budgets": budgets,
        "questions_from_cache": len(questions) - len(todo),
        "cached_only": args.cached_only,
        "wall_s": wall_s,
        "bm25": {"k1": 1.5, "b": 0.75, "tokens": "lower-case \\w+"},
        "turn_unit": "round (user turn + following assistant reply); relevant = holds a has_answer message",
    }
    result = {"config": config, "summary": summary, "questions": [r.__dict__ for r in rows]}
    write_json(args.out / "retrieval.json", result, this_run, indent=1)
    write_markdown(args.out / "retrieval.md", render_markdown(summary, config, args.k_eval), this_run)
    print_table(summary, args.k_eval)
    if args.variant:
        print("\n" + render_systems(summary, config))
    if summary.get("context"):
        print("\n" + render_context(summary))
    if summary.get("cv"):
        print("\n" + cv.render_markdown(summary["cv"], CV_SHOWN))
    print(f"\nwrote {args.out / 'retrieval.json'} and {args.out / 'retrieval.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
