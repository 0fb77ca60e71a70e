"""The facade: ``Memory`` (sync) opens a store root and exposes ingest, search, context and administration.

Every public method takes the ``Scope`` first: one scope is one Kuzu database, so tenant isolation is a property of
the storage layout, not of query filters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from glob import escape as glob_escape
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from pydantic import ValidationError

from graphrecall import exchange
from graphrecall import ingest as ing
from graphrecall.config import ConsolidationConfig, RetrievalConfig, Settings
from graphrecall.dates import parse_date
from graphrecall.embed import CachedEmbedder, Embedder, default_embedder
from graphrecall.embed.passages import passage_chars, passage_vectors
from graphrecall.errors import InvalidInput, NotAvailable, NotFound, StorageFull
from graphrecall.extract.consolidate import Consolidator
from graphrecall.extract.extractor import ExtractionConfig, Extractor
from graphrecall.extract.known import KnownFact, plan_known_fact
from graphrecall.extract.queue import QUEUE_FILE, ExtractionQueue, RetryLater
from graphrecall.llm import LLM
from graphrecall.models import (
    AddedFact,
    Consolidation,
    Context,
    Entity,
    Erasure,
    Event,
    ExtractionJob,
    ExtractionResult,
    Fact,
    FactKind,
    Hit,
    HitKind,
    ImportResult,
    IngestResult,
    Message,
    Profile,
    Scope,
    ScopeExport,
    ScopeStats,
    Session,
    SessionInput,
    TimeRange,
    utcnow,
    validate_identifier,
)
from graphrecall.params import BATCH_SESSIONS
from graphrecall.read.models import Answer
from graphrecall.recall import Recall, ScopeRecall
from graphrecall.retrieve.rerank import Reranker, load_reranker
from graphrecall.store import erase as erase_store
from graphrecall.store import facts as fq
from graphrecall.store import rounds as q
from graphrecall.store.database import ScopeDatabase
from graphrecall.store.logs import ScopeLogs
from graphrecall.store.pool import DatabasePool
from graphrecall.text import query_terms
from graphrecall.writer import Graduated, Writer

ScopeLike = Scope | tuple[str, str]
Progress = Callable[[int, int], None]


def as_scope(scope: ScopeLike) -> Scope:
    if isinstance(scope, Scope):
        return scope
    try:
        org, user = scope
    except (TypeError, ValueError):
        raise InvalidInput("scope must be a Scope or an (org_id, user_id) pair", where="scope") from None
    try:
        return Scope(org_id=org, user_id=user)
    except ValueError as e:
        raise InvalidInput(str(e), where="scope") from None


def _message_list(messages: Any, where: str) -> list[Any]:
    """Messages must come as a list: a string or a dict would otherwise be iterated character by character."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidInput(f"expected a list of messages, got {type(messages).__name__}", where=where)
    return list(messages)


def _with_companions(path: Path) -> list[Path]:
    """A file and what its engine keeps beside it (``x.kuzu.wal``, ``x.kuzu.idx/``, ``x.log.sqlite-wal``, ...)."""
    return [
        path,
        *path.parent.glob(glob_escape(path.name) + ".*"),
        *path.parent.glob(glob_escape(path.name) + "-*"),
    ]


