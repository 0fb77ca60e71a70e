"""The operation table: every public operation of graphrecall, declared once.

Each ``Operation`` names a ``Memory`` method, its parameter model (``graphrecall.params``: names, types, defaults,
bounds, descriptions), what it returns in Python and on a wire, the errors it raises on purpose, and which surfaces
expose it and how. Everything else is derived from these rows:

* ``Memory`` validates its arguments against ``params`` (``Memory._validated``), so a bound or a date rule is the
  same in Python as over HTTP;
* ``AsyncMemory`` wraps each ``Memory`` method (no copied signatures);
* the HTTP routes (``server.http``), the MCP tools (``server.mcp``) and the CLI subcommands (``cli_ops``) are built
  by iterating over this table.

Adding an operation is one row here, one service method, and (for the typed Python API) one ``Memory`` method that
validates and delegates. ``tests/integration/test_param_surfaces.py`` checks that every operation takes the same
parameters with the same defaults and bounds on every surface that exposes it.

Names on a wire are the Python keyword names, so a validated model maps onto a ``Memory`` call by field name
(``Operation.arguments``). Arguments only an in-process caller can pass (a progress callback, a live LLM client, a
``TimeRange`` object) are listed in ``python_only``.

A scope that holds nothing: on the HTTP and MCP surfaces an operation declared ``unknown_scope="not_found"``
answers 404 naming the organisation's stored users closest to the one asked for (a misspelled user id is the usual
cause); ``"empty"`` answers as for a user with no memory yet (a chat service reads before a new user's first write).
The CLI, whose reader is a person typing ids, treats every read of a scope that holds nothing as a mistake.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from graphrecall import params as P
from graphrecall import results as R
from graphrecall.errors import GraphRecallError, InvalidInput, NotAvailable, NotFound, StorageFull, StoreBusy
from graphrecall.models import (
    AddedFact,
    Consolidation,
    Context,
    Erasure,
    ExtractionQueue,
    Fact,
    FeedbackResult,
    IngestResult,
    LearnedDocument,
    Maintenance,
    MemoryGraph,
    Profile,
    Scope,
    ScopePage,
    ScopeReport,
    ScopeStats,
    Session,
)

ParamsT = TypeVar("ParamsT", bound=P.Params)


@dataclass(frozen=True)
class Http:
    """How an operation is served over HTTP, below ``/v1/scopes/{org}/{user}`` (``level="org"``: below
    ``/v1/scopes/{org}``, for an operation over an organisation's users, whose ``org_id`` field is the path's org).
    ``{name}`` segments of ``path`` are fields of the parameter model; the others come from the query (GET) or the
    JSON body."""

    method: Literal["GET", "POST", "DELETE"]
    path: str
    summary: str
    tag: str
    operation_id: str | None = None  # the route's stable id, when it is not the operation's name
    accepted: bool = False  # 202 when the result queued work (``extraction_job``)
    level: Literal["user", "org"] = "user"

    @property
    def template(self) -> str:
        """The whole path template, as the OpenAPI document names it."""
        return ("/v1/scopes/{org}" if self.level == "org" else "/v1/scopes/{org}/{user}") + self.path


@dataclass(frozen=True)
class Mcp:
    """How an operation is offered to a model as an MCP tool: the description tells it when to call."""

    tool: str
    description: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = True


@dataclass(frozen=True)
class Cli:
    """How an operation is a ``graphrecall`` subcommand. ``aliases``: other option names for a field (``-k``);
    ``llm``: it takes ``--llm``/``--llm-base-url``; ``reranker``: it searches, and takes ``--reranker``; ``confirm``: it needs ``--yes`` unless ``dry_run``;
    ``custom``: the command's body is written by hand in ``cli.py`` (files, several scopes), its options still
    come from the parameter model."""

    command: str
    help: str
    aliases: Mapping[str, Sequence[str]] = field(default_factory=dict)
    llm: bool = False
    reranker: bool = False
    confirm: bool = False
    custom: bool = False


@dataclass(frozen=True)
class Operation(Generic[ParamsT]):
    name: str
    params: type[ParamsT]
    returns: str  # the Python result, for documentation and the surfaces' tests
    response: type[BaseModel] | str | None = (
        None  # the wire model ("module:Name" to import lazily); None: none
    )
    envelope: Callable[[Scope, Any, Any], BaseModel] | None = None  # (scope, params, result) -> wire
    unwrap: str | None = (
        None  # the envelope's field that holds the result (a client reads it back: ``unwire``)
    )
    errors: tuple[type[GraphRecallError], ...] = ()
    python_only: tuple[str, ...] = ()
    scoped: bool = True
    unknown_scope: Literal["empty", "not_found"] = "empty"
    http: Http | None = None
    mcp: Mcp | None = None
    cli: Cli | None = None

    @property
    def writes(self) -> bool:
        """Whether it changes memory: a shared scope only lets keys that may write shared memory do this."""
        if self.mcp is not None and self.mcp.read_only:
            return False
        return not (self.http is not None and self.http.method == "GET")

    def arguments(self, p: P.Params) -> dict[str, Any]:
        """The keyword arguments of the ``Memory`` call (the model's fields as validated: messages stay objects)."""
        return {name: getattr(p, name) for name in self.params.model_fields}

    def invoke(self, memory: Any, scope: Scope, p: P.Params, **python_only: Any) -> Any:
        """Run the operation through the facade (every surface takes this one path)."""
        method = getattr(memory, self.name)
        return (
            method(scope, **self.arguments(p), **python_only) if self.scoped else method(**self.arguments(p))
        )

    def wire(self, scope: Scope, p: P.Params, result: Any) -> Any:
        """What a wire surface sends for ``result``: its envelope, or the result as it is."""
        return self.envelope(scope, p, result) if self.envelope is not None else result

    def unwire(self, wire: BaseModel) -> Any:
        """The Python result inside what a wire surface sent (``wire``'s inverse): what a client of the HTTP API
        hands its caller, so a command run through a server renders exactly what it would render in process."""
        return getattr(wire, self.unwrap) if self.unwrap is not None else wire

    def response_model(self) -> type[BaseModel] | None:
        if isinstance(self.response, str):
            module, _, name = self.response.partition(":")
            model: type[BaseModel] = getattr(importlib.import_module(module), name)
            return model
        return self.response


# The errors most operations on a stored scope can raise; ``StorageFull`` only where something is written.
READS: tuple[type[GraphRecallError], ...] = (InvalidInput, StoreBusy)
WRITES: tuple[type[GraphRecallError], ...] = (InvalidInput, StoreBusy, StorageFull)
READ_ONLY = {"read_only": True, "idempotent": True}

ADD_SESSION = Operation(
    "add_session",
    P.AddSessionParams,
    "IngestResult",
    IngestResult,
    errors=(*WRITES, NotAvailable),
    http=Http("POST", "/sessions", "Add a session", "sessions", accepted=True),
    mcp=Mcp(
        "memory_add",
        "Store one conversation session (its turns, in order) in long-term memory. Idempotent per session_id "
        "and message position.",
    ),
)
ADD_MESSAGES = Operation(
    "add_messages",
    P.AddMessagesParams,
    "IngestResult",
    IngestResult,
    errors=WRITES,
    http=Http("POST", "/messages", "Append messages to a session", "sessions"),
)
ADD_SESSIONS = Operation(
    "add_sessions",
    P.AddSessionsParams,
    "IngestResult",
    IngestResult,
    errors=WRITES,
    python_only=("progress",),
)
IMPORT_SESSIONS = Operation(
    "import_sessions",
    P.ImportSessionsParams,
    "IngestResult",
    IngestResult,
    errors=WRITES,
    http=Http("POST", "/import", "Add sessions in the export format", "scope"),
)
ADD_DOCUMENT = Operation(
    "add_document",
    P.AddDocumentParams,
    "LearnedDocument",
    LearnedDocument,
    errors=(*WRITES, NotAvailable),
    http=Http(
        "POST",
        "/documents",
        "Learn a document: its passages become searchable beside the chat",
        "sessions",
        accepted=True,
    ),
    mcp=Mcp(
        "memory_learn",
        "Remember a document the user gives you (notes, a manual, a README: its text, and a source naming it). It "
        "is split into passages found by memory_search and memory_context beside past conversations, each hit "
        "naming its source and headings. Learning the same source again replaces it; the same text changes nothing.",
    ),
    cli=Cli(
        "learn",
        "learn documents (Markdown, plain text, PDF): passages searchable beside the chat, replaced when a file "
        "changes",
        llm=True,
        custom=True,
    ),
)
SEARCH = Operation(
    "search",
    P.SearchParams,
    "list[Hit]",
    R.SearchResponse,
    envelope=lambda s, p, hits: R.SearchResponse(query=p.query, hits=hits),
    unwrap="hits",
    errors=READS,
    python_only=("time_range",),
    http=Http("GET", "/search", "Hybrid search over the user's memory", "recall"),
    mcp=Mcp(
        "memory_search",
        "Ranked past conversation snippets (and, with kinds, extracted facts and events) relevant to a query, "
        "with scores and dates.",
        **READ_ONLY,
    ),
    cli=Cli(
        "search", "hybrid search over a scope", aliases={"k": ["-k"], "kinds": ["--kind"]}, reranker=True
    ),
)
CONTEXT = Operation(
    "context",
    P.ContextParams,
    "Context",
    Context,
    errors=READS,
    http=Http("GET", "/context", "Evidence for a prompt, inside a token budget", "recall"),
    mcp=Mcp(
        "memory_context",
        "Evidence for answering a question: the most relevant past snippets, dated and grouped by session, within "
        "a token budget. Read its 'text' before answering.",
        **READ_ONLY,
    ),
    cli=Cli(
        "context",
        "evidence rendered for a reader",
        aliases={"token_budget": ["--budget"], "k": ["-k"]},
        reranker=True,
    ),
)
PROFILE = Operation(
    "profile",
    P.ProfileParams,
    "Profile",
    Profile,
    errors=READS,
    http=Http(
        "GET",
        "/profile",
        "The user's current facts by kind, dated, for a system prompt (text and structure)",
        "facts",
    ),
    mcp=Mcp(
        "memory_profile",
        "What memory holds about the user now (or as_of): current facts grouped as identity and attributes, "
        "preferences, relationships, plans and goals, recent events, each with its session and date. Put its "
        "'text' in the system prompt at the start of a conversation.",
        **READ_ONLY,
    ),
    cli=Cli(
        "profile",
        "the user's current facts by kind, for a system prompt",
        aliases={"token_budget": ["--budget"]},
    ),
)
ANSWER = Operation(
    "answer",
    P.AnswerParams,
    "Answer",
    "graphrecall.read.models:Answer",
    errors=(*READS, NotAvailable),
    python_only=("llm",),
    http=Http(
        "POST", "/answer", "Answer a question from memory (the Reader; needs an LLM on the server)", "recall"
    ),
    mcp=Mcp(
        "memory_answer",
        "Answer a question from long-term memory with the server's reader (fails with not_available when the "
        "server has no LLM; then use memory_context and answer from the evidence).",
        **READ_ONLY,
    ),
    cli=Cli("answer", "answer a question from a scope's memory (needs an LLM)", llm=True, reranker=True),
)
STATS = Operation(
    "stats",
    P.NoParams,
    "ScopeStats",
    ScopeStats,
    errors=READS,
    unknown_scope="not_found",
    http=Http("GET", "/stats", "Counts and size of the user's memory", "scope"),
    cli=Cli("stats", "counts for one scope, an organisation's, or all scopes", custom=True),
)
SESSIONS = Operation(
    "sessions",
    P.SessionsParams,
    "list[Session]",
    R.SessionsResponse,
    envelope=lambda s, p, found: R.SessionsResponse(sessions=found),
    unwrap="sessions",
    errors=READS,
    unknown_scope="not_found",
    http=Http(
        "GET", "/sessions", "List sessions (without messages)", "sessions", operation_id="list_sessions"
    ),
    cli=Cli("sessions", "list a scope's sessions"),
)
GET_SESSION = Operation(
    "get_session",
    P.GetSessionParams,
    "Session",
    Session,
    errors=(*READS, NotFound),
    unknown_scope="not_found",
    http=Http("GET", "/sessions/{session_id}", "One session with its messages", "sessions"),
    cli=Cli("session", "one session with its messages"),
)
EXPORT_SESSIONS = Operation(
    "export_sessions",
    P.NoParams,
    "list[Session]",
    R.ExportDocument,
    envelope=lambda s, p, found: R.ExportDocument(org_id=s.org_id, user_id=s.user_id, sessions=found),
    unwrap="sessions",
    errors=READS,
    unknown_scope="not_found",
    http=Http("GET", "/export", "Every session with its messages", "scope"),
    cli=Cli(
        "export",
        "write a scope's sessions (which ingest and import_sessions read back), or everything it holds (--format "
        "json, graphml)",
        custom=True,
    ),
)
EXPORT_SCOPE = Operation("export_scope", P.NoParams, "ScopeExport", errors=READS)
IMPORT_SCOPE = Operation(
    "import_scope",
    P.NoParams,
    "ImportResult",
    errors=WRITES,
    python_only=("doc",),
    cli=Cli("import", "restore a whole-scope export (export --format json)", custom=True),
)
FORGET = Operation(
    "forget",
    P.NoParams,
    "bool",
    R.ForgetResponse,
    envelope=lambda s, p, erased: R.ForgetResponse(erased=erased),
    unwrap="erased",
    errors=(StoreBusy,),
    http=Http("DELETE", "", "Erase the user's memory (GDPR erasure)", "scope"),
    cli=Cli("forget", "erase a scope's memory", custom=True),
)
ERASE = Operation(
    "erase",
    P.EraseParams,
    "Erasure",
    Erasure,
    errors=(*WRITES, NotFound),
    unknown_scope="not_found",
    http=Http(
        "POST",
        "/erase",
        "Forget sessions, facts, everything before a date or matching some words (dry_run lists it)",
        "scope",
    ),
    mcp=Mcp(
        "memory_erase",
        "Forget part of what memory holds about the user, when the user asks: sessions, facts, everything before "
        "a date, or everything whose text holds given words, with what was derived from it. Call it with "
        "dry_run=true first and confirm the list with the user.",
        destructive=True,
    ),
    cli=Cli(
        "erase",
        "forget part of a scope: sessions, facts, everything before a date or matching words (--dry-run first)",
        aliases={"session_ids": ["--session"], "fact_ids": ["--fact"]},
        confirm=True,
    ),
)
BACKFILL_PASSAGES = Operation(
    "backfill_passages",
    P.NoParams,
    "int",
    errors=(*WRITES, NotFound),
    cli=Cli(
        "backfill-passages",
        "embed the passage vectors of long user turns stored without them (by a graphrecall before storage schema "
        "4, or under a higher GRAPHRECALL_PASSAGE_FROM_CHARS): one scope, an organisation's, or all",
        custom=True,
    ),
)
SCOPES = Operation("scopes", P.NoParams, "list[Scope]", scoped=False)
STORED = Operation("stored", P.NoParams, "bool")
EXTRACT = Operation(
    "extract",
    P.ExtractParams,
    "ExtractionResult",
    errors=(*WRITES, NotFound, NotAvailable),
    python_only=("progress",),
    cli=Cli("extract", "extract facts/events/entities from stored sessions", llm=True, custom=True),
)
EXTRACTION_JOBS = Operation(
    "extraction_jobs", P.NoParams, "list[ExtractionJob]", python_only=("scope",), scoped=False
)
RETRY_EXTRACTION = Operation(
    "retry_extraction",
    P.NoParams,
    "int",
    R.RetryResponse,
    envelope=lambda s, p, n: R.RetryResponse(requeued=n),
    unwrap="requeued",
    errors=(NotAvailable,),
    unknown_scope="not_found",
    http=Http(
        "POST",
        "/extraction-jobs/retry",
        "Queue the user's failed background extractions again (needs an LLM on the server)",
        "extraction",
    ),
    cli=Cli("retry-extraction", "queue a scope's failed background extractions again", llm=True),
)
WAIT_FOR_EXTRACTION = Operation(
    "wait_for_extraction", P.NoParams, "bool", python_only=("timeout",), scoped=False
)
FLUSH = Operation("flush", P.NoParams, "None", scoped=False)
FACTS = Operation(
    "facts",
    P.FactsParams,
    "list[Fact]",
    R.FactsResponse,
    envelope=lambda s, p, found: R.FactsResponse(facts=found),
    unwrap="facts",
    errors=READS,
    unknown_scope="not_found",
    http=Http("GET", "/facts", "Extracted facts: the current ones, or those true at as_of", "facts"),
    mcp=Mcp(
        "memory_facts",
        "Facts extracted from past conversations: the current ones, or those true at as_of (empty until "
        "extraction has run).",
        **READ_ONLY,
    ),
    cli=Cli("facts", "list extracted facts", aliases={"include_superseded": ["--all"]}),
)
HISTORY = Operation(
    "history",
    P.HistoryParams,
    "list[Fact]",
    R.FactHistoryResponse,
    envelope=lambda s, p, versions: R.FactHistoryResponse(fact_id=p.fact_id, versions=versions),
    unwrap="versions",
    errors=(*READS, NotFound),
    unknown_scope="not_found",
    http=Http(
        "GET",
        "/facts/{fact_id}/history",
        "Every version of a fact, oldest first",
        "facts",
        operation_id="fact_history",
    ),
    cli=Cli("history", "the versions of one fact, oldest first"),
)
SUPERSEDE = Operation(
    "supersede",
    P.SupersedeParams,
    "Fact",
    Fact,
    errors=(*WRITES, NotFound),
    unknown_scope="not_found",
    http=Http(
        "POST",
        "/facts/{old_id}/supersede",
        "Mark a fact as replaced by another; returns the updated old fact",
        "facts",
        operation_id="supersede_fact",
    ),
    cli=Cli("supersede", "mark a fact as replaced by another (history keeps both)"),
)
FEEDBACK = Operation(
    "feedback",
    P.FeedbackParams,
    "FeedbackResult",
    FeedbackResult,
    errors=(*WRITES, NotFound),
    unknown_scope="not_found",
    http=Http("POST", "/feedback", "Say that a hit or a fact was useful or wrong", "facts"),
    mcp=Mcp(
        "memory_feedback",
        "Tell memory whether something it returned was right. Call it with useful=true when a hit or fact from "
        "memory_search/memory_context helped answer, and useful=false when the user corrects it or it proved wrong "
        "(a wrong fact is marked disputed and leaves the profile until confirmed). Pass the hit's id.",
        idempotent=False,
    ),
    cli=Cli("feedback", "mark a hit or fact useful (true) or wrong (false): graphrecall feedback ID true"),
)
ADD_FACT = Operation(
    "add_fact",
    P.AddFactParams,
    "AddedFact",
    AddedFact,
    errors=WRITES,
    http=Http(
        "POST", "/facts", "Add a fact the application already knows; versioned like extracted facts", "facts"
    ),
    mcp=Mcp(
        "memory_add_fact",
        "Remember a fact about the user that the application knows for sure (not something to infer from chat: "
        "memory_add does that). A restatement reinforces the stored fact; a changed fact replaces it (the old one "
        "is kept as history).",
        idempotent=False,
    ),
    cli=Cli(
        "add-fact",
        "store a fact the application knows (versioned by the LLM when one is configured, else by rule)",
        aliases={"entities": ["--entity"]},
        llm=True,
    ),
)
CONSOLIDATE = Operation(
    "consolidate",
    P.ConsolidateParams,
    "Consolidation",
    Consolidation,
    errors=(*WRITES, NotAvailable),
    python_only=("llm",),
    unknown_scope="not_found",
    http=Http(
        "POST",
        "/consolidate",
        "Merge duplicate facts, link events to entities, summarize old periods (dry_run plans only)",
        "facts",
    ),
    mcp=Mcp(
        "memory_consolidate",
        "Tidy what memory holds about the user: merge facts stored several times in other words (the merged ones "
        "are kept as history), link events to the people and places they name, and with summaries=true write a "
        "short summary of each old week. Call with dry_run=true to see the plan first.",
    ),
    cli=Cli(
        "consolidate",
        "merge duplicate facts, link events to entities, summarize old periods (--dry-run: plan only)",
        llm=True,
    ),
)
ENTITIES = Operation(
    "entities",
    P.NoParams,
    "list[Entity]",
    R.EntitiesResponse,
    envelope=lambda s, p, found: R.EntitiesResponse(entities=found),
    unwrap="entities",
    errors=READS,
    unknown_scope="not_found",
    http=Http("GET", "/entities", "Extracted entities with their aliases, by name", "facts"),
    cli=Cli("entities", "list extracted entities and their aliases"),
)
EVENTS = Operation(
    "events",
    P.EventsParams,
    "list[Event]",
    R.EventsResponse,
    envelope=lambda s, p, found: R.EventsResponse(events=found),
    unwrap="events",
    errors=READS,
    unknown_scope="not_found",
    http=Http("GET", "/events", "Extracted events in time order", "facts"),
    cli=Cli("events", "list extracted events in time order"),
)

LIST_SCOPES = Operation(
    "list_scopes",
    P.ListScopesParams,
    "ScopePage",
    ScopePage,
    errors=READS,
    scoped=False,
    http=Http(
        "GET",
        "",
        "An organisation's users with their counts, size on disk, last write and extraction backlog (paged)",
        "scope",
        level="org",
    ),
    # Not an MCP tool on purpose: an assistant's model serves one user and has no business listing the others.
    cli=Cli("scopes", "an organisation's users with counts, size, last write and extraction backlog"),
)
GRAPH = Operation(
    "graph",
    P.GraphParams,
    "MemoryGraph",
    MemoryGraph,
    errors=READS,
    unknown_scope="not_found",
    http=Http("GET", "/graph", "Entities, facts and events with their edges (a page at a time)", "facts"),
    mcp=Mcp(
        "memory_graph",
        "The user's memory as a graph: facts and events with the people, places and things they name, how the "
        "entities relate, and which facts replaced which (optionally around one entity id).",
        **READ_ONLY,
    ),
    cli=Cli("graph", "entities, facts and events with their edges", aliases={"entity": ["--around"]}),
)
EXTRACTION_QUEUE = Operation(
    "extraction_queue",
    P.ExtractionQueueParams,
    "ExtractionQueue",
    ExtractionQueue,
    errors=READS,
    unknown_scope="not_found",
    http=Http(
        "GET",
        "/extraction-jobs",
        "The user's background extraction jobs, newest first, failed ones with the reason",
        "extraction",
        operation_id="extraction_jobs",
    ),
    # An operator's view of the server's queue, not something a model acts on: no MCP tool.
    cli=Cli("jobs", "a scope's background extraction jobs (pending, running, done, failed with the reason)"),
)
MAINTAIN = Operation(
    "maintain",
    P.MaintainParams,
    "Maintenance",
    Maintenance,
    errors=(*WRITES, NotAvailable),
    unknown_scope="not_found",
    http=Http(
        "POST",
        "/maintain",
        "Back up, then consolidate, when the memory changed and has been idle since (dry_run: only say)",
        "facts",
    ),
    mcp=Mcp(
        "memory_maintain",
        "Tidy the user's memory when it changed and is not in use: a backup first, then duplicate facts merged and "
        "events linked (summaries with an LLM). Runs by itself on a server started with --maintain; call with "
        "dry_run=true to see whether it is due.",
    ),
    cli=Cli("maintain", "back up and consolidate scopes that changed and are idle (for cron)", custom=True),
)
REPORT = Operation(
    "report",
    P.ReportParams,
    "ScopeReport",
    ScopeReport,
    errors=READS,
    unknown_scope="not_found",
    http=Http("GET", "/report", "How the user's memory grew and is used", "scope"),
    mcp=Mcp(
        "memory_report",
        "How the user's memory grew and is used: counts over time, extraction outcomes, search latency, how often "
        "answers abstained, maintenance runs.",
        **READ_ONLY,
    ),
    cli=Cli("report", "growth, extraction, search latency, abstentions, maintenance: per scope", custom=True),
)

DATASET = Operation(
    "dataset",
    P.DatasetParams,
    "Dataset",
    "graphrecall.dataset:Dataset",
    errors=(*READS, NotAvailable),
    python_only=("llm",),
    unknown_scope="not_found",
    http=Http(
        "GET", "/dataset", "Records for training or evaluating an assistant, each citing its sources", "scope"
    ),
    mcp=Mcp(
        "memory_dataset",
        "Build question-answer pairs, chat records or graph triples from the user's memory, each citing the "
        "sessions it comes from (for evaluating or fine-tuning an assistant).",
        **READ_ONLY,
    ),
    cli=Cli(
        "dataset", "records for training or evaluating an assistant (-o FILE.jsonl)", llm=True, custom=True
    ),
)

OPERATIONS: dict[str, Operation[Any]] = {
    op.name: op
    for op in (
        ADD_SESSION, ADD_MESSAGES, ADD_SESSIONS, IMPORT_SESSIONS, ADD_DOCUMENT, SEARCH, CONTEXT, PROFILE, ANSWER, STATS,
        SESSIONS, GET_SESSION, EXPORT_SESSIONS, EXPORT_SCOPE, IMPORT_SCOPE, FORGET, ERASE, BACKFILL_PASSAGES,
        SCOPES, STORED, EXTRACT, EXTRACTION_JOBS, RETRY_EXTRACTION, WAIT_FOR_EXTRACTION, FLUSH, FACTS, HISTORY,
        SUPERSEDE, FEEDBACK, ADD_FACT, CONSOLIDATE, ENTITIES, EVENTS, MAINTAIN, REPORT, DATASET, LIST_SCOPES, GRAPH,
        EXTRACTION_QUEUE,
    )
}  # fmt: skip
"""Every public operation of ``Memory`` (``recall``, which hands out a view rather than doing one thing, is the
one method outside the table)."""


def exposed(surface: Literal["http", "mcp", "cli"]) -> list[Operation[Any]]:
    """The operations a surface serves, in table order."""
    return [op for op in OPERATIONS.values() if getattr(op, surface) is not None]


def missing_scope(
    scope: Scope, known: Sequence[Scope], *, where: str, org_only: bool, listed: str = "", empty: str = ""
) -> NotFound:
    """The error for a read of a scope that holds nothing: it names the stored scopes closest to the one asked
    for (``org_only``: only within its organisation, for callers that may not see the others)."""
    pool = [s for s in known if s.org_id == scope.org_id] if org_only else list(known)
    names = [str(s) for s in pool]
    close = difflib.get_close_matches(str(scope), names, n=3, cutoff=0.6)
    if not close:
        close = [n for n in names if n.startswith(f"{scope.org_id}/")][:3]
    if close:
        hint = f"; did you mean {' or '.join(close)}?"
    elif names:
        hint = f"; {len(names)} user(s) are stored{' in this organisation' if org_only else ''}{listed}"
    else:
        hint = f"; nothing is stored there yet{empty}"
    return NotFound(f"no memory stored for {scope}{where}{hint}")


def check_table() -> None:
    """Fail loudly at import when a row contradicts itself (a path segment that is not a field, an alias of an
    unknown field): the table is read by every surface, so a broken row would break one of them silently."""
    for op in OPERATIONS.values():
        fields = set(op.params.model_fields)
        if op.http is not None:
            for part in op.http.path.split("/"):
                if part.startswith("{") and part.strip("{}") not in fields:
                    raise ValueError(f"{op.name}: HTTP path segment {part} is not a parameter")
        if op.cli is not None and set(op.cli.aliases) - fields:
            raise ValueError(f"{op.name}: CLI aliases for unknown fields {set(op.cli.aliases) - fields}")
        if op.envelope is not None and op.response is None:
            raise ValueError(f"{op.name}: an envelope needs its response model")
        if (op.envelope is None) != (op.unwrap is None):
            raise ValueError(f"{op.name}: an envelope and its unwrap field go together")
        model = op.response if isinstance(op.response, type) else None
        if op.unwrap is not None and model is not None and op.unwrap not in model.model_fields:
            raise ValueError(f"{op.name}: unwrap field {op.unwrap!r} is not a field of {model.__name__}")
        if op.http is not None and op.http.level == "org" and (op.scoped or "org_id" not in fields):
            raise ValueError(
                f"{op.name}: an organisation-level route needs an unscoped operation with org_id"
            )


check_table()
