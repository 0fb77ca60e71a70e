"""Extracted memory: the background extraction queue, extraction, facts an application adds, consolidation, hand
supersession, and the reads of facts, their versions, entities and events.

Everything here that reads the current facts and then writes against them holds the scope's knowledge lock
(``ScopeAccess.knowledge``: extraction, ``add_fact``, ``consolidate``, ``supersede``), so no two of them version
against each other's half-written state; ``erase`` holds the same lock (``services.erasure``). Extracted memory
lives in Kuzu only, so a write here first flushes the scope's log (the messages facts point to must be there).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from graphrecall import telemetry
from graphrecall.config import ConsolidationConfig
from graphrecall.embed import Embedder
from graphrecall.errors import InvalidInput, NotAvailable, NotFound, StorageFull
from graphrecall.events import EventHub
from graphrecall.extract.consolidate import Consolidator
from graphrecall.extract.extractor import ExtractionConfig, Extractor
from graphrecall.extract.known import KnownFact, plan_known_fact
from graphrecall.extract.queue import QUEUE_FILE, ExtractionQueue, RetryLater
from graphrecall.llm import LLM
from graphrecall.models import (
    AddedFact,
    Consolidation,
    Entity,
    Event,
    ExtractionJob,
    ExtractionResult,
    Fact,
    FactKind,
    FeedbackResult,
    IngestResult,
    Scope,
    utcnow,
)
from graphrecall.params import (
    AddFactParams,
    ConsolidateParams,
    EventsParams,
    ExtractParams,
    FactsParams,
    FeedbackParams,
    SupersedeParams,
)
from graphrecall.services.access import ScopeAccess
from graphrecall.services.paging import past_the_end
from graphrecall.store import adjacency
from graphrecall.store import facts as fq
from graphrecall.store import feedback as feedback_store
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.space import is_io_failure

Progress = Callable[[int, int], None]

LLM_NEEDED = (
    "{what}, and none is configured: set GRAPHRECALL_LLM (e.g. 'openai:gpt-4o-mini'; "
    "GRAPHRECALL_LLM_BASE_URL for a local server) where graphrecall runs"
)

log = logging.getLogger(__name__)


def needs_llm(what: str) -> NotAvailable:
    """``what``: the sentence's start, e.g. "extraction needs an LLM".
    The one error for a feature that needs an LLM when none is configured: it names the setting, which is what
    every surface's user can change (the Python caller may also pass one)."""
    return NotAvailable(LLM_NEEDED.format(what=what))


def superseded_until(old: Fact, new: Fact, now: datetime) -> datetime:
    """When a fact replaced by hand stops being true: when its replacement became true, unless that is unknown or
    earlier than the old fact itself (then: now, the moment we learned it)."""
    if new.valid_from is not None and (old.valid_from is None or new.valid_from >= old.valid_from):
        return new.valid_from
    return now


