"""The scopes a ranking dump searches, filled so that every path of a search is taken at least once.

- LongMemEval_S dev questions (~500 rounds each, a spread over the question types): the raw-history lists, the
  question's time range, the recency and restatement cues. The last session of each haystack is added on its own
  and left in the write log, so the unflushed tail is merged into Kuzu's lists (``store.wal``).
- LongMemEval oracle questions (only the evidence sessions, a handful of rounds): scopes small enough to stay
  resident in their write log (read through the empty database) and to have their lexical lists scaled down
  (``RetrievalConfig.small_store_rounds``).
- LoCoMo conversations, with an extracted graph built from LoCoMo's own annotations instead of an LLM (which
  would make the dump depend on a model's answers): each annotated observation is a fact about its speaker,
  tied to the dialog turn it cites; each session's event summary an event of its speaker; every fifth
  observation of a speaker superseded by the next one; one entity per speaker, with an alias. Questions name the
  speakers, so entity expansion runs. Again the last session stays in the write log.

Everything goes through the public ``Memory`` API (``add_sessions``, ``import_scope``), so the scopes are the same
whatever the store's internals look like: the dump compares searches, not storage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import load_list
from benchmarks.locomo import data as locomo
from benchmarks.longmemeval import data as lme
from graphrecall import Memory
from graphrecall.models import (
    Entity,
    ExportedEvent,
    ExportedSession,
    Fact,
    Scope,
    ScopeExport,
    SupersedesEdge,
)

_DIA_SPLIT = re.compile(r"[;,\s]+")
SUPERSEDE_EVERY = 5  # every fifth observation of a speaker is superseded by the speaker's next one


@dataclass(frozen=True)
class Probe:
    """One question to search, and the date it is asked at."""

    key: str  # unique within a dump: "<scope name>#<n>"
    query: str
    question_date: datetime | str


@dataclass
class Filled:
    """A scope filled in a ``Memory``, and the questions to ask it."""

    name: str  # "lme/<question id>", "lme-oracle/<question id>", "locomo/<sample id>"
    scope: Scope
    probes: list[Probe]
    extracted: bool = False
    notes: dict[str, int] = field(default_factory=dict)


def spread(items: Sequence[Any], n: int) -> list[Any]:
    """``n`` items evenly spaced over ``items`` (all of them when there are fewer): the dev files group questions
    loosely by type, so the first ``n`` would miss whole types."""
    if n >= len(items):
        return list(items)
    return [items[(i * len(items)) // n] for i in range(n)]


def _split_last(sessions: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """All sessions but the last, and the last: written in two calls, so that the last stays in the write log
    (a call of at most 64 rounds is acknowledged from the log; the dump's settings never flush it by age)."""
    return sessions[:-1], sessions[-1:]


def fill_longmemeval(mem: Memory, q: lme.Question, source: str) -> Filled:
    scope = Scope(org_id=source, user_id=q.question_id)
    head, last = _split_last(lme.session_inputs(q))
    if head:
        mem.add_sessions(scope, head)
    mem.add_sessions(scope, last)
    probe = Probe(key=f"{source}/{q.question_id}#0", query=q.question, question_date=q.question_date)
    return Filled(name=f"{source}/{q.question_id}", scope=scope, probes=[probe])


def fill_locomo(mem: Memory, conv: locomo.Conversation, raw: Mapping[str, Any]) -> Filled:
    """``conv`` stored (speaker B as the assistant), with the synthetic graph of its annotations (``raw``, the
    conversation's item in the data file) over every session but the last, which stays in the write log."""
    scope = Scope(org_id="locomo", user_id=conv.sample_id)
    head, last = _split_last(list(conv.sessions))
    mem.add_sessions(scope, head)
    export = mem.export_scope(scope)
    graph = locomo_graph(conv, raw, export.sessions)
    mem.import_scope(scope, graph)
    mem.add_sessions(scope, last)
    qd = conv.last_date + timedelta(days=1)
    probes = [
        Probe(key=f"locomo/{conv.sample_id}#{i}", query=qa.question, question_date=qd)
        for i, qa in enumerate(conv.qa)
    ]
    notes = {"facts": len(graph.facts), "events": len(graph.events), "superseded": len(graph.supersedes)}
    return Filled(name=f"locomo/{conv.sample_id}", scope=scope, probes=probes, extracted=True, notes=notes)


def locomo_graph(
    conv: locomo.Conversation, raw: Mapping[str, Any], stored: Sequence[ExportedSession]
) -> ScopeExport:
    """Facts, events, entities and supersessions from LoCoMo's annotations, over the sessions ``stored`` holds
    (their messages carry the ids that facts and events cite)."""
    speakers = [conv.speaker_a, conv.speaker_b]
    entity_of = {name: f"ent_{i}" for i, name in enumerate(speakers)}
    entities = [
        Entity(id=entity_of[name], name=name, type="person", aliases=[f"friend {name}"]) for name in speakers
    ]
    by_id = {s.id: s for s in stored}
    dias = dict(zip((str(s["session_id"]) for s in conv.sessions), conv.dia_ids, strict=True))
    facts: list[Fact] = []
    events: list[ExportedEvent] = []
    last_fact: dict[str, Fact] = {}
    supersedes: list[SupersedesEdge] = []
    count: dict[str, int] = {}
    observations = raw.get("observation", {})
    summaries = raw.get("event_summary", {})
    for sid, session in by_id.items():
        n = sid.removeprefix("session_")
        message_of = dict(zip(dias[sid], (m.id or "" for m in session.messages), strict=True))
        at = session.started_at
        for speaker, items in sorted(observations.get(f"session_{n}_observation", {}).items()):
            if speaker not in entity_of:
                continue
            for j, (text, cited) in enumerate(items):
                mids = [message_of[d] for d in _DIA_SPLIT.split(str(cited)) if d in message_of]
                if not mids:
                    continue
                fact = Fact(
                    id=f"f_{n}_{entity_of[speaker]}_{j}", text=str(text), recorded_at=at, valid_from=at,
                    last_seen=at, session_id=sid, message_ids=mids, entity_ids=[entity_of[speaker]],
                )  # fmt: skip
                count[speaker] = count.get(speaker, 0) + 1
                old = last_fact.get(speaker)
                if old is not None and count[speaker] % SUPERSEDE_EVERY == 0:
                    old.valid_to, old.expired_at = at, at
                    supersedes.append(
                        SupersedesEdge(new_id=fact.id, old_id=old.id, at=at, reason="synthetic")
                    )
                facts.append(fact)
                last_fact[speaker] = fact
        summary = summaries.get(f"events_session_{n}", {})
        for speaker, texts in sorted(summary.items()):
            if speaker not in entity_of or not isinstance(texts, list):
                continue
            said = [
                m.id for m in session.messages if m.content.startswith(f"{speaker}:") and m.id is not None
            ]
            for j, text in enumerate(texts):
                events.append(
                    ExportedEvent(
                        id=f"e_{n}_{entity_of[speaker]}_{j}",
                        subject=speaker,
                        verb="did",
                        text=str(text),
                        time_start=at,
                        session_id=sid,
                        message_ids=said[:1],
                        subject_ids=[entity_of[speaker]],
                    )
                )
    return ScopeExport(
        sessions=list(stored), entities=entities, facts=facts, supersedes=supersedes, events=events
    )


def locomo_raw(path: str | Path) -> dict[str, dict[str, Any]]:
    """The data file's conversations by sample id (the annotations ``benchmarks.locomo.data`` leaves out)."""
    return {str(item.get("sample_id", "conv")): item for item in load_list(path, "LoCoMo", "conversations")}
