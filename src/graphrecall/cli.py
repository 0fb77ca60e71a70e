"""The ``graphrecall`` command line: ingest files, search and render context, inspect, export and erase scopes,
and start the HTTP or MCP server.

Exit codes: 0 success; 1 an unexpected failure, a store that cannot be used (embedder or schema mismatch), a scope
that holds nothing, or an LLM that cannot be reached; 2 bad input, usage or configuration (the one stderr line names
the file, item, field or setting) or a missing optional component; 3 the store is busy (another process holds the
scope's database); 130 interrupted.

Errors are one line on stderr, never a traceback (``--debug`` shows it), because the usual reader is a person who
has to fix a file, not read our stack. Data goes to stdout (``--json`` for machines), progress and notes to stderr.
Under ``--json`` stdout holds exactly one JSON document: the result, or ``{"error": {"code", "message", "where"}}``
with the codes of the HTTP API's errors.

Commands that do not embed (``stats``, ``sessions``, ``export``, ``forget``, ``facts``, ``profile``, every error)
never load the
embedding model: the default embedder knows its id and dimension from the model's config files and loads the
weights on the first text it embeds (``embed.lazy``).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import itertools
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from graphrecall import (
    __version__,
    cli_extract,
    cli_hook,
    cli_learn,
    cli_ops,
    cli_remote,
    cli_served,
    formats,
    params,
    telemetry,
)
from graphrecall import operations as ops
from graphrecall.cli_common import (
    EXIT_BUSY,
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    CliError,
    add_llm_options,
    add_reranker_option,
    embedder_of,
    jsonable,
    llm_from_args,
    minute,
    notice,
    open_memory,
    print_json,
    progress,
    require_scope,
    root_of,
    scope_of,
)
from graphrecall.cli_common import (
    positive_int as _positive,
)
from graphrecall.config import EMBEDDER_ENV, EMBEDDER_SPECS
from graphrecall.dates import parse_date
from graphrecall.errors import (
    ConfigurationError,
    EmbedderMismatch,
    GraphRecallError,
    InvalidInput,
    NotAvailable,
    NotFound,
    SchemaMismatch,
    StoreBusy,
    Unreachable,
)
from graphrecall.models import IngestResult, Scope, ScopeStats, SessionInput
from graphrecall.server import shards
from graphrecall.server.limits import DEFAULT_MAX_BODY_BYTES
from graphrecall.server.serve import add_arguments as serve_arguments

if TYPE_CHECKING:
    from graphrecall.memory import Memory
    from graphrecall.remote.client import RemoteMemory

__all__ = [
    "EXIT_BUSY",
    "EXIT_FAIL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "build_parser",
    "main",
]

EXPORT_FORMATS = ("sessions", "json", "graphml")


class _UsageError(Exception):
    """argparse found the command line malformed; ``main`` reports it (as JSON under ``--json``)."""

    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting on a usage error, so ``--json`` can make it JSON."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message, self)


class _HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default after its help, unless the help already names it or there is none to show
    (argparse prints nothing at all for an option without help text, so every option should have one)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            text
            and text != argparse.SUPPRESS
            and "default" not in text
            and default not in (None, False, argparse.SUPPRESS)
            and (action.option_strings or action.nargs in ("?", "*"))
        ):
            text += " (default: %(default)s)"
        return text


# -- parser ----------------------------------------------------------------------------------------------------------
def _help(op: ops.Operation[Any]) -> str:
    assert op.cli is not None
    return op.cli.help


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--root",
        type=Path,
        default=None,
        help="store directory (default: $GRAPHRECALL_ROOT, else ~/.graphrecall/store)",
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    common.add_argument(
        "--embedder",
        default=None,
        metavar="SPEC",
        help=f"the embedding model: {EMBEDDER_SPECS} (default: ${EMBEDDER_ENV}, else minilm); a store opens only "
        "with the embedder that wrote it",
    )

    scope = _Parser(add_help=False)
    scope.add_argument("--org", required=True, help="organisation id")
    scope.add_argument("--user", required=True, help="user id")

    as_json = _Parser(add_help=False)
    as_json.add_argument(
        "--json", action="store_true", help="print machine-readable JSON on stdout, errors included"
    )

    client = _Parser(add_help=False)  # commands that go through a running server when there is one
    cli_remote.add_options(client)

    p = _Parser(
        prog=PROG, description="Long-term memory for chat assistants.", formatter_class=_HelpFormatter
    )
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser(
        "ingest", parents=[common, scope, as_json, client], help="add chat sessions from a file"
    )
    s.add_argument(
        "file",
        type=Path,
        help="JSON, JSONL, LongMemEval or message-list file (may be .gz), or a ChatGPT or Claude.ai "
        "export (its conversations.json, or the export's zip)",
    )
    s.add_argument(
        "--format", choices=formats.FORMATS, help="skip detection and read the file as this format"
    )
    s.add_argument(
        "--date",
        help="date (ISO-8601) for sessions without one; a plain message list without it is dated by the "
        "file's modification time",
    )
    s.add_argument(
        "--batch",
        type=_positive,
        default=params.BATCH_SESSIONS,
        help="sessions per transaction (default: %(default)s)",
    )
    s.add_argument("--quiet", action="store_true", help="no progress bar, no notices")
    s.add_argument("--extract", action="store_true", help="also extract facts/events with the configured LLM")
    add_llm_options(s)  # -- extraction (cli_common.py) --
    cli_learn.register(sub, [common, scope, as_json, client])
    GENERIC.update(cli_ops.register(sub, [common, scope, as_json], client))  # the operation table's commands

    # The table's custom commands: files, or one scope, an organisation's or all of them.
    s = sub.add_parser("stats", parents=[common, as_json, client], help=_help(ops.STATS))
    s.add_argument("--org", help="organisation id (alone: list that organisation's scopes)")
    s.add_argument("--user", help="user id (needs --org)")

    s = sub.add_parser("export", parents=[common, scope, client], help=_help(ops.EXPORT_SESSIONS))
    s.add_argument("-o", "--output", type=Path, help="output file (.gz compresses); default stdout")
    s.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default="sessions",
        help="sessions: the sessions, which ingest reads back; json: the whole scope (sessions, every fact "
        "version with its SUPERSEDES edges, events, entities), which import restores; graphml: the graph, for "
        "networkx, Gephi or yEd",
    )

    s = sub.add_parser("import", parents=[common, scope, as_json], help=_help(ops.IMPORT_SCOPE))
    s.add_argument("file", type=Path, help="what `graphrecall export --format json` wrote (may be .gz)")

    s = sub.add_parser("forget", parents=[common, scope, as_json, client], help=_help(ops.FORGET))
    s.add_argument("--yes", action="store_true", help="confirm: the scope's data is deleted for good")

    for op in (ops.MAINTAIN, ops.REPORT):
        s = sub.add_parser(op.name, parents=[common, as_json], help=_help(op))
        s.add_argument(
            "--org", help="organisation id (alone: every scope of that organisation; neither: every scope)"
        )
        s.add_argument("--user", help="user id (needs --org)")
        params.add_arguments(s, op.params)
        if op is ops.MAINTAIN:
            add_llm_options(s)  # optional here: without a model, maintenance consolidates without summaries

    s = sub.add_parser("dataset", parents=[common, scope, as_json], help=_help(ops.DATASET))
    params.add_arguments(s, ops.DATASET.params)
    s.add_argument(
        "-o", "--output", type=Path, help="write the records here, one JSON object per line; default stdout"
    )
    add_llm_options(s)

    s = sub.add_parser("backfill-passages", parents=[common, as_json], help=_help(ops.BACKFILL_PASSAGES))
    s.add_argument(
        "--org", help="organisation id (alone: every scope of that organisation; neither: every scope)"
    )
    s.add_argument("--user", help="user id (needs --org)")

    s = sub.add_parser(
        "reembed",
        parents=[common, as_json],
        help="move stored scopes to the embedder named by --embedder (required): every vector computed again, "
        "nothing else changed; resumable, and a killed run loses nothing (stop the server first)",
    )
    s.add_argument(
        "--org", help="organisation id (alone: every scope of that organisation; neither: every scope)"
    )
    s.add_argument("--user", help="user id (needs --org)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")

    s = sub.add_parser("serve", parents=[common], help="run the HTTP API")
    serve_arguments(s)

    s = sub.add_parser(
        "ui", parents=[common], help="the web console over a local store, on 127.0.0.1 only (docs/console.md)"
    )
    s.add_argument("--port", type=int, default=8420, help="port (default: 8420)")
    s.add_argument("--keys", help="API keys file: ask for a key even on loopback (default: none needed)")
    s.add_argument(
        "--log-level", default="warning", choices=("error", "warning", "info"), help="default: warning"
    )

    s = sub.add_parser(
        "shard-config",
        help="write the nginx config that shards the HTTP API over several serve nodes, or say which node "
        "owns a scope (docs/scaling.md)",
    )
    _add_shard_arguments(s)

    s = sub.add_parser("mcp", parents=[common], help="run the MCP server")
    add_reranker_option(s)
    s.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    s.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default: 127.0.0.1)")
    s.add_argument("--port", type=int, default=8766, help="HTTP port (default: 8766)")
    s.add_argument("--org", help="serve only this org (with --user: bind every call to one scope)")
    s.add_argument("--user", help="bind every call to this user (needs --org)")
    s.add_argument(
        "--keys", type=Path, help="API keys file (http transport; default $GRAPHRECALL_API_KEYS_FILE)"
    )
    s.add_argument(
        "--insecure-local",
        action="store_true",
        help="http without keys, on a loopback address only; refused together with keys",
    )
    cli_extract.register(sub, common=common, as_json=as_json, help=_help(ops.EXTRACT))
    cli_hook.register(sub, common=common, client=client)
    for command in sub.choices.values():
        command.formatter_class = _HelpFormatter
    return p


# -- entry point -----------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        if argv[:1] == ["hook"] and argv[1:2] and argv[1] in cli_hook.EVENTS:
            return cli_hook.usage_failed(argv, str(e))  # exit 2 would block the agent
        if wants_json:
            _report({"code": "invalid_input", "message": str(e), "where": ""}, as_json=True)
        else:
            e.parser.print_usage(sys.stderr)
            _fail(str(e))
        return EXIT_USAGE
    except SystemExit as e:  # --help / --version: argparse has printed; report its code instead of leaving
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, stream=sys.stderr)
    if not args.debug:
        _quiet_model_loading()
    as_json = bool(getattr(args, "json", False))
    remove_notice = _announce_model_loads(quiet=getattr(args, "quiet", False))
    try:
        telemetry.configure_from_env()  # OTEL_*: off unless asked for (graphrecall.telemetry)
        with telemetry.span(f"graphrecall.cli {args.command}", kind="client"):
            return int({**COMMANDS, **GENERIC}[args.command](args))
    except KeyboardInterrupt:
        _fail("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Whoever read our output stopped reading (``| head``): their choice, not a failure. What is left for
        # stdout goes nowhere, so the interpreter's final flush does not fail a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as e:
        if args.debug:
            raise
        error, code = _describe(e, args)
        _report(error, as_json=as_json)
        return code
    finally:
        remove_notice()


def _announce_model_loads(*, quiet: bool) -> Callable[[], None]:
    """Say once, on a terminal, that the embedding model is loading: the only slow start a command has, and
    only the commands that embed pay it."""
    if quiet or not sys.stderr.isatty():
        return lambda: None
    from graphrecall.embed import lazy  # here, not at the top: --help and --version need no embedder (NumPy)

    return lazy.on_load(lambda what: notice(f"loading the {what}…"))


def _quiet_model_loading() -> None:
    """Keep stderr for our own progress and errors: the model loader's weight bar and its deprecation notices are
    noise to someone ingesting a file (``--debug`` shows them)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=FutureWarning)


