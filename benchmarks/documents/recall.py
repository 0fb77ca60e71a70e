"""Is a question answered only by a learned document found first? LongMemEval_S questions, their evidence moved
from the chat into a document.

Issue 29 item 3: "a question answered only by a document passage is found first". For each LongMemEval_S question
of the chosen types (default single-session-user, whose evidence is what the user said in one session), the
haystack goes in as chat *without* the answer session, and that session's user turns become a notes document
(``# Notes``, one ``## Session <date>`` section, each turn a paragraph) learned with ``Memory.add_document``: the
evidence is then in a document passage and nowhere else, among ~47 sessions (~470 rounds) of chat and the other
passages of the notes. Measured: the rank of the first passage holding an evidence turn (R@1, R@5, MRR over the
questions). The baseline is the same question over the original haystack, the answer session stored as chat, and
the rank of its first evidence round: the document path should find the evidence about as well as the chat does.

    python -m benchmarks.documents.recall --data ../shared/data/longmemeval/longmemeval_s_dev.json.gz --limit 20

Passages are the splitter's (``documents.split``: paragraphs packed up to 800 characters under their heading), so a
turn may share its passage with the turns beside it; a passage holds an evidence turn when it holds the turn's
opening (or is part of a turn longer than a passage).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.arguments import add_embedder_argument, build_embedder
from benchmarks.jsonfile import save_report
from benchmarks.longmemeval import data
from benchmarks.provenance import Run
from graphrecall import Memory, Scope, Settings
from graphrecall.docref import parse_location
from graphrecall.embed import Embedder

K = 10
SOURCE = "notes.md"
SCOPE = Scope(org_id="bench", user_id="documents")


def notes(q: data.Question) -> tuple[str, str, list[str]]:
    """The answer sessions' user turns as a Markdown notes document, its date, and the evidence turns' texts."""
    answer = [s for s in q.sessions if s.session_id in set(q.answer_session_ids)]
    parts = ["# Notes"]
    evidence: list[str] = []
    for s in answer:
        parts.append(f"## Session {s.date}")
        for t in s.turns:
            if t.role == "user" and t.content.strip():
                parts.append(t.content.strip())
                if t.has_answer:
                    evidence.append(t.content.strip())
    return "\n\n".join(parts) + "\n", answer[0].date, evidence


def holds_evidence(passage: str, evidence: Sequence[str]) -> bool:
    """Whether a passage's text holds an evidence turn: its opening, or a piece of one longer than a passage."""
    return any(e[:80] in passage or passage[:80] in e for e in evidence)


def rank_of(hits: Sequence[Any], good: Any) -> int | None:
    return next((i for i, h in enumerate(hits, start=1) if good(h)), None)


def question(q: data.Question, embedder: Embedder, root: Path) -> dict[str, Any]:
    """The rank of the first evidence passage (document) and of the first evidence round (chat), or None."""
    answer = set(q.answer_session_ids)
    chat = [s for s in data.session_inputs(q) if s["session_id"] not in answer]
    answer_sessions = [s for s in data.session_inputs(q) if s["session_id"] in answer]
    text, date, evidence = notes(q)
    gold_rounds = data.evidence_rounds(q)
    started = time.perf_counter()
    with Memory.open(root, embedder=embedder, settings=Settings(root=root)) as mem:
        mem.add_sessions(SCOPE, chat)
        learned = mem.add_document(SCOPE, text, source=SOURCE, date=date)
        asked = {"k": K, "question_date": data.parse_date(q.question_date)}
        hits = mem.search(SCOPE, q.question, **asked)

        def is_gold_passage(h: Any) -> bool:
            found = parse_location(h.text) if h.document is not None else None
            return found is not None and holds_evidence(found[2], evidence)

        doc_rank = rank_of(hits, is_gold_passage)
        mem.erase(SCOPE, session_ids=[learned.session_id])
        mem.add_sessions(SCOPE, answer_sessions)
        chat_rank = rank_of(mem.search(SCOPE, q.question, **asked), lambda h: h.id in gold_rounds)
    return {
        "question_id": q.question_id,
        "question_type": q.question_type,
        "passages": learned.passages,
        "document_rank": doc_rank,
        "chat_rank": chat_rank,
        "first_hit_is_document": bool(hits and hits[0].document is not None),
        "seconds": round(time.perf_counter() - started, 1),
    }


def summary(rows: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    ranks = [r[key] for r in rows]
    return {
        "r1": statistics.fmean(1.0 if x == 1 else 0.0 for x in ranks),
        "r5": statistics.fmean(1.0 if x is not None and x <= 5 else 0.0 for x in ranks),
        "mrr": statistics.fmean(1.0 / x if x else 0.0 for x in ranks),
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="a LongMemEval_S file (.json or .json.gz)")
    ap.add_argument("--types", default="single-session-user", help="question types, comma separated")
    ap.add_argument("--limit", type=int, default=None, help="at most this many questions")
    ap.add_argument("--embed-cache", type=Path, default=Path("benchmarks/results/embed_cache.sqlite"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/documents"))
    add_embedder_argument(ap)
    a = ap.parse_args(argv)
    run = Run.begin()
    a.embed_cache.parent.mkdir(parents=True, exist_ok=True)
    embedder = build_embedder(a.embedder, a.embed_cache)
    questions = data.load(a.data, types=a.types.split(","), limit=a.limit)
    rows = []
    for q in questions:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(question(q, embedder, Path(tmp)))
        r = rows[-1]
        print(f"{r['question_id']}: document rank {r['document_rank']}, chat rank {r['chat_rank']} "
              f"({r['passages']} passages, {r['seconds']} s)", flush=True)  # fmt: skip
    doc, chat = summary(rows, "document_rank"), summary(rows, "chat_rank")
    report = "\n".join(
        [
            f"LongMemEval_S ({a.types}), {len(rows)} questions, embedder {a.embedder}, k = {K}: the evidence as a "
            "learned document's passage, or as the chat it was",
            "",
            "| evidence stored as | R@1 | R@5 | MRR |",
            "|---|---|---|---|",
            f"| document passage (answer session's user turns as notes.md) | {doc['r1']:.3f} | {doc['r5']:.3f} | "
            f"{doc['mrr']:.3f} |",
            f"| chat (the original haystack) | {chat['r1']:.3f} | {chat['r5']:.3f} | {chat['mrr']:.3f} |",
        ]
    )
    result = {
        "args": {k: str(v) for k, v in vars(a).items()},
        "document": doc,
        "chat": chat,
        "questions": rows,
    }
    save_report(a.out, "documents", result, report, run)


if __name__ == "__main__":
    main()
