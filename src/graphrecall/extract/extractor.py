"""Session extraction: one structured LLM call turns a session's turns into facts, events, entities, relations.

The pipeline for one session: render the messages with short labels (m1, m2...) -> one ``parse`` call per
batch of messages -> clean (labels mapped back to message ids, invented ids dropped, dates resolved in Python)
-> resolve entities -> embed -> version facts against the store (one batched call) -> write everything in one
transaction and mark the session done. Any LLM failure, timeout, or an answer with nothing usable marks the
session ``failed`` with the reason and writes nothing else: raw history was committed before extraction began,
and a later ``Memory.extract`` retries failed sessions.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, Field

from graphrecall.embed.base import Embedder, Vectors
from graphrecall.embed.profile import ModelProfile, profile_of
from graphrecall.extract import dates
from graphrecall.extract.entities import EntityResolver
from graphrecall.extract.schema import (
    EntityMatch,
    ExtractedEvent,
    ExtractedFact,
    SessionExtraction,
    VersionDecisions,
)
from graphrecall.extract.versioning import NewFact, Verdict, apply_verdicts, decide
from graphrecall.llm import LLM, LLMError, run_sync
from graphrecall.models import ExtractionResult
from graphrecall.names import is_user, match_keys, normalize_name
from graphrecall.prompts import load_prompt
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.rows import EntityRecord, MessageRow
from graphrecall.store.space import is_io_failure
from graphrecall.text import LANGUAGE_NAMES, index_terms, language_of

log = logging.getLogger(__name__)

T = TypeVar("T")
PURPOSES = ("extract", "resolve_entity", "version_fact")


class ExtractionConfig(BaseModel):
    """Knobs of extraction. The similarity thresholds (``entity_*``, ``version_min_similarity*``,
    ``known_fact_min_similarity``) are cosines on the reference scale (the bundled MiniLM's), translated onto the
    configured embedder's scale where they are used (``embed.profile``; docs/embedders.md "Thresholds per model")."""

    max_chars_per_call: int = Field(
        default=24_000, ge=500, description="messages per LLM call, in characters"
    )
    max_message_chars: int = Field(
        default=1_500, ge=100, description="longer messages are cut (replies mostly)"
    )
    llm_timeout_s: float | None = Field(
        default=None,
        description="a limit per LLM call on top of the provider's own per-request timeout (which follows the "
        "server: docs/llm.md); None leaves it to the provider, so a slow local model is not cut off mid-answer",
    )
    max_tokens: int | None = 4096
    entity_auto: float = 0.92
    entity_ambiguous: float = 0.75
    max_entity_llm_calls: int = 3
    version_k: int = 5
    version_min_similarity: float = 0.6
    version_min_similarity_shared: float = 0.35
    version_batch: int = 25
    known_fact_min_similarity: float = Field(
        default=0.95,
        description="without an LLM, an added fact this similar (cosine) to a current fact of the same kind and "
        "entities replaces it (versioning.same_fact_rule)",
    )
    background: bool = Field(
        default=True,
        description="add_session(extract=True) queues the session and returns at once (Memory.wait_for_extraction "
        "waits); False extracts inside the call",
    )
    workers: int = Field(
        default=1, ge=1, description="background extractions at once (the LLM server's slots)"
    )
    max_attempts: int = Field(default=3, ge=1, description="a session failing this often is marked failed")
    retry_backoff_s: float = Field(default=30.0, ge=0.0, description="first retry delay, doubled per attempt")
    max_deferrals: int = Field(
        default=10,
        ge=0,
        description="a background extraction the LLM could not do now (timed out, unreachable, overloaded) is "
        "retried later without counting as an attempt, this many times in a row before it is marked failed "
        "(with the 30 s backoff doubled up to an hour: about four hours)",
    )


class ExtractionFailed(Exception):
    """Nothing usable came back (or the LLM failed): the session is marked ``failed`` with this message."""


@dataclass
class _Clean:
    facts: list[tuple[ExtractedFact, list[str]]] = field(default_factory=list)
    events: list[tuple[ExtractedEvent, list[str], datetime | None, datetime | None]] = field(
        default_factory=list
    )
    entities: list[tuple[str, str, list[str]]] = field(default_factory=list)
    relations: list[tuple[str, str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # items removed, and why
    notes: list[str] = field(
        default_factory=list
    )  # parts of kept items removed (invented ids, unknown times)
    raw_items: int = 0


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


class Extractor:
    """Extracts one session at a time into a scope database. Not thread-safe per session: callers serialize
    extraction of a scope (``Memory`` holds a per-scope lock)."""

    def __init__(self, llm: LLM, embedder: Embedder, config: ExtractionConfig | None = None) -> None:
        self.llm = llm
        self.embedder = embedder
        self.config = config or ExtractionConfig()
        self._extract_prompt = load_prompt("extract_session")
        self._version_prompt = load_prompt("version_fact")
        self._entity_prompt = load_prompt("resolve_entity")

    @property
    def scale(self) -> ModelProfile:
        """The embedder's similarity profile: the config's thresholds go through ``scale.translate``."""
        return profile_of(self.embedder)

    # -- LLM calls -----------------------------------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        timeout = self.config.llm_timeout_s
        if timeout is None:
            return run_sync(coro)
        return run_sync(asyncio.wait_for(coro, timeout))

    def _parse(self, prompt: str, schema: type[T], purpose: str) -> T:
        parsed, _ = self._run(
            self.llm.parse(prompt, schema, max_tokens=self.config.max_tokens, purpose=purpose)  # type: ignore[type-var]
        )
        return parsed

    # -- one session -----------------------------------------------------------------------------------------------
    def extract_session(self, db: ScopeDatabase, session_id: str) -> ExtractionResult:
        """Extract one session and record the outcome on it; never raises for LLM trouble (it is reported)."""
        info = fq.session_info(db, session_id)
        if info is None:
            raise KeyError(session_id)
        session_date = info[0]
        before = self.llm.usage.calls
        result = ExtractionResult(sessions=1)
        try:
            self._extract(db, session_id, session_date, result)
            result.sessions_done = 1
        except Exception as e:  # LLM errors, timeouts, invalid answers: all recorded on the session for retry
            if is_io_failure(
                e
            ):  # the database is unusable until the pool reopens it: write nothing more to it
                raise
            reason = _describe(e)
            log.warning("extraction of session %s failed: %s", session_id, reason)
            with db.write() as txn:
                fq.set_extract_status(txn, session_id, "failed", reason)
            result = ExtractionResult(sessions=1, sessions_failed=1, errors={session_id: reason},
                                      retry_later=[session_id] if _try_later(e) else [],
                                      items_dropped=result.items_dropped)  # fmt: skip
        for rec in self.llm.usage.since(before):
            if rec.purpose in PURPOSES:
                result.llm_calls += 1
                result.input_tokens += rec.input_tokens
                result.output_tokens += rec.output_tokens
                result.cost_usd += rec.cost_usd
        return result

    def _extract(self, db: ScopeDatabase, sid: str, session_date: datetime, result: ExtractionResult) -> None:
        msgs = q.session_messages(db, sid)
        if not msgs:
            raise ExtractionFailed("session has no messages")
        labels = {f"m{i + 1}": m.id for i, m in enumerate(msgs)}
        clean = _Clean()
        for batch in self._batches(msgs):
            prompt = self._extract_prompt.render(
                session_id=sid,
                session_date=f"{session_date:%Y-%m-%d (%A) %H:%M}",
                messages=self._render_messages(batch, labels),
                language=_language(batch),
            )
            answer = self._parse(prompt, SessionExtraction, "extract")
            self._clean(answer, labels, session_date, clean)
        result.items_dropped = len(clean.dropped)
        for reason in clean.dropped:
            log.info("session %s: dropped %s", sid, reason)
        for note in clean.notes:
            log.info("session %s: %s", sid, note)
        usable = len(clean.facts) + len(clean.events) + len(clean.entities)
        if usable == 0 and clean.raw_items > 0:
            raise ExtractionFailed(
                f"nothing usable in the model's answer: {len(clean.dropped)} item(s) dropped, e.g. "
                + "; ".join(clean.dropped[:3])
            )
        write = fq.ExtractionWrite(session_id=sid)
        resolver, mention_to_entity = self._resolve_entities(db, clean, result, write)
        self._build_facts_events(db, sid, session_date, clean, resolver, mention_to_entity, result, write)
        for src, rel, dst in clean.relations:
            a, b = resolver.find_by_key(src), resolver.find_by_key(dst)
            if a is not None and b is not None and a.id != b.id:
                write.related.append((a.id, b.id, rel, ""))
        result.relations_added = len(write.related)
        with db.write() as txn:
            fq.write_extraction(txn, write, dim=self.embedder.dim)
            fq.set_extract_status(txn, sid, "done", None)

    def _batches(self, msgs: Sequence[MessageRow]) -> list[list[MessageRow]]:
        out: list[list[MessageRow]] = [[]]
        size = 0
        for m in msgs:
            n = min(len(m.text), self.config.max_message_chars) + 24
            if out[-1] and size + n > self.config.max_chars_per_call:
                out.append([])
                size = 0
            out[-1].append(m)
            size += n
        return out

    def _render_messages(self, msgs: Sequence[MessageRow], labels: dict[str, str]) -> str:
        back = {v: k for k, v in labels.items()}
        lim = self.config.max_message_chars
        lines = []
        for m in msgs:
            text = " ".join(m.text.split())
            if len(text) > lim:
                text = text[:lim].rstrip() + " [...]"
            lines.append(f"{back[m.id]} [{m.role}]: {text}")
        return "\n".join(lines)

    def _clean(self, ans: SessionExtraction, labels: dict[str, str], anchor: datetime, out: _Clean) -> None:
        """Keep what can be trusted: message ids that exist, dates we could resolve, non-user entities."""
        out.raw_items += ans.item_count + len(ans.dropped)
        out.dropped.extend(ans.dropped)
        real = set(labels.values())

        def ids(kind: str, i: int, given: list[str]) -> list[str] | None:
            kept: list[str] = []
            bad: list[str] = []
            for g in given:
                g = g.strip().strip("[]")
                mid = labels.get(g) or labels.get(g.lower()) or (g if g in real else None)
                (kept if mid else bad).append(mid or g)
            if bad:
                out.notes.append(f"{kind}[{i}]: invented message id(s) {bad} removed")
            if given and not kept:
                out.dropped.append(f"{kind}[{i}]: every message id was invented; item dropped")
                return None
            return list(dict.fromkeys(kept))

        seen_facts: set[str] = {normalize_name(f.text) for f, _ in out.facts}
        for i, f in enumerate(ans.facts):
            mids = ids("facts", i, f.message_ids)
            if mids is None:
                continue
            key = normalize_name(f.text)
            if key in seen_facts:
                continue
            seen_facts.add(key)
            out.facts.append((f, mids))
        for i, e in enumerate(ans.events):
            mids = ids("events", i, e.message_ids)
            if mids is None:
                continue
            start, end, how = dates.resolve_span(e.when, e.time_start, e.time_end, anchor)
            if how == "none" and (e.when or e.time_start):
                out.notes.append(
                    f"events[{i}]: time {e.when or e.time_start!r} not understood; kept without time"
                )
            out.events.append((e, mids, start, end))
        for ent in ans.entities:
            if is_user(ent.name):
                continue
            out.entities.append((ent.name, ent.type, [a for a in ent.aliases if not is_user(a)]))
        for i, r in enumerate(ans.relations):
            if ids("relations", i, r.message_ids) is None:
                continue
            out.relations.append((r.source, r.relation.strip().lower().replace(" ", "_"), r.target))

    # -- entities ------------------------------------------------------------------------------------------------
    def _resolve_entities(
        self, db: ScopeDatabase, clean: _Clean, result: ExtractionResult, write: fq.ExtractionWrite
    ) -> tuple[EntityResolver, dict[str, EntityRecord]]:
        resolver = EntityResolver(
            fq.load_entities(db),
            auto=self.scale.translate(self.config.entity_auto),
            ambiguous=self.scale.translate(self.config.entity_ambiguous),
            max_llm=self.config.max_entity_llm_calls,
            ask=self._ask_entity,
            new_id=lambda: _new_id("e"),
        )
        mention_to_entity: dict[str, EntityRecord] = {}
        if clean.entities:
            vecs = self.embedder.embed([n for n, _, _ in clean.entities])
            for (name, type_, aliases), vec in zip(clean.entities, vecs, strict=True):
                res = resolver.resolve(name, type_, aliases, vec)
                for k in match_keys(name, aliases):
                    mention_to_entity.setdefault(k, res.entity)
                if res.method != "new" and res.entity.stored:
                    result.entities_merged += 1
        new_ids: set[str] = set()
        for e in resolver.entities:
            if not e.stored and e.id not in new_ids:
                write.new_entities.append(e)
                new_ids.add(e.id)
            elif e.stored and e.aliases_changed:
                write.alias_updates.append(e)
        result.entities_added = len(write.new_entities)
        return resolver, mention_to_entity

    def _ask_entity(self, candidate: str, options: Sequence[tuple[EntityRecord, float]]) -> int | None:
        lines = [
            f"e{i + 1}: {e.name} (type: {e.type}; aliases: {', '.join(e.aliases) or '-'})"
            for i, (e, _) in enumerate(options)
        ]
        prompt = self._entity_prompt.render(candidate=candidate, options="\n".join(lines))
        answer = self._parse(prompt, EntityMatch, "resolve_entity")
        if answer.match is None:
            return None
        label = answer.match.strip().lower()
        for i, (e, _) in enumerate(options):
            if label in (f"e{i + 1}", e.id.lower()):
                return i
        log.info(
            "entity resolution: the model named %r, not one of the options; treated as new", answer.match
        )
        return None

    def _entities_in(self, text: str, names: Sequence[str], resolver: EntityResolver,
                     session_entities: Sequence[EntityRecord]) -> list[str]:  # fmt: skip
        """Entity ids a fact or event is about: the names the model gave, plus session entities the text names."""
        found: dict[str, None] = {}
        for n in names:
            if is_user(n):
                continue
            e = resolver.find_by_key(n)
            if e is not None:
                found[e.id] = None
        padded = f" {normalize_name(text)} "
        for e in session_entities:
            if any(len(k) >= 3 and f" {k} " in padded for k in e.keys):
                found[e.id] = None
        return list(found)

    # -- facts and events ------------------------------------------------------------------------------------------
    def _build_facts_events(
        self,
        db: ScopeDatabase,
        sid: str,
        session_date: datetime,
        clean: _Clean,
        resolver: EntityResolver,
        mention_to_entity: dict[str, EntityRecord],
        result: ExtractionResult,
        write: fq.ExtractionWrite,
    ) -> None:
        session_entities = list({e.id: e for e in mention_to_entity.values()}.values())
        texts = [f.text for f, _ in clean.facts] + [e.text for e, _, _, _ in clean.events]
        vecs: Vectors = (
            self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), dtype=np.float32)
        )
        fact_vecs, event_vecs = vecs[: len(clean.facts)], vecs[len(clean.facts) :]
        rows: list[fq.FactRow] = []
        for (f, mids), vec in zip(clean.facts, fact_vecs, strict=True):
            start = dates.resolve_span(f.when, f.when, None, session_date)[0] if f.when else None
            rows.append(
                fq.FactRow(
                    id=_new_id("f"),
                    text=f.text,
                    terms=index_terms(f.text),
                    kind=f.kind.value,
                    polarity=f.polarity,
                    confidence=f.confidence,
                    valid_from=start if start is not None and start <= session_date else session_date,
                    recorded_at=session_date,
                    last_seen=session_date,
                    session_id=sid,
                    message_ids=mids,
                    entity_ids=self._entities_in(f.text, f.about, resolver, session_entities),
                    vec=vec,
                )
            )
        self._version(db, rows, session_date, result, write)
        for (e, mids, start, end), vec in zip(clean.events, event_vecs, strict=True):
            subj = [] if is_user(e.subject) else self._entities_in(e.subject, [e.subject], resolver, ())
            obj = (
                self._entities_in(e.object, [e.object], resolver, ())
                if e.object and not is_user(e.object)
                else []
            )
            others = self._entities_in(e.text, [], resolver, session_entities)
            write.events.append(
                fq.EventRow(
                    id=_new_id("v"),
                    subject=e.subject,
                    verb=e.verb,
                    object=e.object,
                    text=e.text,
                    terms=event_terms(e.text, e.subject, e.verb, e.object),
                    time_start=start,
                    time_end=end,
                    session_id=sid,
                    message_ids=mids,
                    subject_ids=subj,
                    object_ids=obj or [x for x in others if x not in subj],
                    vec=vec,
                )
            )
        result.events_added = len(write.events)

    def _version(
        self,
        db: ScopeDatabase,
        rows: list[fq.FactRow],
        session_date: datetime,
        result: ExtractionResult,
        write: fq.ExtractionWrite,
    ) -> list[Verdict]:
        verdicts = self.version_facts(db, rows, session_date, write)
        result.facts_added = len(write.facts)
        result.facts_reinforced = len(write.reinforcements)
        result.facts_superseded = len(write.supersessions)
        return verdicts

    def version_facts(
        self, db: ScopeDatabase, rows: list[fq.FactRow], said_on: datetime, write: fq.ExtractionWrite
    ) -> list[Verdict]:
        """Version new facts against the store's current ones: candidates (similar current facts, overall and
        about the same entities), then ``versioning.decide`` (one batched LLM call for what the same-text rule
        does not settle), then ``apply_verdicts`` into ``write``. One verdict per row, in order. Used for every
        session's extraction and for facts an application adds (``extract.known``)."""
        cfg = self.config
        floor = self.scale.translate(cfg.version_min_similarity)
        floor_shared = self.scale.translate(cfg.version_min_similarity_shared)
        items = [
            NewFact(
                label=f"n{i + 1}",
                text=r.text,
                said_on=said_on,
                candidates=fq.similar_current_facts(
                    db,
                    r.vec,
                    k=cfg.version_k,
                    min_similarity=floor,
                    entity_ids=r.entity_ids,
                    min_similarity_shared=floor_shared,
                ),
            )
            for i, r in enumerate(rows)
        ]
        verdicts, _ = decide(items, lambda block: self._ask_versions(block, said_on), batch=cfg.version_batch)
        ordered = [verdicts[it.label] for it in items]
        apply_verdicts(rows, ordered, said_on, write)
        return ordered

    def _ask_versions(self, block: str, today: datetime) -> VersionDecisions:
        """``today`` is the session date: replayed history is judged as of when it was said."""
        prompt = self._version_prompt.render(today=f"{today:%Y-%m-%d}", new_facts=block)
        return self._parse(prompt, VersionDecisions, "version_fact")


def event_terms(text: str, subject: str, verb: str, obj: str) -> str:
    """An event's full-text terms: its sentence and its parts (shared with ``exchange``, which rebuilds them)."""
    return index_terms(f"{text} {subject} {verb} {obj}")


def _try_later(e: BaseException) -> bool:
    """Whether a failure is the LLM's state rather than the session's: the same call may work later."""
    return isinstance(e, TimeoutError) or (isinstance(e, LLMError) and e.retryable)


def _describe(e: BaseException) -> str:
    if isinstance(e, TimeoutError | asyncio.TimeoutError):
        return "LLM call timed out"
    text = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {text}"[:1000]


def _language(messages: Sequence[MessageRow]) -> str:
    """The language the user's turns are in, by name: the prompt says it in so many words, because a small model
    given only the general rule ("the language the user wrote in") answered a Russian session in English (the
    local 1.5B model, tests/e2e/test_e2e_multilingual.py)."""
    said = " ".join(m.text for m in messages if m.role == "user") or " ".join(m.text for m in messages)
    return LANGUAGE_NAMES.get(language_of(said), "English")