def _describe(e: Exception, args: argparse.Namespace) -> tuple[dict[str, str], int]:
    """The error a person (or, under ``--json``, a program) sees, and the exit code: ``code`` is stable (the
    HTTP API's error codes where one fits), ``message`` one sentence, ``where`` the flag, file or field."""

    def err(code: str, message: str, where: str = "") -> dict[str, str]:
        return {"code": code, "message": message, "where": where}

    if isinstance(e, CliError):
        return err(e.error_code, str(e), e.where), e.code
    if isinstance(e, InvalidInput):
        return err(e.code, str(e), e.where), EXIT_USAGE
    if isinstance(e, ConfigurationError):
        return err(e.code, f"{e.where}: {e}" if e.where else str(e), e.where), EXIT_USAGE
    if isinstance(e, StoreBusy) and getattr(args, "command", None) == "reembed":
        # Its own words: which scope a server holds, or that another reembed runs on the store.
        return err(e.code, f"store busy: {e}; stop it first"), EXIT_BUSY
    if isinstance(e, StoreBusy):
        where = (
            f"scope {args.org}/{args.user}"
            if getattr(args, "user", None)
            else f"a scope under {root_of(args)}"
        )
        message = (
            f"store busy: another process (a running server?) holds the database of {where}; "
            "stop it or go through its API"
        )
        return err(e.code, message), EXIT_BUSY
    if isinstance(e, NotAvailable):
        return err(e.code, str(e)), EXIT_USAGE
    if isinstance(e, NotFound):
        return err(e.code, str(e)), EXIT_FAIL
    if isinstance(e, Unreachable | EmbedderMismatch | SchemaMismatch | GraphRecallError):
        return err(e.code, str(e)), EXIT_FAIL
    message = f"unexpected {type(e).__name__}: {e} (rerun with --debug for the traceback)"
    return err("internal", message), EXIT_FAIL


