"""Small-store retrieval benchmark: graphrecall against BM25 alone and dense-only, on hand-written histories.

Each history (5-15 short sessions of one person's chats) is ingested into its own scope through
``Memory.add_sessions`` with the embedder ``--embedder`` names (default: the bundled MiniLM); each of its questions
is asked with ``question_date`` = the day after the last session. Rankings are scored by gold *session* (a session
ranks where its best round ranks): R@1, R@3 and MRR. The systems, over the same stored rounds (ranking and scoring shared with the multilingual
benchmark: ``benchmarks/sessionrank.py``):

- ``graphrecall``: ``Memory.search`` with the library defaults;
- ``bm25``: the plain Okapi baseline of the LongMemEval harness (``benchmarks/longmemeval/bm25.py``) over the same
  round texts (no stopwords, no stemming);
- ``dense``: the library's retriever with only the vector list weighted (``RetrievalConfig.weights``);
- each ``--variant NAME=JSON``: RetrievalConfig overrides on the defaults, searched over the same scope;
- ``llm-rerank`` with ``--llm-rerank SPEC``: the defaults with the LLM reranker (``retrieve/llm_rerank.py``) over
  that model, which then reranks the variants too; ``--llm-rerank-cache FILE`` keeps its judgements, so blends
  are compared over the same judgements without asking the model again.

Questions and gold labels never reach the store. Only the dev split is for looking at misses; the test split is
for reporting (the markdown lists misses for dev only).

    python -m benchmarks.smallstore.run --split test [--embedder e5-small]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument, build_embedder
from benchmarks.jsonfile import write_json, write_markdown
from benchmarks.provenance import Run
from benchmarks.sessionrank import (
    BASE_SYSTEMS,
    SEARCH_K,
    dense_retriever,
    means,
    rank_questions,
    score,
)
from benchmarks.smallstore import data
from benchmarks.variants import add_variant_argument
from graphrecall import Memory, testing
from graphrecall.config import RetrievalConfig, Settings
from graphrecall.llm import LLMError
from graphrecall.llm.factory import llm_from_settings
from graphrecall.models import Scope
from graphrecall.retrieve.llm_rerank import LLMReranker
from graphrecall.retrieve.retriever import HybridRetriever

LLM_SYSTEM = "llm-rerank"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.smallstore.run", description=__doc__.split("\n")[0]
    )
    p.add_argument("--split", choices=(*data.SPLITS, "all"), default="all")
    p.add_argument("--data-dir", type=Path, default=data.DATA_DIR)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/smallstore"))
    add_embedder_argument(p)
    p.add_argument(
        "--embed-cache", type=Path, default=Path("benchmarks/results/smallstore/embed_cache.sqlite")
    )
    p.add_argument(
        "--llm-rerank",
        metavar="SPEC",
        help="add a system 'llm-rerank': the defaults with graphrecall.retrieve.llm_rerank.LLMReranker over this "
        "LLM (provider:model, as GRAPHRECALL_LLM; base URL from GRAPHRECALL_LLM_BASE_URL)",
    )
    p.add_argument(
        "--llm-rerank-top",
        type=int,
        default=4,
        help="how many fused candidates the LLM judges per question (default 4, the library's)",
    )
    p.add_argument(
        "--llm-rerank-cache",
        type=Path,
        help="JSON file of the LLM's judgements, read first and written after each history (a rerun with other "
        "blend settings asks the model nothing it was asked before); keyed by question and text, not by model",
    )
    add_variant_argument(
        p,
        reserved=(*BASE_SYSTEMS, LLM_SYSTEM),
        help="an extra system: RetrievalConfig overrides on the defaults (repeatable)",
    )
    return p


class MemoReranker:
    """Asks the wrapped reranker once per (question, document): several systems rerank the same candidates."""

    def __init__(self, inner: LLMReranker, path: Path | None = None) -> None:
        self.inner = inner
        self.max_documents = inner.max_documents
        self.probabilities = inner.probabilities
        self.path = path
        self.memo: dict[tuple[str, str], float] = {}
        if path is not None and path.exists():
            self.memo = {(q, d): s for q, d, s in json.loads(path.read_text())["judgements"]}
        self.seconds = 0.0
        self.calls = 0

    def save(self) -> None:
        if self.path is not None:
            rows = [[q, d, s] for (q, d), s in self.memo.items()]
            self.path.write_text(json.dumps({"llm": self.inner.llm.model, "judgements": rows}))

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        todo = [d for d in dict.fromkeys(documents) if (query, d) not in self.memo]
        if todo:
            t0 = time.perf_counter()
            for d, s in zip(todo, self.inner.score(query, todo), strict=True):
                self.memo[(query, d)] = s
            self.seconds += time.perf_counter() - t0
            self.calls += len(todo)
        return [self.memo[(query, d)] for d in documents]


def run_history(
    mem: Memory, h: data.History, split: str, retrievers: Sequence[tuple[str, HybridRetriever]]
) -> list[dict[str, Any]]:
    """Ingest one history into a fresh scope, ask its questions with every system, erase the scope."""
    scope = Scope(org_id="smallstore", user_id=h.id)
    ranked = rank_questions(mem, scope, h, retrievers)
    return [
        {
            "split": split,
            "history": h.id,
            "id": q.id,
            "question": q.question,
            "gold": q.gold,
            "changed": q.changed,
            "n_sessions": len(h.sessions),
            "top_sessions": {name: s[:3] for name, s in sessions.items()},
            "scores": {name: score(s, q.gold) for name, s in sessions.items()},
        }
        for q, sessions in zip(h.questions, ranked, strict=True)
    ]


def summarize(rows: Sequence[dict[str, Any]], systems: Sequence[str]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {"overall": list(rows)}
    for split in data.SPLITS:
        groups[split] = [r for r in rows if r["split"] == split]
    groups["changed answer"] = [r for r in rows if r["changed"]]
    return {g: {s: means(rs, s) for s in systems} for g, rs in groups.items() if rs}


def render_markdown(summary: dict[str, Any], rows: Sequence[dict[str, Any]], config: dict[str, Any]) -> str:
    systems: list[str] = config["systems"]
    lines = [
        "# Small-store retrieval",
        "",
        f"Command: `{config['command']}`  ",
        f"Embedder: `{config['embedder']}` ({config['embedder_id']})  ",
        f"Wall {config['wall_s']:.0f} s (the run's commit, machine and load: the last line).",
        "",
        "R@1 / R@3 / MRR by gold session.",
        "",
        "| group | n | " + " | ".join(systems) + " |",
        "|---|---:|" + "---|" * len(systems),
    ]
    for group, by_sys in summary.items():
        n = next(iter(by_sys.values()))["n"]
        cells = [f"{m['r@1']:.3f} / {m['r@3']:.3f} / {m['mrr']:.3f}" for m in by_sys.values()]
        lines.append(f"| {group} | {n} | " + " | ".join(cells) + " |")
    if config.get("llm_rerank"):
        c = config["llm_rerank"]
        lines += [
            "",
            f"LLM reranker `{c['spec']}`: {c['candidates']} candidates per question, {c['requests']} requests in "
            f"{c['seconds']:.0f} s ({c['seconds'] / max(c['requests'], 1):.2f} s each), {c['unparsed']} unparsed.",
        ]
    variants = config.get("variants") or {}
    if variants:
        lines += ["", "Variants (RetrievalConfig overrides on the defaults):", ""]
        lines += [f"- `{name}`: `{json.dumps(o)}`" for name, o in variants.items()]
    misses = [r for r in rows if r["split"] == "dev" and r["scores"]["graphrecall"]["r@1"] < 1.0]
    if misses:
        lines += ["", "## Dev questions graphrecall does not answer with its first hit", ""]
        for r in misses:
            lines.append(
                f'- {r["id"]} "{r["question"]}" gold {r["gold"]}: top {r["top_sessions"]["graphrecall"]}'
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    splits = list(data.SPLITS) if args.split == "all" else [args.split]
    histories = [(split, h) for split in splits for h in data.load(split, args.data_dir)]
    args.out.mkdir(parents=True, exist_ok=True)
    args.embed_cache.parent.mkdir(parents=True, exist_ok=True)
    this_run = Run.begin()
    t0 = time.perf_counter()
    embedder = build_embedder(args.embedder, args.embed_cache)
    root = Path(tempfile.mkdtemp(prefix="smallstore-"))
    rows: list[dict[str, Any]] = []
    try:
        settings = Settings(root=root)
        with Memory.open(root, embedder=embedder, settings=settings) as mem:
            defaults = settings.retrieval.model_dump()
            retrievers = [
                ("dense", dense_retriever(mem, settings)),
                *(
                    (
                        name,
                        HybridRetriever(
                            mem.embedder,
                            RetrievalConfig.model_validate(defaults | overrides),
                            testing.retriever(mem).reranker,
                        ),
                    )
                    for name, overrides in args.variant
                ),
            ]
            reranker: MemoReranker | None = None
            if args.llm_rerank:
                try:
                    llm = llm_from_settings(args.llm_rerank)
                except LLMError as e:
                    _parser().error(f"--llm-rerank {args.llm_rerank}: {e}")
                reranker = MemoReranker(
                    LLMReranker(llm, max_documents=args.llm_rerank_top), args.llm_rerank_cache
                )
                retrievers.append((LLM_SYSTEM, HybridRetriever(mem.embedder, settings.retrieval, reranker)))
                # the variants are reranked by the same model (a judgement is asked for once per pair)
                retrievers[1:-1] = [
                    (n, HybridRetriever(r.embedder, r.config, reranker)) for n, r in retrievers[1:-1]
                ]
            for split, h in histories:
                rows += run_history(mem, h, split, retrievers)
                if reranker is not None:
                    reranker.save()
                print(f"{split} {h.id}: {len(h.sessions)} sessions, {len(h.questions)} questions", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    systems = [*BASE_SYSTEMS, *(name for name, _ in args.variant)]
    if args.llm_rerank:
        systems.append(LLM_SYSTEM)
    summary = summarize(rows, systems)
    llm_cost = (
        None
        if reranker is None
        else {
            "spec": args.llm_rerank,
            "candidates": args.llm_rerank_top,
            "requests": reranker.calls,
            "seconds": round(reranker.seconds, 1),
            "unparsed": reranker.inner.unparsed,
        }
    )
    config: dict[str, Any] = {
        "command": "python -m benchmarks.smallstore.run " + " ".join(sys.argv[1:] if argv is None else argv),
        "splits": splits,
        "systems": systems,
        "variants": dict(args.variant),
        "embedder": args.embedder,
        "embedder_id": embedder.id,
        "retrieval_config": settings.retrieval.model_dump(),
        "search_k": SEARCH_K,
        "wall_s": time.perf_counter() - t0,
        "llm_rerank": llm_cost,
    }
    write_json(
        args.out / "smallstore.json",
        {"config": config, "summary": summary, "questions": rows},
        this_run,
        indent=1,
    )
    md = render_markdown(summary, rows, config)
    write_markdown(args.out / "smallstore.md", md, this_run)
    print("\n" + md)
    print(f"wrote {args.out / 'smallstore.json'} and {args.out / 'smallstore.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
