"""A training or evaluation set built from stored memory: every record cites the sessions and messages it comes
from, so a model fine-tuned or scored on it can be traced back to what the user actually said.

Formats (``graphrecall dataset --format F``, ``Memory.dataset``):

- ``chat``: one record per session: its messages as said, and the current facts extracted from it
  (``{"messages": [...], "facts": [...], "sources": ...}``), for teaching an assistant what to remember.
- ``qa``: question and answer pairs grounded in cited sessions. Without an LLM they are built deterministically
  from extracted memory: "When did ...?" for each dated event (answer: its date), and a yes/no check per fact
  ("Is it still true that ...?"), answered "no" with its replacement when the fact was superseded, so the set also
  tests what changed. With an LLM, one natural question per current fact is written from the words it was
  extracted from (``prompts/dataset_question.md``), then checked against those words by a second call
  (``prompts/dataset_check.md``); a pair the check does not support is dropped and counted, never kept.
- ``graph``: subject, predicate, object triples: the relations between entities (with the fact that states them)
  and the events (who did what to what, and when), each with its validity and sources.

Records are plain JSON (one per line in a ``.jsonl`` file), deterministic for a given store and format without an
LLM: same store, same file.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from graphrecall.llm import LLM, ChatMessage
from graphrecall.models import Fact, Message, ScopeExport
from graphrecall.prompts import load_prompt

DatasetFormat = Literal["chat", "qa", "graph"]
EVIDENCE_CHARS = 4000  # of a fact's source messages, in the LLM's prompts


class GeneratedQuestion(BaseModel):
    question: str = Field(min_length=3)
    answer: str = Field(min_length=1)


class Check(BaseModel):
    supported: bool
    reason: str = ""


class Dataset(BaseModel):
    """The records, and what the LLM path dropped (``rejected``: pairs its check did not support)."""

    format: DatasetFormat
    records: list[dict[str, Any]] = Field(default_factory=list)
    rejected: int = 0
    llm_calls: int = 0


def build(
    doc: ScopeExport, fmt: DatasetFormat, *, llm: LLM | None = None, limit: int | None = None
) -> Dataset:
    """The dataset of one exported scope. ``limit``: at most that many records (the LLM path stops calling then)."""
    if fmt == "chat":
        records = list(_chat(doc))
        return Dataset(format=fmt, records=records[:limit])
    if fmt == "graph":
        return Dataset(format=fmt, records=list(_graph(doc))[:limit])
    if llm is None:
        return Dataset(format=fmt, records=list(_qa_rules(doc))[:limit])
    return _qa_llm(doc, llm, limit)


# -- chat ------------------------------------------------------------------------------------------------------------
def _chat(doc: ScopeExport) -> Iterator[dict[str, Any]]:
    current = [f for f in doc.facts if f.expired_at is None]
    for s in sorted(doc.sessions, key=lambda s: (s.started_at, s.id)):
        facts = [f for f in current if f.session_id == s.id]
        yield {
            "messages": [{"role": m.role.value, "content": m.content} for m in s.messages],
            "facts": [{"id": f.id, "text": f.text, "kind": f.kind.value} for f in facts],
            "sources": {"session_id": s.id, "date": _iso(s.started_at)},
        }


# -- qa without a model ----------------------------------------------------------------------------------------------
def _qa_rules(doc: ScopeExport) -> Iterator[dict[str, Any]]:
    by_id = {f.id: f for f in doc.facts}
    for e in sorted(doc.events, key=lambda e: (e.time_start or datetime.min, e.id)):
        if e.time_start is None:
            continue
        yield {
            "question": f"When did {e.subject} {e.verb} {e.object}?".replace("  ", " ").strip(),
            "answer": e.time_start.date().isoformat(),
            "kind": "event_date",
            "sources": {"event_id": e.id, "session_id": e.session_id, "message_ids": e.message_ids},
        }
    for f in sorted(doc.facts, key=lambda f: (f.recorded_at or datetime.min, f.id)):
        replaced = by_id.get(f.superseded_by) if f.superseded_by else None
        answer = "yes" if f.expired_at is None else "no"
        if replaced is not None:
            answer = f"no: {replaced.text}"
        yield {
            "question": f"Is it still true that {_clause(f.text)}?",
            "answer": answer,
            "kind": "fact_current" if f.expired_at is None else "fact_changed",
            "sources": _fact_sources(f),
        }


def _clause(text: str) -> str:
    """A fact's sentence as a clause: "The user lives in Oslo." -> "the user lives in Oslo"."""
    t = text.strip().rstrip(".!?")
    return t[:1].lower() + t[1:] if t[:2] != t[:2].upper() else t