def _report(error: dict[str, str], *, as_json: bool) -> None:
    if as_json:  # stdout: under --json it carries exactly one document, the result or this
        print(json.dumps({"error": error}, ensure_ascii=False))
    else:
        _fail(error["message"])


def _fail(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)


# -- shared helpers --------------------------------------------------------------------------------------------------
def _batches(items: Iterable[SessionInput], size: int) -> Iterator[list[SessionInput]]:
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


# -- commands --------------------------------------------------------------------------------------------------------
def cmd_ingest(args: argparse.Namespace) -> int:
    """Validate the whole file first (one streaming pass), then write it batch by batch: a bad file changes
    nothing, and a large JSONL file is never held in memory as a whole."""
    llm = (
        llm_from_args(args, "ingest --extract") if args.extract else None
    )  # fail before ingesting, not after
    scope = scope_of(args)
    if args.date is not None:
        parse_date(args.date, where="--date")
    fmt = args.format or formats.detect_format(args.file)
    total_sessions = total_messages = 0
    window = _embedding_window(args)
    overlong = 0
    cached: list[SessionInput] | None = [] if fmt != "jsonl" else None
    for s in formats.iter_sessions(args.file, fmt=fmt, default_date=args.date):
        total_sessions += 1
        total_messages += len(s.messages)
        overlong += sum(1 for m in s.messages if window is not None and window.too_long(_content(m)))
        if cached is not None:
            cached.append(s)

    def sessions() -> Iterable[SessionInput]:
        return (
            cached
            if cached is not None
            else formats.iter_sessions(args.file, fmt=fmt, default_date=args.date)
        )

    if not args.quiet:
        _ingest_notices(args, fmt, cached, overlong, window)

    started = time.perf_counter()

    def on_server(server: RemoteMemory) -> IngestResult:
        nonlocal started
        if llm is not None:
            raise cli_served.no_route("ingest --extract", server)
        with progress(total_sessions, quiet=args.quiet) as bar:
            started = time.perf_counter()
            return cli_served.ingest(server, scope, sessions(), batch=args.batch, done=bar)

    served, got = cli_remote.through_server(args, on_server)
    extracted = None
    result = got if served and got is not None else IngestResult()
    if not served:
        with open_memory(args) as mem, progress(total_sessions, quiet=args.quiet) as bar:
            started = (
                time.perf_counter()
            )  # after the model has loaded: the rate is the store's, not start-up's
            for batch in _batches(sessions(), args.batch):
                result = result + mem.add_sessions(scope, batch, batch_sessions=args.batch)
                bar(len(batch))
            extracted = (
                cli_extract.run_extract(mem, scope, llm, quiet=args.quiet) if llm is not None else None
            )
    seconds = time.perf_counter() - started
    rate = result.messages_added / seconds if seconds > 0 else 0.0
    if args.json:
        out = {
            **result.model_dump(include=set(IngestResult.COUNTERS)),
            "sessions_in_file": total_sessions,
            "messages_in_file": total_messages,
        }
        out |= {"seconds": round(seconds, 3), "messages_per_second": round(rate, 1), "format": fmt}
        if extracted is not None:
            out["extract"] = jsonable(extracted)
        print_json(out)
    else:
        print(
            f"{args.file.name} ({fmt}) -> {scope}: {result.sessions_added} sessions, {result.messages_added} "
            f"messages added; {result.messages_skipped} skipped (already stored); {result.rounds_written} rounds; "
            f"{seconds:.1f} s ({rate:.{0 if rate >= 10 else 1}f} messages/s)"
        )
        if extracted is not None:
            print(cli_extract.summary(extracted))
    return EXIT_OK


