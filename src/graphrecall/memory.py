"""The facade: ``Memory`` opens a store root and exposes every operation of ``graphrecall.operations``.

Every public method takes the ``Scope`` first (one scope is one user's memory), validates its arguments against
the operation's parameter model (the same model the HTTP API, the MCP tools and the CLI use, so a bound or a date
rule cannot differ between them), and hands the work to one service (``graphrecall.services``). Nothing here
touches the store: the services own the locks and the "resident in its log, or flush first" rule.
"""

from __future__ import annotations

__all__ = ["Memory", "Progress", "ScopeLike", "When", "as_scope"]

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar, cast

from graphrecall import operations as ops
from graphrecall.config import ConsolidationConfig, RetrievalConfig, Settings
from graphrecall.dataset import Dataset, DatasetFormat
from graphrecall.dataset import build as build_dataset
from graphrecall.documents import read_document
from graphrecall.embed import CachedEmbedder, Embedder, default_embedder
from graphrecall.errors import InvalidInput
from graphrecall.events import EventSink
from graphrecall.extract.extractor import ExtractionConfig
from graphrecall.llm import LLM
from graphrecall.models import (
    AddedFact,
    Consolidation,
    Context,
    Entity,
    Erasure,
    Event,
    ExtractionJob,
    ExtractionQueue,
    ExtractionResult,
    Fact,
    FactKind,
    FeedbackResult,
    Hit,
    HitKind,
    ImportResult,
    IngestResult,
    LearnedDocument,
    Maintenance,
    MemoryGraph,
    Message,
    Profile,
    Scope,
    ScopeExport,
    ScopePage,
    ScopeReport,
    ScopeStats,
    Session,
    SessionInput,
    TimeRange,
)
from graphrecall.params import (
    BATCH_SESSIONS,
    AnswerMode,
    Params,
    ScopeLike,
    ToolProtocol,
    as_scope,
    same_org_also,
    validate,
)
from graphrecall.read.models import Answer
from graphrecall.recall import ScopeRecall
from graphrecall.retrieve.rerank import Reranker
from graphrecall.services import Services, scope_export

Progress = Callable[[int, int], None]
When = datetime | str | None
AlsoLike = Scope | tuple[str, str] | str
"""A shared scope to read with a user's: a ``Scope``, an ``(org, user)`` pair, or a user id of the same org."""
P = TypeVar("P", bound=Params)
T = TypeVar("T")


def _names_a_file(text: str) -> bool:
    """Whether a one-line text is the path of an existing file (a caller who meant ``Path(text)``)."""
    if "\n" in text or len(text) > 1024:
        return False
    try:
        return Path(text).is_file()
    except OSError:  # a name too long for the file system, or one it cannot hold
        return False