def _bytes(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.is_file() else 0


def _check_id(value: str, what: str, where: str | None = None) -> None:
    try:
        validate_identifier(value, what)
    except ValueError as e:
        raise InvalidInput(str(e), where=where or what) from None


BACKFILL_PAGE = 64
"""Rounds embedded and written per transaction by ``Memory.backfill_passages``."""


class Memory:
    """Long-term memory over a store root. Thread-safe; use one instance per process (Kuzu allows one writer
    process per database file).

    A thin facade: it validates arguments (errors name them), turns ``question_date`` into the one ``Cutoff``,
    and hands the work to the writer (``graphrecall.writer``), the recall service (``graphrecall.recall``), the
    extractor and the Reader."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        reranker: Reranker | None = None,
        retrieval: RetrievalConfig | None = None,
        llm: LLM | None = None,
        extraction: ExtractionConfig | None = None,
        consolidation: ConsolidationConfig | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env(root=Path(root) if root is not None else None)
        if root is not None:
            self.settings.root = Path(root)
        self.root = self.settings.root.expanduser()  # created by the first write, never by a read
        if embedder is None:
            embedder = default_embedder()
            if self.settings.embed_cache is not None and isinstance(embedder, CachedEmbedder):
                embedder = CachedEmbedder(embedder.inner, path=self.settings.embed_cache)
        self.embedder = embedder
        self._pool = DatabasePool(
            self.root,
            embedder_id=embedder.id,
            dim=embedder.dim,
            capacity=self.settings.pool_size,
            buffer_pool_size=self.settings.buffer_pool_bytes,
        )
        if reranker is None:
            reranker = load_reranker(self.settings.reranker, llm)
        self._logs = ScopeLogs(
            self._pool,
            embedder.dim,
            capacity=2 * self.settings.pool_size,  # a scope that lives in its log has a log and no database
            max_age_s=self.settings.flush_max_age_s,
            resident_rounds=self.settings.resident_rounds,
            flush_slots=self.settings.flush_concurrency,
        )
        self._recall = Recall(
            self._pool, self._logs, embedder, retrieval or self.settings.retrieval, reranker
        )
        self._writer = Writer(embedder, self._logs, passage_from_chars=self.settings.passage_from_chars)
        self._closed = False
        self._lock = threading.Lock()
        # Extracted memory (facts, events, entities): see the "extraction" section at the end of the class.
        self.llm = llm
        self.extraction = extraction or ExtractionConfig()
        self.consolidation = consolidation or self.settings.consolidation
        self._extract_locks: dict[Scope, threading.Lock] = {}
        self._queue: ExtractionQueue | None = None
        if llm is not None and self.extraction.background and self._queue_file().exists():
            self._extraction_queue()  # resume what an earlier process left queued

    # -- lifecycle ---------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path | None = None, **kwargs: Any) -> Memory:
        """Open (creating if needed) a store root. Use as a context manager to close databases on exit."""
        return cls(root, **kwargs)

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                try:
                    if self._queue is not None:
                        self._queue.close()  # waits for running jobs; pending ones resume at the next open
                    self._logs.close()  # pending writes reach Kuzu (a scope that lives in its log stays there)
                finally:
                    self._pool.close()
                self._closed = True

    # -- ingest ------------------------------------------------------------------------------------------------
    def add_session(
        self,
        scope: ScopeLike,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        session_id: str,
        date: datetime | str | None = None,
        extract: bool = False,
    ) -> IngestResult:
        """Store one session (its messages, rounds, embeddings and index entries). Re-adding the same ids changes
        nothing; messages beyond those stored are appended. ``extract=True`` then extracts facts/events/entities
        with the configured LLM: by default in the background (the session is queued, ``result.extraction_job``
        says so, ``wait_for_extraction`` waits, failures are retried and end ``failed`` with their reason); with
        ``ExtractionConfig(background=False)`` inside this call (``result.extraction``). Raw ingest is stored
        first either way; an extraction failure never loses it."""
        if extract:
            self._require_llm()
        # Validate here too so that errors name this call's arguments ("messages[0]"), not "sessions[0]...".
        msgs = _message_list(messages, "messages")
        _check_id(session_id, "session_id")
        if isinstance(date, str):
            parse_date(date, where="date")
        ing.validate_messages(msgs)
        result = self.add_sessions(scope, [SessionInput(session_id=session_id, date=date, messages=msgs)])
        if extract and self.extraction.background:
            result.extraction_job = self._extraction_queue().enqueue(as_scope(scope), session_id)
        elif extract:
            result.extraction = self.extract(scope, session_id=session_id)
        return result

    def add_messages(
        self,
        scope: ScopeLike,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        session_id: str = "default",
        date: datetime | str | None = None,
    ) -> IngestResult:
        """Append turns to a session (created if new). Messages with explicit ids are idempotent; messages without
        ids are numbered after those already stored, so sending them twice stores them twice."""
        s = as_scope(scope)
        _check_id(session_id, "session_id")
        msgs = ing.validate_messages(_message_list(messages, "messages"))
        when = parse_date(date, where="date") if date is not None else None

        def append(db: ScopeDatabase) -> IngestResult:
            start = self._writer.next_index(db, s, session_id)
            numbered = [m if m.id else m.model_copy(update={"idx": start + i}) for i, m in enumerate(msgs)]
            return self._writer.write(db, s, [(session_id, numbered, when)], start_idx={session_id: start})

        return self._write(s, append)

    def _write(self, s: Scope, run: Callable[[ScopeDatabase], IngestResult]) -> IngestResult:
        """``run`` one write under the scope's write lock, against its database or, while the scope lives in its
        write log, the empty one; planned again if the scope moved into Kuzu meanwhile (``writer.Graduated``:
        that happens once in a scope's life)."""
        while True:
            with self._logs.scope_lock(s), self._logs.writing(s) as db:
                try:
                    return run(db)
                except Graduated:
                    continue

    def add_sessions(
        self,
        scope: ScopeLike,
        sessions: Iterable[SessionInput | Mapping[str, Any]],
        *,
        batch_sessions: int = BATCH_SESSIONS,
        progress: Progress | None = None,
    ) -> IngestResult:
        """Bulk ingest. Everything is validated before anything is written; each batch of ``batch_sessions`` is
        one transaction (all or nothing)."""
        s = as_scope(scope)
        if isinstance(sessions, str | bytes | Mapping) or not isinstance(sessions, Iterable):
            raise InvalidInput(
                f"expected a list of sessions, got {type(sessions).__name__}", where="sessions"
            )
        items: list[tuple[str, list[Message], datetime | None]] = []
        message_ids: set[str] = set()
        for i, raw in enumerate(sessions):
            where = f"sessions[{i}]"
            try:
                si = raw if isinstance(raw, SessionInput) else SessionInput.model_validate(raw)
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                raise InvalidInput(err["msg"], where=f"{where}.{loc}" if loc else where) from None
            _check_id(si.session_id, "session_id", where=f"{where}.session_id")
            date = si.date
            if isinstance(date, str):
                date = parse_date(date, where=f"{where}.date")
            msgs = ing.validate_messages(si.messages, where=f"{where}.messages")
            if not msgs:
                raise InvalidInput("a session needs at least one message", where=f"{where}.messages")
            for j, m in enumerate(msgs):  # message ids are unique per scope; a clash would fail mid-write
                if m.id is not None:
                    if m.id in message_ids:
                        raise InvalidInput(
                            f"duplicate message id {m.id!r}", where=f"{where}.messages[{j}].id"
                        )
                    message_ids.add(m.id)
            items.append((si.session_id, msgs, date))
        ids = [sid for sid, _, _ in items]
        if len(set(ids)) != len(ids):
            dup = next(x for x in ids if ids.count(x) > 1)
            raise InvalidInput(f"session id {dup!r} appears twice in one call", where="sessions")
        total = IngestResult()
        done = 0
        for start in range(0, len(items), batch_sessions):
            batch = items[start : start + batch_sessions]
            r = self._write(s, functools.partial(self._writer.write, scope=s, batch=batch))
            for field in ("sessions_added", "messages_added", "messages_skipped", "rounds_written"):
                setattr(total, field, getattr(total, field) + getattr(r, field))
            done += len(batch)
            if progress is not None:
                progress(done, len(items))
        return total

    # -- recall ------------------------------------------------------------------------------------------------
    def recall(self, scope: ScopeLike, question_date: datetime | str | None = None) -> ScopeRecall:
        """One question's view of a scope's memory: what ``search``, ``context`` and ``answer`` read through.
        Nothing recorded after ``question_date`` (plus the same-day slack, ``graphrecall.dates.Cutoff``) is
        visible to it, and relative time is anchored on it; ``None`` means the question is asked now. Hand it to
        ``graphrecall.read.Reader.answer`` to run a Reader of your own."""
        return self._recall.scope(as_scope(scope), self._recall.cutoff(question_date))

    def search(
        self,
        scope: ScopeLike,
        query: str,
        k: int = 10,
        *,
        question_date: datetime | str | None = None,
        time_range: TimeRange | None = None,
        as_of: datetime | None = None,
        kinds: Sequence[HitKind] = ("round",),
    ) -> list[Hit]:
        """Hybrid search over the scope's memory, as asked at ``question_date`` (see ``recall``: it anchors
        relative time and hides what was recorded later; ``None`` = now). ``kinds`` chooses what comes back:
        rounds (default), and/or extracted ``fact`` and ``event`` hits (current facts only, unless ``as_of``)."""
        bad = [x for x in kinds if x not in ("round", "fact", "event")]
        if bad or not kinds:
            raise InvalidInput(
                f"kinds must be a non-empty subset of round, fact, event; got {list(kinds)}", where="kinds"
            )
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string", where="query")
        if k < 1:
            raise InvalidInput(f"k must be at least 1, got {k}", where="k")
        view = self.recall(scope, question_date)
        return view.search(query, k, kinds=tuple(kinds), time_range=time_range, as_of=as_of)

    def context(
        self,
        scope: ScopeLike,
        query: str,
        token_budget: int = 2000,
        *,
        k: int = 30,
        question_date: datetime | str | None = None,
        include_profile: bool = False,
    ) -> Context:
        """Evidence for a reader: the best hits that fit ``token_budget``, dated, grouped by session,
        chronological, as asked at ``question_date`` (``None`` = now). ``include_profile`` puts the user's
        profile (``profile``, at the same date) first, within a third of the budget."""
        if token_budget < 1:
            raise InvalidInput(f"token_budget must be positive, got {token_budget}", where="token_budget")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string", where="query")
        if k < 1:
            raise InvalidInput(f"k must be at least 1, got {k}", where="k")
        return self.recall(scope, question_date).context(
            query, token_budget, k=k, include_profile=include_profile
        )

    def profile(
        self, scope: ScopeLike, as_of: datetime | str | None = None, token_budget: int | None = None
    ) -> Profile:
        """What memory holds about the user at ``as_of`` (``None`` = now), for a system prompt: the current facts
        (recorded by then, not superseded by then) grouped by kind (identity and attributes, preferences,
        relationships, plans and goals, recent events), most reinforced and most recently confirmed first, each
        with its source session and date; ``token_budget`` cuts it to fit. ``as_of`` works like a question date
        (the same-day slack included). ``.text`` is the rendered block; the model is also JSON."""
        when = parse_date(as_of, where="as_of") if as_of is not None else None
        if token_budget is not None and token_budget < 1:
            raise InvalidInput(f"token_budget must be positive, got {token_budget}", where="token_budget")
        return self.recall(scope, when).profile(token_budget)

    @contextlib.contextmanager
    def _flushed(self, s: Scope) -> Iterator[ScopeDatabase]:
        """The scope's database with its write log flushed into it: for reads that only Kuzu answers. The
        database is taken first, so a store held by another process is reported busy before its log is touched."""
        if self._logs.resident(s):  # it lives in its log: flushing it creates its database
            self._logs.flush(s)
        with self._pool.acquire(s, create=False) as db:
            self._logs.flush(s)
            yield db

    # -- administration ----------------------------------------------------------------------------------------
    def stats(self, scope: ScopeLike) -> ScopeStats:
        s = as_scope(scope)
        if not self._logs.stored(s):
            return ScopeStats(
                scope=s, sessions=0, messages=0, rounds=0, embedder_id=self.embedder.id, dim=self.embedder.dim
            )
        resident = self._logs.resident_counts(s)
        if resident is not None:
            c = {"Fact": 0, "Event": 0, "Entity": 0, **resident}
        else:
            with self._flushed(s) as db:
                c = q.counts(db)
        size = sum(
            _bytes(p) for p in (self._pool.path_for(s), self._logs.path(s)) for p in _with_companions(p)
        )
        return ScopeStats(
            scope=s,
            sessions=c["Session"],
            messages=c["Message"],
            rounds=c["Round"],
            facts=c["Fact"],
            events=c["Event"],
            entities=c["Entity"],
            disk_bytes=size,
            embedder_id=self.embedder.id,
            dim=self.embedder.dim,
        )

    def sessions(self, scope: ScopeLike, *, limit: int = 1000, offset: int = 0) -> list[Session]:
        """The scope's sessions, oldest first; ``extract_status`` includes the background queue's state."""
        s = as_scope(scope)
        if not self._logs.stored(s):
            return []
        resident = self._logs.resident_sessions(s)
        if resident is not None:
            found = [x.model_copy(update={"messages": []}) for x in resident[offset : offset + limit]]
        else:
            with self._flushed(s) as db:
                found = q.list_sessions(db, limit=limit, offset=offset)
        queued = {j.session_id: j for j in self.extraction_jobs(s) if j.status != "done"}
        return [
            x.model_copy(update={"extract_status": queued[x.id].status}) if x.id in queued else x
            for x in found
        ]

    def get_session(self, scope: ScopeLike, session_id: str) -> Session:
        s = as_scope(scope)
        resident = self._logs.resident_sessions(s)
        if resident is not None:
            found = next((x for x in resident if x.id == session_id), None)
        else:
            try:
                with self._flushed(s) as db:
                    found = q.get_session(db, session_id)
            except NotFound:
                found = None
        if found is None:
            raise NotFound(f"no session {session_id!r} in scope {s}")
        return found

    def export_sessions(self, scope: ScopeLike) -> list[Session]:
        """Every session with its messages, oldest first: the portable form of a scope's raw history."""
        s = as_scope(scope)
        return [self.get_session(s, x.id) for x in self.sessions(s, limit=10**9)]

    def export_scope(self, scope: ScopeLike) -> ScopeExport:
        """Everything the scope holds, as plain data: sessions with their messages and extraction state, every
        fact (superseded ones included) with the SUPERSEDES edges, events, entities and relations. What
        ``import_scope`` restores; ``graphrecall export --format json`` writes it, ``--format graphml`` draws it."""
        s = as_scope(scope)
        resident = self._logs.resident_sessions(s)
        if resident is not None:  # raw history only: nothing was extracted from a scope that lives in its log
            return exchange.raw_scope(s, resident, embedder_id=self.embedder.id)
        with self._flushed(s) as db:
            return exchange.read_scope(db, s, embedder_id=self.embedder.id)

    def import_scope(self, scope: ScopeLike, doc: ScopeExport | Mapping[str, Any]) -> ImportResult:
        """Restore an ``export_scope`` document into ``scope``: its sessions (added like ``add_sessions``:
        idempotent), then its extracted memory exactly as exported (ids, versions, stamps, edges), through the
        extraction write path, with vectors recomputed by this store's embedder. The extracted part goes only into
        a scope without extracted memory, or one that already holds exactly these facts, events and entities (a
        repeated import: skipped); anything else is refused before anything is written, as is a file whose
        references do not resolve."""
        s = as_scope(scope)
        try:
            export = doc if isinstance(doc, ScopeExport) else ScopeExport.model_validate(doc)
        except ValidationError as e:
            err = e.errors()[0]
            raise InvalidInput(err["msg"], where=".".join(str(p) for p in err["loc"]) or "doc") from None
        exchange.check(export)
        skip = False
        if self._pool.exists(s):
            with self._pool.acquire(s, create=False) as db:
                skip = self._graph_present(db, s, export)
        sessions = [
            SessionInput(session_id=x.id, date=x.started_at, messages=list(x.messages))
            for x in export.sessions
        ]
        added = self.add_sessions(s, sessions) if sessions else IngestResult()
        result = ImportResult(
            sessions_added=added.sessions_added,
            messages_added=added.messages_added,
            messages_skipped=added.messages_skipped,
            graph_skipped=skip,
        )
        if skip or not (export.facts or export.events or export.entities):
            return result
        write = exchange.graph_write(export, self.embedder)
        with (
            self._pool.acquire(s) as db,
            self._extract_lock(s),
        ):  # created here when the export has no sessions
            self._logs.flush(s)  # the messages that facts and events point to are in Kuzu
            if self._graph_present(db, s, export):  # written meanwhile by a concurrent import
                return result.model_copy(update={"graph_skipped": True})
            with db.write() as txn:
                fq.write_extraction(txn, write, dim=self.embedder.dim)
                for x in export.sessions:
                    fq.set_extract_status(txn, x.id, x.extract_status, x.extract_error)
        return result.model_copy(
            update={
                "facts": len(export.facts),
                "supersedes": len(export.supersedes),
                "events": len(export.events),
                "entities": len(export.entities),
                "relations": len(export.relations),
            }
        )

    @staticmethod
    def _graph_present(db: ScopeDatabase, s: Scope, export: ScopeExport) -> bool:
        """Whether the scope already holds exactly the export's extracted memory (True) or none at all (False);
        anything in between would merge two memories without versioning them against each other: refused."""
        wanted = exchange.graph_ids(export)
        found = {t: fq.existing_ids(db, t, ids) for t, ids in wanted.items()}
        if not any(found.values()):
            if fq.has_extracted(db) or fq.list_entities(db):
                raise InvalidInput(
                    f"scope {s} already holds other extracted memory; import into a new scope, or forget this one "
                    "first",
                    where="facts",
                )
            return False
        if all(found[t] == set(ids) for t, ids in wanted.items()):
            return True
        raise InvalidInput(
            f"scope {s} holds part of this export's extracted memory; import into a new scope", where="facts"
        )

    def forget(self, scope: ScopeLike) -> bool:
        """Erase a scope entirely (its database and write-log files). Returns whether anything was stored."""
        s = as_scope(scope)
        resident = self._logs.resident(s)  # all it holds is in its log
        self._logs.drop(s)
        if self._queue is not None or self._queue_file().exists():
            self._extraction_queue(start=False).forget(s)
        return self._pool.drop(s) or resident

    def erase(
        self,
        scope: ScopeLike,
        *,
        session_ids: Sequence[str] = (),
        fact_ids: Sequence[str] = (),
        before: datetime | str | None = None,
        matching: str | None = None,
        dry_run: bool = False,
    ) -> Erasure:
        """Forget part of a scope: sessions by id, facts by id, every session that started before ``before``, and
        every round, fact and event whose text holds all the words of ``matching``. What goes with them: a session's
        messages; a message's rounds (a matched round takes its messages, and a session left empty goes too); every
        fact and event extracted from an erased message; entities nothing else mentions; their vectors and index
        entries. ``dry_run=True`` reports the same lists and deletes nothing. Unknown ids raise ``NotFound`` before
        anything is deleted; ``forget`` erases a whole scope."""
        s = as_scope(scope)
        if not (session_ids or fact_ids or before is not None or matching):
            raise InvalidInput(
                "say what to erase: session_ids, fact_ids, before or matching (forget() erases a whole scope)",
                where="erase",
            )
        if isinstance(session_ids, str) or isinstance(fact_ids, str):
            raise InvalidInput("session_ids and fact_ids are lists of ids", where="erase")
        cutoff = parse_date(before, where="before") if isinstance(before, str) else before
        if matching is not None and not query_terms(matching):
            raise InvalidInput(f"matching {matching!r} has no words to match", where="matching")
        if not self._logs.stored(s):
            raise NotFound(f"scope {s} has no memory")
        with self._logs.scope_lock(s), self._flushed(s) as db:
            for table, ids in (("Session", session_ids), ("Fact", fact_ids)):
                unknown = sorted(set(ids) - q.existing_ids(db, table, ids))
                if unknown:
                    raise NotFound(f"no {table.lower()} {', '.join(map(repr, unknown))} in {s}")
            sessions = list(session_ids) + (erase_store.sessions_before(db, cutoff) if cutoff else [])
            messages: list[str] = []
            facts, events = list(fact_ids), []
            if matching:
                terms = query_terms(matching)
                messages = erase_store.round_messages(
                    db, erase_store.matching_ids(db, "Round", "round_terms", terms)
                )
                facts += erase_store.matching_ids(db, "Fact", "fact_terms", terms)
                events = erase_store.matching_ids(db, "Event", "event_terms", terms)
            plan = erase_store.plan(db, sessions=sessions, messages=messages, facts=facts, events=events)
            if not dry_run and not plan.empty():
                erase_store.apply(db, plan)
                if self._queue is not None or self._queue_file().exists():
                    self._extraction_queue(start=False).forget_sessions(s, plan.sessions)
        return Erasure(scope=s, dry_run=dry_run, **dataclasses.asdict(plan))

    def backfill_passages(self, scope: ScopeLike) -> int:
        """Give passage vectors to the scope's long user turns that have none: rounds stored before schema 4 (they
        kept only their pooled vector) or while a higher ``Settings.passage_from_chars`` was set. Embeds only the
        passages (the rounds' own vectors stay), a page of rounds per transaction, holding the scope's writes off
        for one page at a time. Returns how many rounds got passages; running it again finds none left. Its cost
        is one embedding per passage, so it is a command to run once after an upgrade, not something done on open.
        The embedding runs outside the scope's lock (writes go on meanwhile); a round rewritten or erased in between
        is left out of that page's write."""
        s = as_scope(scope)
        if not self._logs.stored(s):
            raise NotFound(f"scope {s} has no memory")
        window = passage_chars(self.embedder)
        if window is None:  # an embedder without a window (the hashing one) keeps no passages
            return 0
        longer_than = min(window, self._writer.passage_from_chars)
        done, after = 0, ""
        while True:
            with self._flushed(s) as db:
                page = q.rounds_without_passages(db, longer_than, BACKFILL_PAGE, after)
            if not page:
                return done
            parts = passage_vectors(
                self.embedder, [text for _, text in page], from_chars=self._writer.passage_from_chars
            )
            with self._logs.scope_lock(s), self._flushed(s) as db:
                ids = [rid for rid, _ in page]
                still = dict(q.rounds_without_passages(db, longer_than, len(ids), among=ids))
                kept = [
                    (rid, p) for (rid, text), p in zip(page, parts, strict=True) if still.get(rid) == text
                ]
                with db.write() as txn:
                    q.write_passages(txn, kept, self.embedder.dim)
            done += sum(p is not None for _, p in kept)
            after = page[-1][0]

    def scopes(self) -> list[Scope]:
        """Every scope under the root (those still held in their write log too), by org and user."""
        return self._logs.scopes()

    # == extraction: facts, events, entities, fact versioning =========================================================
    # Everything below needs ``llm`` only for ``extract``; reading extracted memory works without one.
    def _require_llm(self) -> LLM:
        if self.llm is None:
            raise NotAvailable(
                "extraction needs an LLM: pass Memory(llm=...) or build one with graphrecall.llm.llm_from_settings() "
                "(GRAPHRECALL_LLM, e.g. 'openai:gpt-4o-mini', and GRAPHRECALL_LLM_BASE_URL for a local server)"
            )
        return self.llm

    def extract(
        self,
        scope: ScopeLike,
        session_id: str | None = None,
        *,
        progress: Progress | None = None,
    ) -> ExtractionResult:
        """Extract facts, events and entities from one session (any status: re-extracting is how a session is
        refreshed) or, with ``session_id=None``, from every session not yet done (status none, pending or
        failed), oldest first so later sessions update earlier facts. One structured LLM call per session (more
        only for very long sessions) plus at most one batched versioning call; failures are recorded on the
        session (``extract_status='failed'``, ``extract_error``) and reported in the result, never raised."""
        llm = self._require_llm()
        s = as_scope(scope)
        if session_id is not None:
            validate_identifier(session_id, "session_id")
        started = time.time()  # before the flush: what was asked for until now is in what this run reads
        # An ExitStack, not a bare __enter__/__exit__: a failure must reach the pool, which reopens a database
        # after an I/O error (store/pool.py).
        with contextlib.ExitStack() as stack:
            try:
                db = stack.enter_context(self._flushed(s))  # extraction reads sessions from Kuzu
            except NotFound:
                if session_id is not None:
                    raise NotFound(f"no session {session_id!r} in scope {s}") from None
                return ExtractionResult()
            with self._extract_lock(s):
                if session_id is not None:
                    if fq.session_info(db, session_id) is None:
                        raise NotFound(f"no session {session_id!r} in scope {s}")
                    todo = [session_id]
                else:
                    todo = [sid for sid, _ in fq.sessions_to_extract(db, ("none", "pending", "failed"))]
                extractor = Extractor(llm, self.embedder, self.extraction)
                total = ExtractionResult()
                queue = self._queue
                if queue is None and self._queue_file().exists():
                    queue = self._extraction_queue(start=False)
                for i, sid in enumerate(todo, start=1):
                    one = extractor.extract_session(db, sid)
                    total = total + one
                    if one.sessions_done and queue is not None:
                        queue.settle(s, sid, asked_before=started)  # a failed background job is resolved now
                    if progress is not None:
                        progress(i, len(todo))
                return total

    def _extract_lock(self, s: Scope) -> threading.Lock:
        """Serializes what versions facts in one scope (extraction, ``add_fact``, ``import_scope``): each reads
        the current facts, then writes against them."""
        with self._lock:
            return self._extract_locks.setdefault(s, threading.Lock())

    def add_fact(
        self,
        scope: ScopeLike,
        text: str,
        *,
        kind: FactKind | str = FactKind.other,
        entities: Sequence[str] = (),
        valid_from: datetime | str | None = None,
        source: str | None = None,
    ) -> AddedFact:
        """Store a fact the application already knows (a settings page, a CRM field), without a conversation.

        It is versioned like an extracted fact and written by the same store path: with an LLM configured, the
        versioning decision is the extractor's (the same-text rule, then one ``version_fact`` call); without one,
        only the same text (DUPLICATE: the stored fact is reinforced) or a near-identical one (cosine >=
        ``ExtractionConfig.known_fact_min_similarity``, 0.95: UPDATE, the old fact is superseded) on a current
        fact of the same ``kind`` about the same ``entities`` counts; anything else is NEW (docs/months.md).

        ``entities``: names the fact is about (resolved onto stored entities, else created). ``valid_from``: when
        it became true (default: when it was recorded). ``source``: a session of this scope it comes from (its
        date becomes ``recorded_at``, as for extracted facts), or any other label (``recorded_at`` = now); the
        fact's ``session_id`` holds it, default ``"app"``."""
        s = as_scope(scope)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("text must be a non-empty string", where="text")
        try:
            fact_kind = FactKind(kind)
        except ValueError:
            raise InvalidInput(
                f"kind must be one of {', '.join(k.value for k in FactKind)}; got {kind!r}", where="kind"
            ) from None
        if isinstance(entities, str) or not all(isinstance(e, str) for e in entities):
            raise InvalidInput("entities must be a list of names", where="entities")
        when = parse_date(valid_from, where="valid_from") if valid_from is not None else None
        if source is not None:
            _check_id(source, "source")
        extractor = Extractor(self.llm, self.embedder, self.extraction) if self.llm is not None else None
        with self._pool.acquire(s) as db:
            self._logs.flush(s)  # a source session may still be in the write log
            with self._extract_lock(s):
                said = fq.session_date(db, source) if source is not None else None
                known = KnownFact(
                    text=" ".join(text.split()),
                    kind=fact_kind.value,
                    recorded_at=said or utcnow(),
                    session_id=source or "app",
                    valid_from=when,
                    entities=list(entities),
                )
                plan = plan_known_fact(db, self.embedder, known, self.extraction, extractor=extractor)
                with db.write() as txn:
                    fq.write_extraction(txn, plan.write, dim=self.embedder.dim)
                v = plan.verdict
                replaced = v.target.id if v.target is not None else None
                stored = replaced if v.decision == "DUPLICATE" and replaced is not None else plan.row.id
                fact = fq.get_facts(db, [stored])[stored]
        return AddedFact(
            fact=fact,
            decision=v.decision,
            superseded=replaced if v.decision in ("UPDATE", "CONTRADICT") else None,
            decided_by="llm" if v.by == "llm" else "rule" if v.by == "rule" else "default",
            reason=v.reason,
        )

    def consolidate(
        self,
        scope: ScopeLike,
        *,
        dry_run: bool = False,
        summaries: bool = False,
        llm: LLM | None = None,
    ) -> Consolidation:
        """Tidy a scope's extracted memory (docs/months.md, "Consolidation"): merge clusters of duplicate current
        facts (the kept fact sums their reinforcement and takes every source message; the others are superseded,
        never deleted), link events to the entities they name, and with ``summaries=True`` write one dated summary
        fact per old window of sessions. With an LLM (``llm``, else this Memory's) each cluster of similar facts
        costs one call that decides whether to merge; without one only the same or a near-identical text merges.
        ``dry_run=True`` plans the same changes (LLM calls included) and writes nothing. A second run over an
        unchanged scope changes nothing. ``summaries`` needs an LLM."""
        s = as_scope(scope)
        model = llm or self.llm
        if summaries and model is None:
            raise NotAvailable(
                "summaries need an LLM: pass llm=..., Memory(llm=...), or set GRAPHRECALL_LLM (graphrecall "
                "consolidate --llm)"
            )
        if not self._pool.exists(s) and not (summaries and self._logs.resident(s)):
            return Consolidation(scope=s, dry_run=dry_run)  # nothing extracted yet: no facts to merge
        since = len(model.usage.records) if model is not None else 0
        consolidator = Consolidator(
            self.embedder, self.consolidation, model, max_tokens=self.extraction.max_tokens
        )
        with self._flushed(s) as db, self._extract_lock(s):
            plan = consolidator.plan(db, summaries=summaries, now=utcnow())
            if not dry_run:
                consolidator.apply(db, plan)
        return plan.result(s, dry_run=dry_run, llm=model, since=since)

    # -- background extraction ---------------------------------------------------------------------------------
    def _queue_file(self) -> Path:
        return self.root / QUEUE_FILE

    def _extraction_queue(self, *, start: bool = True) -> ExtractionQueue:
        with self._lock:
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
            result = self.extract(scope, session_id=session_id)
        except StorageFull as e:
            raise RetryLater(str(e)) from e
        if result.sessions_failed:
            reason = result.errors.get(session_id) or "extraction failed"
            if session_id in result.retry_later:  # the LLM could not answer now: not the session's fault
                raise RetryLater(reason)
            raise RuntimeError(reason)

    def extraction_jobs(self, scope: ScopeLike | None = None) -> list[ExtractionJob]:
        """Background extraction jobs (pending, running, done, failed with the reason), of one scope or all."""
        if self._queue is None and not self._queue_file().exists():
            return []
        return self._extraction_queue(start=False).jobs(as_scope(scope) if scope is not None else None)

    def retry_extraction(self, scope: ScopeLike) -> int:
        """Queue the scope's failed background extractions again, with a fresh attempt count; returns how many."""
        self._require_llm()
        return self._extraction_queue().requeue_failed(as_scope(scope))

    def wait_for_extraction(self, timeout: float | None = None) -> bool:
        """Block until no background extraction is pending or running (True), or ``timeout`` seconds pass
        (False). For tests and batch jobs; a live service never needs to wait."""
        if self._queue is None:
            return True
        return self._queue.wait(timeout)

    def flush(self) -> None:
        """Move every acknowledged write still in an open write log into Kuzu now (the flusher does this on its
        own within ``max_age``; for tests and benchmarks that read the files). Open scopes that live in their log
        (``Settings.resident_rounds``) move into Kuzu too: they get their database."""
        self._logs.flush_all()

    def facts(
        self,
        scope: ScopeLike,
        *,
        as_of: datetime | str | None = None,
        include_superseded: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Fact]:
        """Stored facts, oldest first. Default: the current ones. ``as_of``: those true at that moment by *valid
        time* (valid_from <= as_of < valid_to), i.e. what the user's world looked like then, whenever we learned it.
        ``include_superseded``: every fact ever stored, superseded ones with ``superseded_by`` set."""
        s = as_scope(scope)
        if limit < 1 or offset < 0:
            raise InvalidInput(f"limit must be >= 1 and offset >= 0, got {limit} and {offset}", where="limit")
        when = parse_date(as_of, where="as_of") if as_of is not None else None
        if not self._pool.exists(s):
            return []
        with self._pool.acquire(s, create=False) as db:
            return fq.list_facts(
                db, as_of=when, include_superseded=include_superseded, limit=limit, offset=offset
            )

    def history(self, scope: ScopeLike, fact_id: str) -> list[Fact]:
        """The versions of a fact, oldest to newest (every fact linked to it through SUPERSEDES edges)."""
        s = as_scope(scope)
        with self._pool.acquire(s, create=False) as db:
            chain = fq.supersession_chain(db, fact_id)
        if not chain:
            raise NotFound(f"no fact {fact_id!r} in scope {s}")
        return chain

    def supersede(self, scope: ScopeLike, old_id: str, new_id: str, *, reason: str = "manual") -> Fact:
        """Mark ``old_id`` as superseded by ``new_id`` by hand (valid_to = the new fact's valid_from, expired_at =
        now, a SUPERSEDES edge new -> old). Nothing is deleted. Returns the updated old fact."""
        s = as_scope(scope)
        if old_id == new_id:
            raise InvalidInput(f"a fact cannot supersede itself ({old_id!r})", where="new_id")
        with self._pool.acquire(s, create=False) as db, db.write_lock:
            found = fq.get_facts(db, [old_id, new_id])
            for fid, where in ((old_id, "old_id"), (new_id, "new_id")):
                if fid not in found:
                    raise NotFound(f"no fact {fid!r} in scope {s} ({where})")
            old, new = found[old_id], found[new_id]
            if old.expired_at is not None:
                raise InvalidInput(
                    f"fact {old_id!r} is already superseded (by {old.superseded_by!r}); supersede the current "
                    "version instead (see history())",
                    where="old_id",
                )
            if new.expired_at is not None:
                raise InvalidInput(
                    f"fact {new_id!r} is itself superseded (by {new.superseded_by!r}); it cannot replace a current fact",
                    where="new_id",
                )
            now = utcnow()
            valid_to = (
                new.valid_from
                if new.valid_from and (old.valid_from is None or new.valid_from >= old.valid_from)
                else now
            )
            with db.write() as txn:
                fq.supersede(txn, fq.Supersession(old_id, new_id, valid_to, now, reason))
            return fq.get_facts(db, [old_id])[old_id]

    def entities(self, scope: ScopeLike) -> list[Entity]:
        """Every extracted entity with its aliases, by name."""
        s = as_scope(scope)
        if not self._pool.exists(s):
            return []
        with self._pool.acquire(s, create=False) as db:
            return fq.list_entities(db)

    def events(self, scope: ScopeLike, *, limit: int = 1000, offset: int = 0) -> list[Event]:
        """Extracted events in time order (events without a time last)."""
        s = as_scope(scope)
        if not self._pool.exists(s):
            return []
        with self._pool.acquire(s, create=False) as db:
            return fq.list_events(db, limit=limit, offset=offset)

    # == answering: the Reader (graphrecall.read) ==================================================================
    def answer(
        self,
        scope: ScopeLike,
        question: str,
        question_date: datetime | str | None = None,
        mode: Literal["auto", "recall", "synthesis"] = "auto",
        llm: LLM | None = None,
        *,
        max_tool_steps: int = 4,
        tools: Literal["auto", "native", "text", "none"] = "auto",
        token_budget: int | None = None,
    ) -> Answer:
        """Answer ``question`` from the scope's memory; returns a ``graphrecall.Answer`` (text, mode, whether it
        abstained, the verifier's verdict, cited evidence, tool trace, usage and latency per stage).

        ``mode``: ``auto`` (the question classifier decides), ``recall`` or ``synthesis``. ``question_date``: as
        for ``search`` (anchors relative time, hides what was recorded later; ``None`` = now). The model is
        ``llm``, else this Memory's ``llm``, else ``GRAPHRECALL_LLM``; with none, ``NotAvailable``. ``token_budget``
        caps the context the reader sees (for models with a small context window)."""
        from graphrecall.llm import LLMNotConfigured, llm_from_settings
        from graphrecall.read import Reader

        s = as_scope(scope)
        if not isinstance(question, str) or not question.strip():
            raise InvalidInput("question must be a non-empty string", where="question")
        if mode not in ("auto", "recall", "synthesis"):
            raise InvalidInput(f"mode must be auto, recall or synthesis; got {mode!r}", where="mode")
        if tools not in ("auto", "native", "text", "none"):
            raise InvalidInput(f"tools must be auto, native, text or none; got {tools!r}", where="tools")
        if max_tool_steps < 0:
            raise InvalidInput(f"max_tool_steps must be >= 0, got {max_tool_steps}", where="max_tool_steps")
        view = self.recall(s, question_date)
        model = llm or self.llm
        if model is None:
            try:
                model = llm_from_settings()
            except LLMNotConfigured as e:
                raise NotAvailable(
                    "answering needs an LLM: pass llm=..., Memory(llm=...), or set GRAPHRECALL_LLM (e.g. "
                    f"'openai:gpt-4o-mini'; GRAPHRECALL_LLM_BASE_URL for a local server) ({e})"
                ) from None
        if token_budget is not None and token_budget < 200:
            raise InvalidInput(f"token_budget must be at least 200, got {token_budget}", where="token_budget")
        reader = Reader(model, mode, max_tool_steps=max_tool_steps, tools=tools, token_budget=token_budget)
        return reader.answer(view, question)