def _content(message: Any) -> str:
    text = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    return text if isinstance(text, str) else ""


def _ingest_notices(
    args: argparse.Namespace,
    fmt: str,
    sessions: Sequence[SessionInput] | None,
    overlong: int,
    window: _Window | None,
) -> None:
    """Say what was filled in for the user (a session id, a date) and what will not reach the vectors: silent
    defaults are how a history ends up dated on the day it was imported."""
    if fmt == "messages" and sessions:
        only = sessions[0]
        when = only.date if isinstance(only.date, datetime) else None
        source = "--date" if args.date is not None else "the file's modification time; pass --date to set it"
        notice(
            f"{args.file.name} is a plain message list: stored as one session {only.session_id!r} (named after "
            f"the file), dated {minute(when)} ({source})"
        )
    if overlong and window is not None:
        from graphrecall.embed.passages import MAX_PASSAGES  # numpy: not for commands that never embed

        notice(
            f"{overlong} message(s) are longer than the {MAX_PASSAGES} passages the embedding model reads of one "
            f"message (~{window.max_chars:,} characters): {MAX_PASSAGES} passages spread over the text stand for it "
            "(the full text is stored and found by keyword search)"
        )


class _Window:
    """The embedding model's window (from the model's files, without loading it), to count the messages too long
    to be embedded in full (``embed.passages``: longer than ``MAX_PASSAGES`` passages)."""

    def __init__(self, tokens: int) -> None:
        from graphrecall.embed.passages import CHARS_PER_TOKEN as PASSAGE_CHARS_PER_TOKEN
        from graphrecall.embed.passages import MAX_PASSAGES, PASSAGE_MAX_CHARS

        self.tokens = tokens
        self.max_chars = min((tokens - 2) * PASSAGE_CHARS_PER_TOKEN, PASSAGE_MAX_CHARS) * MAX_PASSAGES

    def too_long(self, text: str) -> bool:
        return len(text) > self.max_chars


def _embedding_window(args: argparse.Namespace) -> _Window | None:
    """The chosen embedder's window, read without loading it (``None`` for one that reads whole texts)."""
    from graphrecall.embed import embedder_from_spec

    try:
        tokens = getattr(embedder_from_spec(embedder_of(args)), "max_tokens", None)
    except (ImportError, OSError, ValueError, RuntimeError):  # no model files to read: say nothing
        return None
    return None if not isinstance(tokens, int) else _Window(tokens)