class _OnKnowledge(Generic[T]):
    """An attribute of ``Memory`` kept by its knowledge service (the model and settings that extraction, ``add_fact``,
    consolidation and answers read when they run), so setting it on the Memory changes what they use."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, memory: Memory, owner: type | None = None) -> T:
        return cast(T, getattr(memory._s.knowledge, self.name))

    def __set__(self, memory: Memory, value: T) -> None:
        setattr(memory._s.knowledge, self.name, value)


class Memory:
    """Long-term memory over a store root. Thread-safe; use one instance per process (Kuzu allows one writer
    process per database file). Use it as a context manager, or call ``close``."""

    def __init__(
        self, root: str | Path | None = None, *, embedder: Embedder | str | None = None, settings: Settings | None = None,
        reranker: Reranker | str | None = None, retrieval: RetrievalConfig | None = None, llm: LLM | None = None,
        extraction: ExtractionConfig | None = None, consolidation: ConsolidationConfig | None = None,
    ) -> None:  # fmt: skip
        self.settings = settings or Settings.from_env(root=Path(root) if root is not None else None)
        if root is not None:
            self.settings.root = Path(root)
        self.root = self.settings.root.expanduser()  # created by the first write, never by a read
        if embedder is None or isinstance(embedder, str):  # a spec (embed.spec), else the configured one
            embedder = default_embedder(embedder if isinstance(embedder, str) else self.settings.embedder)
            if self.settings.embed_cache is not None and isinstance(embedder, CachedEmbedder):
                embedder = CachedEmbedder(embedder.inner, path=self.settings.embed_cache)
        self.embedder = embedder
        if isinstance(reranker, str):  # a spec (retrieve.rerank.load_reranker) for GRAPHRECALL_RERANKER's
            self.settings = self.settings.model_copy(update={"reranker": reranker})
            reranker = None
        self._s = Services(
            self.root, self.settings, embedder, reranker=reranker, retrieval=retrieval or self.settings.retrieval,
            llm=llm, extraction=extraction or ExtractionConfig(),
            consolidation=consolidation or self.settings.consolidation,
        )  # fmt: skip
        self._closed = False
        self._lock = threading.Lock()

    llm: _OnKnowledge[LLM | None] = _OnKnowledge()  # None: rules only; answer() falls back to GRAPHRECALL_LLM
    extraction: _OnKnowledge[ExtractionConfig] = _OnKnowledge()
    consolidation: _OnKnowledge[ConsolidationConfig] = _OnKnowledge()

    @classmethod
    def open(cls, root: str | Path | None = None, **kwargs: Any) -> Memory:
        """Open (creating on the first write) a store root. Use as a context manager to close databases on exit."""
        return cls(root, **kwargs)

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def subscribe(self, sink: EventSink) -> Callable[[], None]:
        """Call ``sink(event)`` after every change to memory from now on (``graphrecall.events``: sessions stored,
        extractions done or failed, facts superseded, erasures; ids and counts, never text); returns a function that
        stops it. Sinks run on the thread that made the change: keep them quick."""
        return self._s.events.subscribe(sink)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._s.close()
                self._closed = True

    def _check(self, op: ops.Operation[P], scope: ScopeLike, args: Mapping[str, Any]) -> tuple[Scope, P]:
        """The scope and the operation's validated parameters (``InvalidInput`` names the argument)."""
        s = as_scope(scope)
        return s, validate(op.params, {name: args[name] for name in op.params.model_fields})

    # -- ingest: services.writing --------------------------------------------------------------------------------
    def add_session(
        self, scope: ScopeLike, messages: Sequence[Message | Mapping[str, Any]], *, session_id: str,
        date: When = None, extract: bool = False,
    ) -> IngestResult:  # fmt: skip
        """Store one session (messages, rounds, embeddings, index entries); re-adding the same ids changes nothing.
        ``extract=True`` also extracts facts, events and entities with the LLM: queued in the background
        (``result.extraction_job``; ``wait_for_extraction`` waits) or, with ``ExtractionConfig(background=False)``,
        inside this call (``result.extraction``). The session is stored first either way."""
        s, p = self._check(ops.ADD_SESSION, scope, locals())
        return self._s.add_session(s, p)

    def add_messages(
        self, scope: ScopeLike, messages: Sequence[Message | Mapping[str, Any]], *, session_id: str = "default",
        date: When = None,
    ) -> IngestResult:  # fmt: skip
        """Append turns to a session (created if new): messages with ids are idempotent; those without are
        numbered after the stored ones, so sending them twice stores them twice."""
        s, p = self._check(ops.ADD_MESSAGES, scope, locals())
        return self._s.writing.add_messages(s, p)

    def add_sessions(
        self, scope: ScopeLike, sessions: Iterable[SessionInput | Mapping[str, Any]], *,
        batch_sessions: int = BATCH_SESSIONS, progress: Progress | None = None,
    ) -> IngestResult:  # fmt: skip
        """Bulk ingest: everything is validated before anything is written; each batch of ``batch_sessions`` is
        one transaction (all or nothing)."""
        s, p = self._check(ops.ADD_SESSIONS, scope, locals())
        return self._s.writing.add_sessions(s, p, progress)

    def import_sessions(
        self, scope: ScopeLike, sessions: Sequence[Session | Mapping[str, Any]], *,
        format: str = "graphrecall.sessions/v1", org_id: str | None = None, user_id: str | None = None,
    ) -> IngestResult:  # fmt: skip
        """Sessions in the export format (``export_sessions``), added like ``add_sessions``."""
        s, p = self._check(ops.IMPORT_SESSIONS, scope, locals())
        return self._s.writing.import_sessions(s, p)

    def add_document(
        self, scope: ScopeLike, document: str | os.PathLike[str], *, source: str | None = None,
        format: Literal["auto", "markdown", "text"] = "auto", date: When = None, extract: bool = False,
    ) -> LearnedDocument:  # fmt: skip
        """Learn a document: split at headings and paragraphs into passages, stored as a session of their own and
        searched beside the chat history (a hit's ``document`` names its source, headings and position).
        ``document``: its text, or a ``pathlib.Path`` to a Markdown, plain-text or PDF file (PDF: the ``pdf``
        extra). ``source``: the name it is learned under; a file's path as given by default, a text's title and a
        hash of the text (the same text is the same document, a changed one another: name it to replace it). Learning the same source again replaces
        its passages (and what was extracted from them); the same passages again change nothing. ``extract``:
        extraction over its passages, as ``add_session(extract=True)``. docs/documents.md."""
        if isinstance(document, os.PathLike):
            path = Path(document)
            document, format = read_document(path, None if format == "auto" else format)
            source = path.as_posix() if source is None else source
        elif source is None and _names_a_file(document):
            raise InvalidInput(
                f"{document!r} is the name of a file: pass pathlib.Path({document!r}) to learn the file (a str is "
                "the document's text; give a source to learn this text)",
                where="document",
            )
        s, p = self._check(ops.ADD_DOCUMENT, scope, locals())
        return self._s.documents.add_document(s, p)

    def flush(self) -> None:
        """Move every acknowledged write still in an open write log into Kuzu now (the flusher does this on its
        own within ``Settings.flush_max_age_s``); scopes that live in their log get their database."""
        self._s.writing.flush_all()

    def backfill_passages(self, scope: ScopeLike) -> int:
        """Give passage vectors to long user turns stored without them; returns how many rounds got them."""
        return self._s.writing.backfill_passages(as_scope(scope))

    # -- recall: graphrecall.recall and services.answering -----------------------------------------------------------
    def recall(self, scope: ScopeLike, question_date: When = None, also: Sequence[str] = ()) -> ScopeRecall:
        """One question's view of a scope, what ``search``, ``context``, ``profile`` and ``answer`` read through:
        nothing recorded after ``question_date`` (plus the same-day slack) is visible, relative time is anchored
        on it; ``None`` means now. ``also``: shared scopes of the same organisation read with it (validated user
        ids or ``org/user``, as ``params.SharedScopeName`` gives them). Hand it to ``graphrecall.read.Reader.answer``
        to run a Reader of your own."""
        cutoff = self._s.recall.cutoff(question_date)
        return self._s.recall.scope(as_scope(scope), cutoff, also)

    def search(
        self, scope: ScopeLike, query: str, k: int = 10, *, question_date: When = None, as_of: When = None,
        kinds: Sequence[HitKind] = ("round",), time_range: TimeRange | None = None, also: Sequence[AlsoLike] = (),
    ) -> list[Hit]:  # fmt: skip
        """Hybrid search over the scope's memory as asked at ``question_date`` (see ``recall``). ``kinds``: rounds
        (default) and/or extracted ``fact`` and ``event`` hits (current facts, or those valid at ``as_of``).
        ``also``: shared scopes of the organisation (``Scope("acme", "_shared")`` or ``"_shared"``) searched with
        it, the hits fused into one ranking, each hit's ``scope`` saying where it came from."""
        also = same_org_also(as_scope(scope), also)
        s, p = self._check(ops.SEARCH, scope, locals())
        with self._s.usage.search(s):
            return self.recall(s, p.question_date, p.also).search(
                p.query, p.k, kinds=tuple(p.kinds), time_range=time_range, as_of=p.as_of
            )

    def context(
        self, scope: ScopeLike, query: str, token_budget: int = 2000, *, k: int = 30, question_date: When = None,
        include_profile: bool = False, also: Sequence[AlsoLike] = (),
    ) -> Context:  # fmt: skip
        """Evidence for a reader: the best hits that fit ``token_budget``, dated, grouped by session,
        chronological; ``include_profile`` puts the profile first, within a third of the budget. ``also``: as in
        ``search``; a shared scope's sessions are headed with its name (``_team/s1``)."""
        also = same_org_also(as_scope(scope), also)
        s, p = self._check(ops.CONTEXT, scope, locals())
        with self._s.usage.search(s):
            return self.recall(s, p.question_date, p.also).context(
                p.query, p.token_budget, k=p.k, include_profile=p.include_profile
            )

    def profile(
        self,
        scope: ScopeLike,
        as_of: When = None,
        token_budget: int | None = None,
        also: Sequence[AlsoLike] = (),
    ) -> Profile:
        """The user's current facts by kind at ``as_of`` (``None``: now; read like a question date), most
        reinforced and most recent first, each with its session and date; ``.text`` is the rendered block.
        ``also``: shared scopes whose facts join the user's, each such item's ``scope`` naming it."""
        also = same_org_also(as_scope(scope), also)
        s, p = self._check(ops.PROFILE, scope, locals())
        return self.recall(s, p.as_of, p.also).profile(p.token_budget)

    def answer(
        self, scope: ScopeLike, question: str, question_date: When = None, mode: AnswerMode = "auto",
        llm: LLM | None = None, *, max_tool_steps: int = 4, tools: ToolProtocol = "auto", token_budget: int | None = None,
        also: Sequence[AlsoLike] = (),
    ) -> Answer:  # fmt: skip
        """Answer ``question`` from memory with the Reader (``auto``, ``recall`` or ``synthesis`` mode): text,
        whether it abstained, cited evidence, tool trace, usage. The model is ``llm``, else this Memory's, else
        ``GRAPHRECALL_LLM``; with none, ``NotAvailable``."""
        also = same_org_also(as_scope(scope), also)
        s, p = self._check(ops.ANSWER, scope, locals())
        answer = self._s.answering.answer(self.recall(s, p.question_date, p.also), p, llm)
        self._s.usage.answered(s, abstained=answer.abstained)
        return answer

    # -- history: services.history, services.importing, services.erasure ----------------------------------------------
    def stats(self, scope: ScopeLike) -> ScopeStats:
        """Counts by kind and bytes on disk (zero for a scope that holds nothing)."""
        return self._s.history.stats(as_scope(scope))

    def sessions(self, scope: ScopeLike, *, limit: int = 1000, offset: int = 0) -> list[Session]:
        """The scope's sessions without their messages, oldest first, with the extraction queue's status."""
        s, p = self._check(ops.SESSIONS, scope, locals())
        return self._s.history.sessions(s, limit=p.limit, offset=p.offset)

    def get_session(self, scope: ScopeLike, session_id: str) -> Session:
        s, p = self._check(ops.GET_SESSION, scope, locals())
        return self._s.history.get_session(s, p.session_id)

    def export_sessions(self, scope: ScopeLike) -> list[Session]:
        """Every session with its messages, oldest first: the portable form of a scope's raw history."""
        return self._s.history.export_sessions(as_scope(scope))

    def export_scope(self, scope: ScopeLike) -> ScopeExport:
        """Everything the scope holds: sessions, every fact version with its SUPERSEDES edges, events, entities
        and relations; what ``import_scope`` restores (docs/months.md)."""
        return self._s.history.export_scope(as_scope(scope))

    def import_scope(self, scope: ScopeLike, doc: ScopeExport | Mapping[str, Any]) -> ImportResult:
        """Restore an ``export_scope`` document: its sessions (idempotent), then its extracted memory exactly as
        exported, into a scope without extracted memory (or one holding exactly it: skipped); anything else is
        refused before anything is written."""
        return self._s.importing.import_scope(as_scope(scope), scope_export(doc))

    def forget(self, scope: ScopeLike) -> bool:
        """Erase a scope entirely (database, indexes and write log); returns whether anything was stored."""
        return self._s.erasure.forget(as_scope(scope))

    def erase(
        self, scope: ScopeLike, *, session_ids: Sequence[str] | None = None, fact_ids: Sequence[str] | None = None,
        before: When = None, matching: str | None = None, dry_run: bool = False,
    ) -> Erasure:  # fmt: skip
        """Forget part of a scope: sessions by id, facts by id, sessions started before ``before``, and every round,
        fact and event whose text holds all the words of ``matching``, with everything derived from them (a
        session's messages, a message's rounds, facts and events, entities nothing else mentions, vectors and
        index entries). ``dry_run`` lists the same and deletes nothing; unknown ids are ``NotFound`` first."""
        s, p = self._check(ops.ERASE, scope, locals())
        return self._s.erasure.erase(s, p)

    def stored(self, scope: ScopeLike) -> bool:
        """Whether the scope holds anything (a database or a write log); opens nothing."""
        return self._s.access.stored(as_scope(scope))

    def scopes(self) -> list[Scope]:
        """Every scope under the root (those still held in their write log too), by org and user."""
        return self._s.access.scopes()

    # -- extracted memory: services.knowledge ----------------------------------------------------------------------
    def extract(
        self, scope: ScopeLike, session_id: str | None = None, *, progress: Progress | None = None
    ) -> ExtractionResult:
        """Extract facts, events and entities from one session, or every session not yet done (oldest first);
        failures are recorded on the session and reported in the result, never raised."""
        s, p = self._check(ops.EXTRACT, scope, locals())
        return self._s.knowledge.extract(s, p, progress)

    def extraction_jobs(self, scope: ScopeLike | None = None) -> list[ExtractionJob]:
        """Background extraction jobs (pending, running, done, failed with the reason), of one scope or all."""
        return self._s.knowledge.jobs(as_scope(scope) if scope is not None else None)

    def retry_extraction(self, scope: ScopeLike) -> int:
        """Queue the scope's failed background extractions again; returns how many."""
        return self._s.knowledge.retry(as_scope(scope))

    def wait_for_extraction(self, timeout: float | None = None) -> bool:
        """Block until no background extraction is pending or running (True) or ``timeout`` passes (False)."""
        return self._s.knowledge.wait(timeout)

    def add_fact(
        self, scope: ScopeLike, text: str, *, kind: FactKind | str = FactKind.other, entities: Sequence[str] | None = None,
        valid_from: When = None, source: str | None = None, key: str | None = None,
    ) -> AddedFact:  # fmt: skip
        """Store a fact the application already knows, versioned like an extracted fact: by the LLM when one is
        configured, else only the same or a near-identical text of the same kind about the same entities
        reinforces or replaces a stored fact (docs/months.md). ``source``: a session it comes from, or a label.
        ``key``: the application's name for what it states (``"preferred_language"``): the current fact of the
        same kind and key is replaced by this one, deterministically, and stays in history."""
        s, p = self._check(ops.ADD_FACT, scope, locals())
        return self._s.knowledge.add_fact(s, p)

    def consolidate(
        self, scope: ScopeLike, *, dry_run: bool = False, summaries: bool = False, llm: LLM | None = None
    ) -> Consolidation:
        """Merge clusters of duplicate current facts (the others superseded, never deleted), link events to the
        entities they name, and with ``summaries`` write a dated summary per old window (docs/months.md)."""
        s, p = self._check(ops.CONSOLIDATE, scope, locals())
        return self._s.knowledge.consolidate(s, p, llm)

    def maintain(
        self, scope: ScopeLike, *, dry_run: bool = False, force: bool = False, idle_s: float = 1800.0,
        max_llm_calls: int = 20, keep_backups: int = 5,
    ) -> Maintenance:  # fmt: skip
        """When the scope changed since its last maintenance and has been idle for ``idle_s``: a backup (a
        whole-scope export under ``<root>/backups``), then ``consolidate`` (summaries too with an LLM), within
        ``max_llm_calls``. On every call, due or not: the scope's bucket is rewritten once its free space passes
        ``Settings.compact_free_fraction`` (the result's ``compaction``), and so are the scope's derived indexes
        past the same share of dead rows. ``graphrecall serve --maintain`` runs it by itself
        (``services.maintenance``)."""
        s, p = self._check(ops.MAINTAIN, scope, locals())
        return self._s.maintenance.maintain(s, p)

    def report(self, scope: ScopeLike, *, since_hours: float | None = None) -> ScopeReport:
        """How the scope grew and is used: counts now and over time, extraction jobs by status, search latency
        (p50/p95), answers and abstentions, maintenance runs."""
        s, p = self._check(ops.REPORT, scope, locals())
        return self._s.report(s, p)

    def dataset(
        self, scope: ScopeLike, *, format: DatasetFormat = "qa", generate: bool = False, limit: int | None = None,
        llm: LLM | None = None,
    ) -> Dataset:  # fmt: skip
        """Records built from the scope's memory for fine-tuning or evaluating an assistant, each citing its
        sessions and messages (``graphrecall.dataset``): ``chat``, ``qa`` or ``graph``. ``generate``: qa pairs
        written by the LLM (``llm``, else this Memory's) and kept only when its check finds them supported."""
        s, p = self._check(ops.DATASET, scope, locals())
        model = (
            self._s.knowledge.require_llm("generated questions need an LLM")
            if p.generate and llm is None
            else llm
        )
        return build_dataset(self._s.history.export_scope(s), p.format, llm=model if p.generate else None,
                             limit=p.limit)  # fmt: skip

    def supersede(self, scope: ScopeLike, old_id: str, new_id: str, *, reason: str = "manual") -> Fact:
        """Mark ``old_id`` as superseded by ``new_id`` by hand; returns the updated old fact."""
        s, p = self._check(ops.SUPERSEDE, scope, locals())
        return self._s.knowledge.supersede(s, p)

    def feedback(
        self, scope: ScopeLike, item_id: str, *, useful: bool, note: str | None = None
    ) -> FeedbackResult:
        """Say that a hit (a round, fact or event id from ``search``/``context``) or a fact was useful or wrong.
        A fact marked useful is reinforced (its salience rises) and any dispute lifted; marked wrong it is disputed:
        kept, shown as such, left out of the profile until marked useful. A round or event keeps a net count that
        ranking reads only with ``RetrievalConfig.feedback_weight`` > 0 (off: docs/months.md "Feedback")."""
        s, p = self._check(ops.FEEDBACK, scope, locals())
        return self._s.knowledge.feedback(s, p)

    def facts(
        self, scope: ScopeLike, *, as_of: When = None, include_superseded: bool = False, limit: int = 100,
        offset: int = 0,
    ) -> list[Fact]:  # fmt: skip
        """Stored facts, oldest first: the current ones, those true at ``as_of`` (valid time), or every version."""
        s, p = self._check(ops.FACTS, scope, locals())
        return self._s.knowledge.facts(s, p)

    def history(self, scope: ScopeLike, fact_id: str) -> list[Fact]:
        """The versions of a fact, oldest to newest (every fact linked to it through SUPERSEDES edges)."""
        s, p = self._check(ops.HISTORY, scope, locals())
        return self._s.knowledge.history(s, p.fact_id)

    def entities(self, scope: ScopeLike) -> list[Entity]:
        """Every extracted entity with its aliases, by name."""
        return self._s.knowledge.entities(as_scope(scope))

    def events(self, scope: ScopeLike, *, limit: int = 1000, offset: int = 0) -> list[Event]:
        """Extracted events in time order (events without a time last)."""
        s, p = self._check(ops.EVENTS, scope, locals())
        return self._s.knowledge.events(s, p)

    # -- what an operator looks at: services.overview ---------------------------------------------------------------
    def list_scopes(
        self, org_id: str, *, contains: str | None = None, limit: int = 50, offset: int = 0
    ) -> ScopePage:
        """An organisation's users by id (those whose id holds ``contains``), each with its counts, size on disk,
        last write and extraction backlog; one page at a time, since each listed user's database is opened."""
        p = validate(ops.LIST_SCOPES.params, {"org_id": org_id, "contains": contains, "limit": limit,
                                               "offset": offset})  # fmt: skip
        return self._s.overview.list_scopes(p)

    def graph(
        self, scope: ScopeLike, *, entity: str | None = None, as_of: When = None, include_superseded: bool = False,
        limit: int = 200, offset: int = 0,
    ) -> MemoryGraph:  # fmt: skip
        """The user's memory graph: a page of facts and events, the entities they name, and the edges among them
        (ABOUT, SUBJECT, OBJECT, RELATED, SUPERSEDES); with ``entity`` only what is linked to that entity."""
        s, p = self._check(ops.GRAPH, scope, locals())
        return self._s.overview.graph(s, p)

    def extraction_queue(
        self, scope: ScopeLike, *, status: str | None = None, limit: int = 100, offset: int = 0
    ) -> ExtractionQueue:
        """The user's background extraction jobs, newest first (failed ones with the reason), and the count of
        each status."""
        s, p = self._check(ops.EXTRACTION_QUEUE, scope, locals())
        return self._s.overview.extraction_queue(s, p)
