"""The services under the ``Memory`` facade: one per family of operations, each owning its locks and the
"resident in its log, or flush first" rule through ``ScopeAccess``.

| service | operations |
|---|---|
| ``WritingService`` | add_session, add_messages, add_sessions, flush, backfill_passages |
| ``DocumentService`` | add_document: a document's passages as a session of their own, replaced when it changes |
| ``HistoryService`` | stats, sessions, get_session, export_sessions, export_scope |
| ``ImportService`` | import_scope |
| ``KnowledgeService`` | extract and its background queue, add_fact, consolidate, supersede, facts, history, entities, events |
| ``ErasureService`` | erase, forget |
| ``Recall`` (``graphrecall.recall``) | search, context, profile: one question's view of a scope |
| ``AnsweringService`` | answer: the Reader over that view |
| ``MaintenanceService`` | maintain (backup, then consolidation, when a scope changed and is idle; compaction past the bound), and the journal ``report`` reads |
| ``UsageLog`` | search latencies and answers per scope, for ``report`` |

``Services.open`` builds them over one store root; the facade holds one ``Services`` and only delegates.
"""

from __future__ import annotations

from pathlib import Path

from graphrecall.config import ConsolidationConfig, RetrievalConfig, Settings
from graphrecall.embed import Embedder
from graphrecall.events import EventHub, MemoryEvent
from graphrecall.extract.extractor import ExtractionConfig
from graphrecall.hook_errors import error_counts
from graphrecall.llm import LLM
from graphrecall.models import GrowthPoint, IngestResult, Scope, ScopeReport
from graphrecall.params import AddSessionParams, ReportParams
from graphrecall.recall import Recall
from graphrecall.retrieve.rerank import Reranker, load_reranker
from graphrecall.services.access import ScopeAccess
from graphrecall.services.answering import AnsweringService
from graphrecall.services.documents import DocumentService
from graphrecall.services.erasure import ErasureService
from graphrecall.services.history import HistoryService
from graphrecall.services.importing import ImportService, scope_export
from graphrecall.services.knowledge import KnowledgeService, needs_llm
from graphrecall.services.maintenance import MaintenanceService
from graphrecall.services.overview import OverviewService
from graphrecall.services.usage import UsageLog
from graphrecall.services.writing import WritingService
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.pool import DatabasePool
from graphrecall.writer import Writer

__all__ = ["ScopeAccess", "Services", "needs_llm", "scope_export"]


class Services:
    """Every service of one store root, built once per ``Memory``."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        embedder: Embedder,
        *,
        reranker: Reranker | None,
        retrieval: RetrievalConfig,
        llm: LLM | None,
        extraction: ExtractionConfig,
        consolidation: ConsolidationConfig,
    ) -> None:
        pool = DatabasePool(
            root,
            embedder_id=embedder.id,
            dim=embedder.dim,
            capacity=settings.pool_size,
            buffer_pool_size=settings.buffer_pool_bytes,
            buckets_per_org=settings.buckets_per_org,
        )
        logs = ScopeLogs(
            pool,
            embedder.dim,
            capacity=2 * settings.pool_size,  # a scope that lives in its log has a log and no database
            max_age_s=settings.flush_max_age_s,
            resident_rounds=settings.resident_rounds,
            flush_slots=settings.flush_concurrency,
        )
        self.access = ScopeAccess(pool, logs)
        self.events = EventHub()  # graphrecall.events: what changed, for Memory.subscribe
        self.writer = Writer(embedder, logs, passage_from_chars=settings.passage_from_chars)
        self.recall = Recall(
            pool,
            logs,
            embedder,
            retrieval,
            reranker if reranker is not None else load_reranker(settings.reranker, llm),
        )
        self.writing = WritingService(self.access, self.writer, embedder, self.events)
        self.knowledge = KnowledgeService(
            self.access, embedder, root, llm, extraction, consolidation, hub=self.events
        )
        self.history = HistoryService(self.access, embedder, self.knowledge.jobs)
        self.importing = ImportService(self.access, self.writing, embedder)
        self.erasure = ErasureService(self.access, self.writer, self.knowledge, self.events)
        self.answering = AnsweringService(self.knowledge)
        self.documents = DocumentService(self.writing, self.history, self.erasure, self.knowledge)
        self.overview = OverviewService(self.access, self.history, self.knowledge)
        self.root = root
        self.maintenance = MaintenanceService(
            root,
            self.history,
            self.knowledge,
            pool=pool,
            compact_free_fraction=settings.compact_free_fraction,
        )
        self.usage = UsageLog(root)
        self.events.subscribe(self._forgotten)

    def _forgotten(self, event: MemoryEvent) -> None:
        """A scope erased whole: its usage figures and maintenance journal go with it."""
        if event.type == "scope.erased":
            self.usage.forget(event.scope)
            self.maintenance.forget(event.scope)

    def report(self, scope: Scope, p: ReportParams) -> ScopeReport:
        """``report``: what the history, the extraction queue, the usage log and the maintenance journal know."""
        growth, runs = self.maintenance.history_of(scope)
        jobs: dict[str, int] = {}
        for job in self.knowledge.jobs(scope):
            jobs[job.status] = jobs.get(job.status, 0) + 1
        use = self.usage.figures(scope, since_s=None if p.since_hours is None else p.since_hours * 3600)
        return ScopeReport(
            scope=scope,
            stats=self.history.stats(scope),
            growth=[GrowthPoint(at=at, **counts) for at, counts in growth],
            extraction=jobs,
            searches=use.searches,
            search_p50_ms=use.p50_ms,
            search_p95_ms=use.p95_ms,
            answers=use.answers,
            abstained=use.abstained,
            abstention_rate=None if not use.answers else round(use.abstained / use.answers, 4),
            maintenance=runs,
            hook_errors=error_counts(self.root)["by_scope"].get(f"{scope.org_id}/{scope.user_id}", 0),
        )

    def add_session(self, scope: Scope, p: AddSessionParams) -> IngestResult:
        """The one operation that spans two services: store the session, then queue (or run) its extraction. An
        LLM is required before anything is written, so a refused extraction stores nothing."""
        if p.extract:
            self.knowledge.require_llm()
        result = self.writing.add_session(scope, p)
        return self.knowledge.after_ingest(scope, p.session_id, result) if p.extract else result

    def close(self) -> None:
        """Running extractions finish (pending ones stay queued), pending writes reach Kuzu, databases close."""
        try:
            self.knowledge.close()
            self.usage.flush()
        finally:
            self.access.close()