# -- qa with a model -------------------------------------------------------------------------------------------------
def _qa_llm(doc: ScopeExport, llm: LLM, limit: int | None) -> Dataset:
    messages = {m.id: (s, m) for s in doc.sessions for m in s.messages if m.id}
    out = Dataset(format="qa")
    ask, check = load_prompt("dataset_question"), load_prompt("dataset_check")
    for f in sorted(doc.facts, key=lambda f: (f.recorded_at or datetime.min, f.id)):
        if f.expired_at is not None:
            continue
        if limit is not None and len(out.records) >= limit:
            break
        said = [messages[i] for i in f.message_ids if i in messages]
        if not said:
            continue  # added by the application (add_fact): no words to ground a question in
        session = said[0][0]
        evidence = _evidence([m for _, m in said])
        q, _ = llm.parse_sync(
            [ChatMessage.user(ask.render(session_id=session.id, date=_iso(session.started_at), evidence=evidence,
                                         fact=f.text))],
            GeneratedQuestion, purpose="dataset",
        )  # fmt: skip
        verdict, _ = llm.parse_sync(
            [ChatMessage.user(check.render(evidence=evidence, question=q.question, answer=q.answer))],
            Check, purpose="dataset",
        )  # fmt: skip
        out.llm_calls += 2
        if not verdict.supported:
            out.rejected += 1
            continue
        out.records.append(
            {"question": q.question, "answer": q.answer, "kind": "generated", "sources": _fact_sources(f)}
        )
    return out


def _evidence(said: list[Message]) -> str:
    text = "\n".join(f"{m.role.value}: {m.content}" for m in said)
    return text if len(text) <= EVIDENCE_CHARS else text[:EVIDENCE_CHARS] + " ..."


# -- graph -----------------------------------------------------------------------------------------------------------
def _graph(doc: ScopeExport) -> Iterator[dict[str, Any]]:
    names = {e.id: e.name for e in doc.entities}
    facts = {f.id: f for f in doc.facts}
    for r in sorted(doc.relations, key=lambda r: (r.source, r.predicate, r.target)):
        fact = facts.get(r.fact_id)
        yield {
            "subject": names.get(r.source, r.source),
            "predicate": r.predicate,
            "object": names.get(r.target, r.target),
            "kind": "relation",
            "valid_from": _iso(fact.valid_from) if fact else None,
            "valid_to": _iso(fact.valid_to) if fact else None,
            "sources": _fact_sources(fact) if fact else {},
        }
    for e in sorted(doc.events, key=lambda e: (e.time_start or datetime.min, e.id)):
        yield {
            "subject": e.subject,
            "predicate": e.verb,
            "object": e.object,
            "kind": "event",
            "valid_from": _iso(e.time_start),
            "valid_to": _iso(e.time_end),
            "sources": {"event_id": e.id, "session_id": e.session_id, "message_ids": e.message_ids},
        }


def _fact_sources(f: Fact) -> dict[str, Any]:
    return {"fact_id": f.id, "session_id": f.session_id, "message_ids": f.message_ids}


def _iso(d: datetime | None) -> str | None:
    """With its offset: stored dates are naive UTC, a record read elsewhere must say so."""
    if d is None:
        return None
    return (d if d.tzinfo is not None else d.replace(tzinfo=UTC)).isoformat()