def selected_scopes(mem: Memory, args: argparse.Namespace) -> list[Scope]:
    """The scopes a command over "one, an organisation's or all" acts on: ``--org`` and ``--user`` one (which
    must exist), ``--org`` alone that organisation's (at least one, else the stored organisations are named),
    neither every scope (possibly none)."""
    if args.user is not None and args.org is None:
        raise CliError("--user needs --org", where="--user")
    if args.user is not None:
        scope = scope_of(args)
        require_scope(mem, scope)
        return [scope]
    known = mem.scopes()
    scopes = [s for s in known if args.org is None or s.org_id == args.org]
    if args.org is not None and not scopes:
        orgs = ", ".join(sorted({s.org_id for s in known})[:10]) or "none"
        message = f"no organisation {args.org!r} under {mem.root}; stored: {orgs}"
        raise CliError(message, EXIT_FAIL, error_code=NotFound.code, where="--org")
    return scopes


def cmd_stats(args: argparse.Namespace) -> int:
    served, one = cli_remote.through_server(args, lambda server: _stats_on_server(server, args))
    if served and one is not None:
        if args.json:
            print_json(one.model_dump(mode="json"))
        else:
            print(_stats_text(one))
        return EXIT_OK
    with open_memory(args) as mem:
        scopes = selected_scopes(mem, args)
        if args.user is not None:
            one = mem.stats(scopes[0])
            if args.json:
                print_json(one.model_dump(mode="json"))
            else:
                print(_stats_text(one))
            return EXIT_OK
        rows = [mem.stats(s) for s in scopes]
    if args.json:
        print_json([r.model_dump(mode="json") for r in rows])
        return EXIT_OK
    if not rows:
        print(f"no scopes under {root_of(args)}", file=sys.stderr)
        return EXIT_OK
    width = max(len(str(r.scope)) for r in rows)
    print(
        f"{'scope':<{width}}  {'sessions':>8}  {'messages':>8}  {'rounds':>8}  {'facts':>6}  {'on disk':>8}"
    )
    for r in rows:
        print(
            f"{r.scope!s:<{width}}  {r.sessions:>8}  {r.messages:>8}  {r.rounds:>8}  {r.facts:>6}  "
            f"{disk_size(r.disk_bytes):>8}"
        )
    return EXIT_OK


def _stats_on_server(server: RemoteMemory, args: argparse.Namespace) -> ScopeStats:
    """One scope's counts from the server; the scopes of an organisation or of the store have no route."""
    if args.user is None and args.org is not None:
        raise cli_served.no_route("stats of an organisation's scopes (without --user)", server)
    if args.user is None:
        raise cli_served.no_route("stats of every scope (without --org and --user)", server)
    return cli_served.stats(server, scope_of(args))


def disk_size(n: int) -> str:
    """Bytes for a person: a small scope (one that lives in its write log) is kilobytes, not "0.0 MB"."""
    return f"{n / 1e3:.0f} KB" if n < 1e6 else f"{n / 1e6:.1f} MB"


def _stats_text(st: Any) -> str:
    rows = [
        ("scope", str(st.scope)),
        ("sessions", str(st.sessions)),
        ("messages", str(st.messages)),
        ("rounds", str(st.rounds)),
        ("facts", str(st.facts)),
        ("events", str(st.events)),
        ("entities", str(st.entities)),
        ("on disk", disk_size(st.disk_bytes)),
        ("embedder", f"{st.embedder_id} ({st.dim} dimensions)"),
    ]
    return "\n".join(f"{name:<9} {value}" for name, value in rows)


def cmd_export(args: argparse.Namespace) -> int:
    scope = scope_of(args)

    def on_server(server: RemoteMemory) -> tuple[str, str]:
        if args.format != "sessions":
            raise cli_served.no_route(f"export --format {args.format}", server)
        text, n = cli_served.export_sessions(server, scope)
        return text, f"{n} sessions"

    served, got = cli_remote.through_server(args, on_server)
    if served and got is not None:
        _write_export(args, scope, *got)
        return EXIT_OK
    with open_memory(args) as mem:
        require_scope(mem, scope)
        if args.format == "sessions":  # the HTTP API's export document, which ingest and /import read back
            found = mem.export_sessions(scope)
            text = ops.EXPORT_SESSIONS.wire(scope, params.NoParams(), found).model_dump_json(indent=1) + "\n"
            what = f"{len(found)} sessions"
        else:
            doc = mem.export_scope(scope)
            if args.format == "json":
                text = doc.model_dump_json(indent=1) + "\n"
            else:
                text = formats.scope_to_graphml(doc)
            what = (
                f"{len(doc.sessions)} sessions, {len(doc.facts)} facts ({len(doc.supersedes)} superseded), "
                f"{len(doc.events)} events, {len(doc.entities)} entities"
            )
    _write_export(args, scope, text, what)
    return EXIT_OK