@dataclass(eq=False)
class KnowledgeService:
    """Extracted memory: the extraction queue, add_fact, consolidate, supersede, under one lock policy. ``llm``,
    ``extraction`` and ``consolidation`` may be replaced while it runs (``Memory.llm = ...``)."""

    access: ScopeAccess
    embedder: Embedder
    root: Path
    llm: LLM | None
    extraction: ExtractionConfig
    consolidation: ConsolidationConfig
    hub: EventHub = field(default_factory=EventHub)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _queue: ExtractionQueue | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.llm is not None and self.extraction.background and self._queue_file().exists():
            self._extraction_queue()  # resume what an earlier process left queued

    # -- the background queue ----------------------------------------------------------------------------------
    def _queue_file(self) -> Path:
        return self.root / QUEUE_FILE

    def _existing_queue(self) -> ExtractionQueue | None:
        """The queue if this store has one (opened without starting workers), else ``None``."""
        if self._queue is None and not self._queue_file().exists():
            return None
        return self._extraction_queue(start=False)

    def _extraction_queue(self, *, start: bool = True) -> ExtractionQueue:
        with self._guard:
            if self._queue is None:
                cfg = self.extraction
                self._queue = ExtractionQueue(
                    self.root,
                    self._extract_job,
                    workers=cfg.workers,
                    max_attempts=cfg.max_attempts,
                    backoff_s=cfg.retry_backoff_s,
                    max_backoff_s=max(cfg.retry_backoff_s, 3600.0),
                    max_deferrals=cfg.max_deferrals,
                    start=False,
                )
            if start and self.llm is not None:
                self._queue.start()  # idempotent: workers are started once
            return self._queue

    def _extract_job(self, scope: Scope, session_id: str) -> None:
        """One queued session: raises when it failed, so the queue retries it and finally records the reason. What
        says nothing about the session (the model could not answer now, the disk is full) is ``RetryLater``."""
        try:
            result = self.extract(scope, ExtractParams(session_id=session_id))
        except StorageFull as e:
            raise RetryLater(str(e)) from e
        if result.sessions_failed:
            reason = result.errors.get(session_id) or "extraction failed"
            if session_id in result.retry_later:  # the LLM could not answer now: not the session's fault
                raise RetryLater(reason)
            raise RuntimeError(reason)

    def _extracted(self, scope: Scope, session_id: str, one: ExtractionResult) -> None:
        """``extraction.done`` or ``extraction.failed`` for one session, once its outcome is written."""
        if one.sessions_done:
            self.hub.emit(
                "extraction.done",
                scope,
                session_id=session_id,
                facts_added=one.facts_added,
                facts_superseded=one.facts_superseded,
                events_added=one.events_added,
            )
        elif one.sessions_failed:
            self.hub.emit(
                "extraction.failed", scope, session_id=session_id, retry_later=session_id in one.retry_later
            )

    def require_llm(self, what: str = "extraction needs an LLM") -> LLM:
        if self.llm is None:
            raise needs_llm(what)
        return self.llm

    def after_ingest(self, scope: Scope, session_id: str, result: IngestResult) -> IngestResult:
        """A stored session's extraction: queued (``extraction_job``) by default, or run now when extraction is
        configured to run in the foreground (``extraction``)."""
        if self.extraction.background:
            job = self._extraction_queue().enqueue(scope, session_id)
            return result.model_copy(update={"extraction_job": job})
        done = self.extract(scope, ExtractParams(session_id=session_id))
        return result.model_copy(update={"extraction": done})

    def jobs(self, scope: Scope | None = None) -> list[ExtractionJob]:
        queue = self._existing_queue()
        return [] if queue is None else queue.jobs(scope)

    def retry(self, scope: Scope) -> int:
        self.require_llm()
        return self._extraction_queue().requeue_failed(scope)

    def wait(self, timeout: float | None = None) -> bool:
        return True if self._queue is None else self._queue.wait(timeout)

    def forget(self, scope: Scope, sessions: list[str] | None = None) -> None:
        """Drop the queued jobs of an erased scope (``sessions=None``) or of its erased sessions."""
        queue = self._existing_queue()
        if queue is None:
            return
        if sessions is None:
            queue.forget(scope)
        elif sessions:
            queue.forget_sessions(scope, sessions)

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()  # waits for running jobs; pending ones resume at the next open

    # -- extraction --------------------------------------------------------------------------------------------
    def extract(self, scope: Scope, p: ExtractParams, progress: Progress | None = None) -> ExtractionResult:
        """One session (any status) or every session not yet done, oldest first so later sessions update earlier
        facts; failures are recorded on the session and reported, never raised."""
        llm = self.require_llm()
        started = time.time()  # before the flush: what was asked for until now is in what this run reads
        # An ExitStack, not a bare __enter__/__exit__: a failure must reach the pool, which reopens a database
        # after an I/O error (store/pool.py).
        with contextlib.ExitStack() as stack:
            try:
                db = stack.enter_context(self.access.flushed(scope))  # extraction reads sessions from Kuzu
            except NotFound:
                if p.session_id is not None:
                    raise NotFound(f"no session {p.session_id!r} in scope {scope}") from None
                return ExtractionResult()
            with self.access.knowledge(scope):
                if p.session_id is not None:
                    if fq.session_info(db, p.session_id) is None:
                        raise NotFound(f"no session {p.session_id!r} in scope {scope}")
                    todo = [p.session_id]
                else:
                    todo = [sid for sid, _ in fq.sessions_to_extract(db, ("none", "pending", "failed"))]
                extractor = Extractor(llm, self.embedder, self.extraction)
                queue = self._existing_queue()
                total = ExtractionResult()
                outcomes: list[tuple[str, ExtractionResult]] = []
                try:
                    # One checkpoint for the whole run, not one per session (store.database.checkpoint_once); what
                    # a session's outcome announces (its event, its job settled) follows that checkpoint.
                    with db.checkpoint_once():
                        for i, sid in enumerate(todo, start=1):
                            with telemetry.span(
                                "graphrecall.extraction.session", telemetry.scope_attributes(scope)
                            ) as span:
                                one = extractor.extract_session(db, sid)
                                span.set_attributes(
                                    {
                                        "graphrecall.facts_added": one.facts_added,
                                        "graphrecall.failed": bool(one.sessions_failed),
                                    }
                                )
                            total = total + one
                            outcomes.append((sid, one))
                            if progress is not None:
                                progress(i, len(todo))
                    self._renew_adjacency(scope, db)
                finally:
                    for sid, one in outcomes:
                        self._extracted(scope, sid, one)
                        if one.sessions_done and queue is not None:
                            queue.settle(
                                scope, sid, asked_before=started
                            )  # a failed background job is resolved now
                return total

    @staticmethod
    def _renew_adjacency(scope: Scope, db: ScopeDatabase) -> None:
        """After a run that wrote extracted memory, before its sessions are announced done: the adjacency of a scope
        that is being searched is rebuilt here rather than by its next search (``store.adjacency.renew``). Only
        an optimisation: a failure is logged and left to that search, except Kuzu's I/O exception, which goes on
        up so that the pool retires the bucket (``DatabasePool.acquire``), as it would for the search."""
        try:
            adjacency.renew(db)
        except Exception as e:  # the extraction succeeded: its next search builds the adjacency
            if is_io_failure(e):
                raise
            log.warning(
                "%s: renewing the adjacency after extraction failed (%s); the next search builds it", scope, e
            )

    def add_fact(self, scope: Scope, p: AddFactParams) -> AddedFact:
        """Versioned like an extracted fact: by the extractor's versioning call when an LLM is configured, else by
        the same-text rule (docs/months.md)."""
        extractor = Extractor(self.llm, self.embedder, self.extraction) if self.llm is not None else None
        with (
            self.access.flushed(scope, create=True) as db,
            self.access.knowledge(scope),
        ):  # a source may be in the log
            said = fq.session_date(db, p.source) if p.source is not None else None
            known = KnownFact(
                text=" ".join(p.text.split()),
                kind=FactKind(p.kind).value,
                recorded_at=said or utcnow(),
                session_id=p.source or "app",
                valid_from=p.valid_from,
                entities=list(p.entities or []),
                key=" ".join(p.key.split()) if p.key is not None else None,
            )
            plan = plan_known_fact(db, self.embedder, known, self.extraction, extractor=extractor)
            with db.write() as txn:
                fq.write_extraction(txn, plan.write, dim=self.embedder.dim)
            v = plan.verdict
            replaced = v.target.id if v.target is not None else None
            stored = replaced if v.decision == "DUPLICATE" and replaced is not None else plan.row.id
            fact = fq.get_facts(db, [stored])[stored]
        if v.decision in ("UPDATE", "CONTRADICT") and replaced is not None:
            self.hub.emit("fact.superseded", scope, fact_id=replaced, superseded_by=stored, by="add_fact")
        return AddedFact(
            fact=fact,
            decision=v.decision,
            superseded=replaced if v.decision in ("UPDATE", "CONTRADICT") else None,
            decided_by="llm"
            if v.by == "llm"
            else "rule"
            if v.by == "rule"
            else "key"
            if v.by == "key"
            else "default",
            reason=v.reason,
        )

    def consolidate(
        self, scope: Scope, p: ConsolidateParams, llm: LLM | None = None, *, max_llm_calls: int | None = None
    ) -> Consolidation:
        """Plan (reads, at most one LLM call per cluster or window), then write the whole plan in one
        transaction; a dry run stops before the write. ``max_llm_calls``: this run's budget (maintenance), instead
        of the configured one."""
        model = llm or self.llm
        if p.summaries and model is None:
            raise needs_llm("summaries need an LLM")
        if not self.access.has_database(scope) and not (p.summaries and self.access.resident(scope)):
            return Consolidation(scope=scope, dry_run=p.dry_run)  # nothing extracted yet: no facts to merge
        since = model.usage.calls if model is not None else 0
        config = (
            self.consolidation
            if max_llm_calls is None
            else self.consolidation.model_copy(update={"max_llm_calls": max_llm_calls})
        )
        consolidator = Consolidator(self.embedder, config, model, max_tokens=self.extraction.max_tokens)
        with self.access.flushed(scope) as db, self.access.knowledge(scope):
            plan = consolidator.plan(db, summaries=p.summaries, now=utcnow())
            if not p.dry_run:
                consolidator.apply(db, plan)
        result = plan.result(scope, dry_run=p.dry_run, llm=model, since=since)
        if not p.dry_run:
            for merge in result.merges:
                for old in merge.superseded:
                    self.hub.emit(
                        "fact.superseded", scope, fact_id=old, superseded_by=merge.kept_id, by="consolidate"
                    )
        return result

    def supersede(self, scope: Scope, p: SupersedeParams) -> Fact:
        """``old_id`` superseded by ``new_id`` by hand: ``valid_to`` by ``superseded_until``, ``expired_at`` now,
        a SUPERSEDES edge new -> old. Nothing is deleted."""
        if p.old_id == p.new_id:
            raise InvalidInput(f"a fact cannot supersede itself ({p.old_id!r})", where="new_id")
        with self.access.database(scope) as db, self.access.knowledge(scope):
            found = fq.get_facts(db, [p.old_id, p.new_id])
            for fid, where in ((p.old_id, "old_id"), (p.new_id, "new_id")):
                if fid not in found:
                    raise NotFound(f"no fact {fid!r} in scope {scope} ({where})")
            old, new = found[p.old_id], found[p.new_id]
            if old.expired_at is not None:
                raise InvalidInput(
                    f"fact {p.old_id!r} is already superseded (by {old.superseded_by!r}); supersede the current "
                    "version instead (see history)",
                    where="old_id",
                )
            if new.expired_at is not None:
                raise InvalidInput(
                    f"fact {p.new_id!r} is itself superseded (by {new.superseded_by!r}); it cannot replace a "
                    "current fact",
                    where="new_id",
                )
            now = utcnow()
            with db.write() as txn:
                fq.supersede(
                    txn, fq.Supersession(p.old_id, p.new_id, superseded_until(old, new, now), now, p.reason)
                )
            replaced = fq.get_facts(db, [p.old_id])[p.old_id]
        self.hub.emit("fact.superseded", scope, fact_id=p.old_id, superseded_by=p.new_id, by="supersede")
        return replaced

    def feedback(self, scope: Scope, p: FeedbackParams) -> FeedbackResult:
        """A fact: reinforced and confirmed (useful) or disputed (wrong); a round or an event: its net count moved
        by one (``store.feedback``). The log is flushed first: a hit may be a round not yet in Kuzu."""
        now = utcnow()
        with self.access.flushed(scope) as db, self.access.knowledge(scope):
            found = feedback_store.find(db, p.item_id)
            if found is None:
                raise NotFound(
                    f"no fact, round or event {p.item_id!r} in scope {scope} (pass a hit's id from search or "
                    "context, or a fact's)"
                )
            with db.write() as txn:
                if found.kind == "fact":
                    feedback_store.on_fact(txn, found.id, useful=p.useful, note=p.note, now=now)
                    count = None
                else:
                    count = feedback_store.on_row(txn, found.kind, found.id, useful=p.useful)
            if found.kind == "fact":
                reinforcement, disputed = feedback_store.fact_state(db, found.id)
                result = FeedbackResult(id=found.id, kind="fact", useful=p.useful, reinforcement=reinforcement,
                                        disputed=disputed is not None)  # fmt: skip
            else:
                result = FeedbackResult(id=found.id, kind=found.kind, useful=p.useful, feedback=count)
        self.hub.emit("feedback.given", scope, item_id=found.id, kind=found.kind, useful=p.useful)
        return result

    # -- reads -------------------------------------------------------------------------------------------------
    def facts(self, scope: Scope, p: FactsParams) -> list[Fact]:
        if not self.access.has_database(scope):
            return []
        with self.access.database(scope) as db:
            if past_the_end(db, "Fact", p.offset):
                return []
            return fq.list_facts(
                db, as_of=p.as_of, include_superseded=p.include_superseded, limit=p.limit, offset=p.offset
            )

    def history(self, scope: Scope, fact_id: str) -> list[Fact]:
        with self.access.database(scope) as db:
            chain = fq.supersession_chain(db, fact_id)
        if not chain:
            raise NotFound(f"no fact {fact_id!r} in scope {scope}")
        return chain

    def entities(self, scope: Scope) -> list[Entity]:
        if not self.access.has_database(scope):
            return []
        with self.access.database(scope) as db:
            return fq.list_entities(db)

    def events(self, scope: Scope, p: EventsParams) -> list[Event]:
        if not self.access.has_database(scope):
            return []
        with self.access.database(scope) as db:
            if past_the_end(
                db, "Event", p.offset
            ):  # Kuzu's SKIP far past the rows crashes (services/paging.py)
                return []
            return fq.list_events(db, limit=p.limit, offset=p.offset)