def _write_export(args: argparse.Namespace, scope: Scope, text: str, what: str) -> None:
    if args.output is None:
        sys.stdout.write(text)
    else:
        _write_atomically(args.output, text)
        print(f"exported {what} of {scope} to {args.output} ({args.format})", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> int:
    """The whole file is validated (shape, then every reference inside it) before the store is opened."""
    scope = scope_of(args)
    doc = formats.read_scope_export(args.file)
    with open_memory(args) as mem:
        r = mem.import_scope(scope, doc)
    if args.json:
        print_json(r.model_dump(mode="json"))
    else:
        graph = (
            "extracted memory already there (skipped)"
            if r.graph_skipped
            else f"{r.facts} facts ({r.supersedes} superseded), {r.events} events, {r.entities} entities"
        )
        print(
            f"{args.file.name} -> {scope}: {r.sessions_added} sessions, {r.messages_added} messages added "
            f"({r.messages_skipped} already stored); {graph}"
        )
    return EXIT_OK


def _write_atomically(path: Path, text: str) -> None:
    """Write next to ``path`` and rename: an interrupted export never leaves a truncated file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            data = text.encode("utf-8")
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=raw, mode="wb") as zipped:
                    zipped.write(data)
            else:
                raw.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cmd_forget(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    if not args.yes:
        raise CliError(f"refusing to erase {scope} without --yes", where="--yes")
    served, got = cli_remote.through_server(args, lambda server: cli_served.forget(server, scope))
    if served and got is not None:
        erased, held = got
        before = held or ScopeStats(scope=scope, sessions=0, messages=0, rounds=0)
    else:
        with open_memory(args) as mem:
            before = mem.stats(scope)  # opens the database: a scope held by another process is reported busy
            erased = mem.forget(scope)
    if args.json:
        print_json(
            {"scope": str(scope), "erased": erased, "sessions": before.sessions, "messages": before.messages}
        )
    elif erased:
        print(f"erased {scope}: {before.sessions} sessions, {before.messages} messages")
    else:
        print(f"nothing stored for {scope}")
    return EXIT_OK


def cmd_maintain(args: argparse.Namespace) -> int:
    """Every selected scope that is due (changed, then idle), for cron; a model when one is configured."""
    p = params.from_cli(ops.MAINTAIN.params, args)
    wants_llm = bool(args.llm or os.environ.get("GRAPHRECALL_LLM", "").strip())
    llm = llm_from_args(args, "maintenance summaries") if wants_llm else None
    done = []
    with open_memory(args) as mem:
        if llm is not None:
            mem.llm = llm
        budget = p.max_llm_calls  # for the whole run, not per scope
        for scope in selected_scopes(mem, args):
            m = mem.maintain(scope, **p.model_dump(exclude={"max_llm_calls"}), max_llm_calls=budget)
            budget -= m.run.llm_calls if m.run is not None else 0
            done.append(m)
    if args.json:
        print_json([m.model_dump(mode="json") for m in done])
        return EXIT_OK
    for m in done:
        if m.run is not None:
            r = m.run
            print(
                f"{m.scope}: backed up to {r.backup}; {r.facts_merged} facts merged, {r.event_links} event links, "
                f"{r.summaries} summaries, {r.llm_calls} LLM calls"
                + (f", {r.deferred} deferred" if r.deferred else "")
            )
        else:
            print(f"{m.scope}: {m.reason}")
        c = m.compaction
        if c is not None and (c.compacted or c.free_fraction >= c.bound):
            print(
                f"  bucket {c.bucket}: {c.bytes / 1e6:.1f} MB, {c.free_fraction:.0%} free; "
                + (
                    f"compacted to {(c.bytes_after or 0) / 1e6:.1f} MB in {c.seconds} s"
                    if c.compacted
                    else c.reason
                )
            )
    if not done:
        print(f"no scopes under {root_of(args)}", file=sys.stderr)
    return EXIT_OK


def cmd_dataset(args: argparse.Namespace) -> int:
    """Records as JSON lines (a file or stdout); a summary on stderr, or with ``--json`` the whole result."""
    scope = scope_of(args)
    p = params.from_cli(ops.DATASET.params, args)
    llm = llm_from_args(args, "dataset --generate") if p.generate else None
    with open_memory(args) as mem:
        require_scope(mem, scope)
        found = mem.dataset(scope, **p.model_dump(), llm=llm)
    if args.json:
        print_json(found.model_dump(mode="json"))
        return EXIT_OK
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in found.records)
    if args.output is not None:
        args.output.write_text(lines, encoding="utf-8")
        where = str(args.output)
    else:
        sys.stdout.write(lines)
        where = "stdout"
    rejected = f"; {found.rejected} generated pairs dropped by the check" if found.rejected else ""
    notice(f"{len(found.records)} {found.format} records from {scope} -> {where}{rejected}")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    p = params.from_cli(ops.REPORT.params, args)
    with open_memory(args) as mem:
        reports = [mem.report(scope, **p.model_dump()) for scope in selected_scopes(mem, args)]
    if args.json:
        print_json([r.model_dump(mode="json") for r in reports])
        return EXIT_OK
    for r in reports:
        s = r.stats
        ms = "-" if r.search_p50_ms is None else f"{r.search_p50_ms:.0f}/{r.search_p95_ms:.0f} ms"
        abst = "-" if r.abstention_rate is None else f"{r.abstention_rate:.0%} of {r.answers}"
        jobs = ", ".join(f"{k} {v}" for k, v in sorted(r.extraction.items())) or "none"
        last = r.maintenance[-1] if r.maintenance else None
        print(f"{r.scope}")
        print(
            f"  now        {s.sessions} sessions, {s.messages} messages, {s.facts} facts, {disk_size(s.disk_bytes)}"
        )
        if len(r.growth) > 1:
            first = r.growth[0]
            print(
                f"  growth     since {minute(first.at)}: +{s.sessions - first.sessions} sessions, "
                f"+{s.facts - first.facts} facts ({len(r.growth)} changes seen)"
            )
        print(f"  extraction {jobs}")
        print(f"  searches   {r.searches} (p50/p95 {ms}); answers abstained: {abst}")
        if r.hook_errors:
            print(f"  hooks      {r.hook_errors} errors (graphrecall hook errors)")
        print(
            f"  maintained {len(r.maintenance)} times"
            + (f", last {minute(last.at)}: {last.facts_merged} facts merged" if last else "")
        )
    if not reports:
        print(f"no scopes under {root_of(args)}", file=sys.stderr)
    return EXIT_OK


def cmd_backfill_passages(args: argparse.Namespace) -> int:
    """One scope (``--org`` and ``--user``), an organisation's scopes (``--org``) or every scope: an upgrade is
    usually for the whole store, and a loop over ``stats --json`` is not what an operator should have to write."""
    done: list[tuple[Scope, int]] = []
    with open_memory(args) as mem:
        for scope in selected_scopes(mem, args):
            rounds = mem.backfill_passages(scope)
            done.append((scope, rounds))
            if not args.json and (rounds or args.user is not None):
                print(
                    f"{scope}: {rounds} long rounds got passage vectors"
                    if rounds
                    else f"{scope}: nothing to backfill"
                )
    if args.json:
        if args.user is not None:
            print_json({"scope": str(done[0][0]), "rounds": done[0][1]})
        else:
            print_json(
                {
                    "scopes": [{"scope": str(s), "rounds": n} for s, n in done],
                    "rounds": sum(n for _, n in done),
                }
            )
    elif args.user is None and not done:
        print(f"no scopes under {root_of(args)}", file=sys.stderr)
    elif args.user is None:
        total = sum(n for _, n in done)
        counted = f"{len(done)} scope{'s' if len(done) != 1 else ''}"
        print(
            f"{counted}: {total} long rounds got passage vectors"
            if total
            else f"{counted}: nothing to backfill"
        )
    return EXIT_OK


def cmd_reembed(args: argparse.Namespace) -> int:
    """One scope, an organisation's or every scope, moved to ``--embedder`` (``graphrecall.reembed``)."""
    from graphrecall.embed.spec import embedder_from_spec
    from graphrecall.reembed import Reembedded, reembed

    spec = embedder_of(args)
    if spec is None:
        raise CliError(
            "reembed needs --embedder SPEC: the embedder to move the scopes to", where="--embedder"
        )
    embedder = embedder_from_spec(spec)
    with open_memory(args) as mem:
        scopes = selected_scopes(mem, args)
        root = mem.root

    def line(d: Reembedded) -> None:
        if args.json:
            return
        cached = f", {d.texts - d.embedded} from an interrupted run's cache" if d.texts > d.embedded else ""
        print(
            f"{d.scope}: already uses {embedder.id}"
            if d.skipped
            else f"{d.scope}: {d.stored_id} -> {embedder.id} ({d.texts} texts{cached})",
            flush=True,
        )

    started = time.monotonic()
    done = reembed(root, embedder, scopes, quiet=args.quiet or args.json, on_scope=line)
    seconds = round(time.monotonic() - started, 2)
    if args.json:
        print_json(
            {
                "embedder": embedder.id,
                "seconds": seconds,
                "scopes": [
                    {
                        "scope": str(d.scope),
                        "from": d.stored_id,
                        "texts": d.texts,
                        "embedded": d.embedded,
                        "skipped": d.skipped,
                    }
                    for d in done
                ],
            }
        )
        return EXIT_OK
    if not done:
        print(f"no scopes under {root}", file=sys.stderr)
    return EXIT_OK


def _require_extra(extra: str, modules: Sequence[str], what: str) -> None:
    """Fail with the pip command to run when an optional dependency group is missing (servers import lazily, so
    a missing package would otherwise surface as a traceback halfway through start-up)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(
            f"{what} needs {', '.join(missing)}, which is not installed: pip install 'graphrecall[{extra}]'"
        )


def cmd_serve(args: argparse.Namespace) -> int:
    _require_extra("server", ("fastapi", "uvicorn"), "the HTTP server")
    try:
        from graphrecall.server import run_server
    except ImportError as e:
        raise CliError(f"the HTTP server cannot be loaded ({e}); pip install 'graphrecall[server]'") from None
    args.root = root_of(args)
    run_server(args)  # reads root, host, port, keys, insecure_local, max_body_bytes, log_level, embedder
    return EXIT_OK


def cmd_ui(args: argparse.Namespace) -> int:
    """``graphrecall serve`` for one person at this machine: bound to 127.0.0.1, answering only requests addressed
    to a loopback name (no DNS rebinding), without keys unless ``--keys`` (or the keys variable) names some."""
    from graphrecall.server.serve import KEYS_ENV

    args.host = "127.0.0.1"
    args.insecure_local = not (args.keys or os.environ.get(KEYS_ENV))
    args.loopback_only = True
    return cmd_serve(args)


def cmd_mcp(args: argparse.Namespace) -> int:
    _require_extra("mcp", ("mcp",), "the MCP server")
    try:
        from graphrecall.server.mcp import run_server
    except ImportError as e:
        raise CliError(f"the MCP server cannot be loaded ({e}); pip install 'graphrecall[mcp]'") from None
    args.root = root_of(args)
    args.embedder = embedder_of(args)
    run_server(args)
    return EXIT_OK


def _add_shard_arguments(s: argparse.ArgumentParser) -> None:
    s.set_defaults(debug=False)
    s.add_argument(
        "--nodes",
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the serve nodes, in a fixed order (ownership depends on these exact strings)",
    )
    s.add_argument("--listen", default=shards.DEFAULT_LISTEN, help="[HOST:]PORT nginx listens on")
    s.add_argument(
        "--max-body-bytes",
        type=_positive,
        default=DEFAULT_MAX_BODY_BYTES,
        help="the nodes' own --max-body-bytes; larger bodies are refused by nginx with the same 413",
    )
    s.add_argument(
        "--http-block",
        action="store_true",
        help="write only what goes inside http { }, to include from an existing nginx",
    )
    s.add_argument("--out", "-o", type=Path, help="file to write (default: stdout)")
    s.add_argument(
        "--which",
        action="append",
        metavar="ORG/USER",
        help="instead of a config, print the node that owns this scope (repeatable)",
    )
    s.add_argument(
        "--scopes",
        type=Path,
        metavar="FILE",
        help="like --which, for each ORG/USER line of FILE ('-': stdin)",
    )
    s.add_argument(
        "--new-nodes",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="with --which/--scopes: print only the scopes whose owner changes under this node list",
    )


def cmd_shard_config(args: argparse.Namespace) -> int:
    """The config, or (``--which``/``--scopes``) scope owners, or (``--new-nodes``) the scopes that would move."""
    try:
        nodes = shards.parse_nodes(args.nodes)
        listen = shards.parse_listen(args.listen)
        names = list(args.which or [])
        if args.scopes is not None:
            text = sys.stdin.read() if str(args.scopes) == "-" else args.scopes.read_text(encoding="utf-8")
            names += [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        scopes = [shards.parse_scope(name) for name in names]
        after = shards.parse_nodes(args.new_nodes) if args.new_nodes else None
    except (shards.ShardConfigError, OSError) as e:
        raise CliError(str(e)) from None
    if after is not None and not scopes:
        raise CliError("--new-nodes needs the scopes to check: --which ORG/USER or --scopes FILE")
    if after is not None:
        moved = shards.moves(scopes, nodes, after)
        for org, user, old, new in moved:
            print(f"{org}/{user}\t{old.address} -> {new.address}")
        notice(f"{len(moved)} of {len(scopes)} scope(s) move")
        return EXIT_OK
    if scopes:
        ring = shards.Ring(tuple(nodes))
        for org, user in scopes:
            print(f"{org}/{user}\t{ring.owner(org, user).address}")
        return EXIT_OK
    text = shards.render(
        nodes, listen=listen, max_body_bytes=args.max_body_bytes, http_block_only=args.http_block
    )
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        notice(f"wrote {args.out} ({len(nodes)} node(s), listening on {listen})")
    return EXIT_OK


GENERIC: dict[str, Callable[[argparse.Namespace], int]] = {}
"""The operation table's commands (``cli_ops``), filled in when the parser is built."""
COMMANDS = {
    "ingest": cmd_ingest,
    "learn": cli_learn.cmd_learn,
    "stats": cmd_stats,
    "export": cmd_export,
    "import": cmd_import,
    "forget": cmd_forget,
    "backfill-passages": cmd_backfill_passages,
    "maintain": cmd_maintain,
    "dataset": cmd_dataset,
    "report": cmd_report,
    "reembed": cmd_reembed,
    "serve": cmd_serve,
    "ui": cmd_ui,
    "shard-config": cmd_shard_config,
    "mcp": cmd_mcp,
    "extract": cli_extract.cmd_extract,
    "hook": cli_hook.cmd_hook,
}


if __name__ == "__main__":
    sys.exit(main())
