"""The ``graphrecall`` command line: ingest files, search and render context, inspect, export and erase scopes,
and start the HTTP or MCP server.

Exit codes: 0 success; 1 an unexpected failure or a store that cannot be used (embedder or schema mismatch);
2 bad input or usage (the one stderr line names the file, item and field) or a missing optional component;
3 the store is busy (another process holds the scope's database); 130 interrupted.

Errors are one line on stderr, never a traceback (``--debug`` shows it), because the usual reader is a person who
has to fix a file, not read our stack. Data goes to stdout (``--json`` for machines), progress and notes to stderr.
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
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from graphrecall import cli_extract, formats, params
from graphrecall.config import default_root
from graphrecall.embed import Embedder, HashingEmbedder
from graphrecall.errors import (
    EmbedderMismatch,
    GraphRecallError,
    InvalidInput,
    NotAvailable,
    SchemaMismatch,
    StoreBusy,
)
from graphrecall.ingest import parse_date
from graphrecall.memory import Memory, SessionInput
from graphrecall.models import Hit, IngestResult, Scope
from graphrecall.server.serve import add_arguments as serve_arguments

PROG = "graphrecall"
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_BUSY, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
SNIPPET_CHARS = 160
_COUNTERS = ("sessions_added", "messages_added", "messages_skipped", "rounds_written")


class CliError(Exception):
    """A problem the user must fix, reported as one line with a chosen exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


# -- parser ----------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--root",
        type=Path,
        default=None,
        help="store directory (default: $GRAPHRECALL_ROOT, else ~/.graphrecall/store)",
    )
    common.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    # Hidden: a fast, model-free embedder for tests and smoke checks. Stores built with it only open with it.
    common.add_argument(
        "--embedder", choices=("default", "hashing"), default="default", help=argparse.SUPPRESS
    )

    scope = argparse.ArgumentParser(add_help=False)
    scope.add_argument("--org", required=True, help="organisation id")
    scope.add_argument("--user", required=True, help="user id")

    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print machine-readable JSON")

    p = argparse.ArgumentParser(prog=PROG, description="Long-term memory for chat assistants.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("ingest", parents=[common, scope, as_json], help="add chat sessions from a file")
    s.add_argument("file", type=Path, help="JSON, JSONL, LongMemEval or message-list file (may be .gz)")
    s.add_argument(
        "--format", choices=formats.FORMATS, help="skip detection and read the file as this format"
    )
    s.add_argument("--date", help="date (ISO-8601) for sessions without one, e.g. a plain message list")
    s.add_argument("--batch", type=_positive, default=64, help="sessions per transaction (default 64)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--extract", action="store_true", help="also extract facts/events with the configured LLM")
    cli_extract.add_llm_options(s)  # -- extraction (cli_extract.py) --

    # search, context, answer, facts: options derived from graphrecall.params, shared with HTTP and MCP.
    s = sub.add_parser("search", parents=[common, scope, as_json], help="hybrid search over a scope")
    params.add_arguments(s, params.SearchParams, aliases={"k": ["-k"]})

    s = sub.add_parser("context", parents=[common, scope, as_json], help="evidence rendered for a reader")
    params.add_arguments(s, params.ContextParams, aliases={"token_budget": ["--budget"], "k": ["-k"]})

    s = sub.add_parser("stats", parents=[common, as_json], help="counts for one scope, or for all scopes")
    s.add_argument("--org", help="organisation id (alone: list that organisation's scopes)")
    s.add_argument("--user", help="user id (needs --org)")

    sub.add_parser("sessions", parents=[common, scope, as_json], help="list a scope's sessions")

    s = sub.add_parser(
        "export", parents=[common, scope], help="write a scope's sessions as re-ingestable JSON"
    )
    s.add_argument("-o", "--output", type=Path, help="output file (.gz compresses); default stdout")

    s = sub.add_parser("forget", parents=[common, scope], help="erase a scope's memory")
    s.add_argument("--yes", action="store_true", help="confirm: the scope's data is deleted for good")

    s = sub.add_parser("serve", parents=[common], help="run the HTTP API")
    serve_arguments(s)

    _add_answer_parser(sub, [common, scope, as_json])  # see the "answer" block below

    s = sub.add_parser("mcp", parents=[common], help="run the MCP server")
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
    # -- extraction commands: extract, facts (see cli_extract.py) --------------------------------------------------
    cli_extract.register(sub, common=common, scope=scope, as_json=as_json)
    # -- end extraction commands -----------------------------------------------------------------------------------
    return p


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# -- entry point -----------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse has printed usage/help; report its code instead of leaving the process
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, stream=sys.stderr)
    if not args.debug:
        _quiet_model_loading()
    try:
        return int(COMMANDS[args.command](args))
    except KeyboardInterrupt:
        _fail("interrupted")
        return EXIT_INTERRUPTED
    except Exception as e:
        if args.debug:
            raise
        message, code = _describe(e, args)
        _fail(message)
        return code


def _quiet_model_loading() -> None:
    """Keep stderr for our own progress and errors: the model loader's weight bar and its deprecation notices are
    noise to someone ingesting a file (``--debug`` shows them)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=FutureWarning)


def _describe(e: Exception, args: argparse.Namespace) -> tuple[str, int]:
    """The one line (and exit code) a person sees for an error."""
    if isinstance(e, CliError):
        return str(e), e.code
    if isinstance(e, InvalidInput):
        return str(e), EXIT_USAGE
    if isinstance(e, StoreBusy):
        where = (
            f"scope {args.org}/{args.user}" if getattr(args, "user", None) else f"a scope under {_root(args)}"
        )
        return (
            f"store busy: another process (a running server?) holds the database of {where}; "
            "stop it or go through its API",
            EXIT_BUSY,
        )
    if isinstance(e, NotAvailable) or getattr(e, "code", None) == "server_config":
        return str(e), EXIT_USAGE
    if isinstance(e, EmbedderMismatch | SchemaMismatch | GraphRecallError):
        return str(e), EXIT_FAIL
    return f"unexpected {type(e).__name__}: {e} (rerun with --debug for the traceback)", EXIT_FAIL


def _fail(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)


# -- shared helpers --------------------------------------------------------------------------------------------------
def _root(args: argparse.Namespace) -> Path:
    root: Path | None = args.root
    return (root if root is not None else default_root()).expanduser()


def _embedder(args: argparse.Namespace) -> Embedder | None:
    return HashingEmbedder(64) if args.embedder == "hashing" else None


@contextlib.contextmanager
def _memory(args: argparse.Namespace) -> Iterator[Memory]:
    with Memory.open(_root(args), embedder=_embedder(args)) as mem:
        yield mem


def _scope(args: argparse.Namespace) -> Scope:
    try:
        return Scope(org_id=args.org, user_id=args.user)
    except ValidationError as e:
        first = e.errors()[0]
        flag = {"org_id": "--org", "user_id": "--user"}.get(str(first["loc"][0]), "scope")
        raise InvalidInput(first["msg"].removeprefix("Value error, "), where=flag) from None


def _batches(items: Iterable[SessionInput], size: int) -> Iterator[list[SessionInput]]:
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _date(d: datetime | None) -> str:
    return d.strftime("%Y-%m-%d") if d else "?"


# -- commands --------------------------------------------------------------------------------------------------------
def cmd_ingest(args: argparse.Namespace) -> int:
    """Validate the whole file first (one streaming pass), then write it batch by batch: a bad file changes
    nothing, and a large JSONL file is never held in memory as a whole."""
    llm = cli_extract.llm_from_args(args) if args.extract else None  # fail before ingesting, not after
    scope = _scope(args)
    if args.date is not None:
        parse_date(args.date, where="--date")
    fmt = args.format or formats.detect_format(args.file)
    total_sessions = total_messages = 0
    cached: list[SessionInput] | None = [] if fmt != "jsonl" else None
    for s in formats.iter_sessions(args.file, fmt=fmt, default_date=args.date):
        total_sessions += 1
        total_messages += len(s.messages)
        if cached is not None:
            cached.append(s)
    sessions = (
        cached if cached is not None else formats.iter_sessions(args.file, fmt=fmt, default_date=args.date)
    )

    result = IngestResult()
    with _memory(args) as mem, _progress(total_sessions, quiet=args.quiet) as bar:
        started = time.perf_counter()  # after the model has loaded: the rate is the store's, not start-up's
        for batch in _batches(sessions, args.batch):
            r = mem.add_sessions(scope, batch, batch_sessions=args.batch)
            for field in _COUNTERS:
                setattr(result, field, getattr(result, field) + getattr(r, field))
            bar(len(batch))
        extracted = cli_extract.run_extract(mem, scope, llm, quiet=args.quiet) if llm is not None else None
    seconds = time.perf_counter() - started
    rate = result.messages_added / seconds if seconds > 0 else 0.0
    if args.json:
        out = {
            **result.model_dump(include=set(_COUNTERS)),
            "sessions_in_file": total_sessions,
            "messages_in_file": total_messages,
        }
        out |= {"seconds": round(seconds, 3), "messages_per_second": round(rate, 1), "format": fmt}
        if extracted is not None:
            out["extract"] = _jsonable(extracted)
        _print_json(out)
    else:
        print(
            f"{args.file.name} ({fmt}) -> {scope}: {result.sessions_added} sessions, {result.messages_added} "
            f"messages added; {result.messages_skipped} skipped (already stored); {result.rounds_written} rounds; "
            f"{seconds:.1f} s ({rate:.0f} messages/s)"
        )
        if extracted is not None:
            print(cli_extract.summary(extracted))
    return EXIT_OK


@contextlib.contextmanager
def _progress(total: int, *, quiet: bool) -> Iterator[Any]:
    """A tqdm bar on stderr, only for a person watching a terminal."""
    if quiet or not sys.stderr.isatty():
        yield lambda n: None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="session", file=sys.stderr, dynamic_ncols=True) as bar:
        yield bar.update


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def cmd_search(args: argparse.Namespace) -> int:
    scope = _scope(args)
    p = params.from_cli(params.SearchParams, args)
    with _memory(args) as mem:
        hits = mem.search(scope, p.query, p.k, question_date=p.question_date)
    if args.json:
        _print_json([h.model_dump(mode="json") for h in hits])
        return EXIT_OK
    if not hits:
        print(f"no hits for {p.query!r} in {scope}", file=sys.stderr)
    for h in hits:
        print(_format_hit(h))
    return EXIT_OK


def _format_hit(h: Hit) -> str:
    signals = " ".join(f"{k}={v:.3f}" for k, v in sorted(h.signals.items()))
    return (
        f"{h.rank:>3}. {h.score:.4f}  {_date(h.date)}  {h.session_id}  [{signals}]\n     {_snippet(h.text)}"
    )


def cmd_context(args: argparse.Namespace) -> int:
    scope = _scope(args)
    p = params.from_cli(params.ContextParams, args)
    with _memory(args) as mem:
        ctx = mem.context(scope, p.query, p.token_budget, k=p.k, question_date=p.question_date)
    if args.json:
        _print_json(ctx.model_dump(mode="json"))
        return EXIT_OK
    sys.stdout.write(ctx.text)
    note = f"{len(ctx.hits)} hits, {ctx.token_count}/{ctx.token_budget} tokens"
    print(f"({note}{', truncated' if ctx.truncated else ''})", file=sys.stderr)
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    if args.user is not None and args.org is None:
        raise CliError("--user needs --org")
    with _memory(args) as mem:
        if args.user is not None:
            one = mem.stats(_scope(args))
            if args.json:
                _print_json(one.model_dump(mode="json"))
            else:
                for key, value in one.model_dump(mode="json").items():
                    print(f"{key:<12} {value}")
            return EXIT_OK
        scopes = [s for s in mem.scopes() if args.org is None or s.org_id == args.org]
        rows = [mem.stats(s) for s in scopes]
    if args.json:
        _print_json([r.model_dump(mode="json") for r in rows])
        return EXIT_OK
    if not rows:
        print(f"no scopes under {_root(args)}", file=sys.stderr)
        return EXIT_OK
    width = max(len(str(r.scope)) for r in rows)
    print(f"{'scope':<{width}}  {'sessions':>8}  {'messages':>8}  {'rounds':>8}  {'facts':>6}  {'MB':>8}")
    for r in rows:
        print(
            f"{r.scope!s:<{width}}  {r.sessions:>8}  {r.messages:>8}  {r.rounds:>8}  {r.facts:>6}  "
            f"{r.disk_bytes / 1e6:>8.1f}"
        )
    return EXIT_OK


def cmd_sessions(args: argparse.Namespace) -> int:
    scope = _scope(args)
    with _memory(args) as mem:
        listed = mem.sessions(scope, limit=10**9)
    if args.json:
        _print_json([s.model_dump(mode="json", exclude={"messages"}) for s in listed])
        return EXIT_OK
    for s in listed:
        print(f"{s.started_at.isoformat(sep=' ')}  {s.id}  (extract: {s.extract_status})")
    if not listed:
        print(f"no sessions in {scope}", file=sys.stderr)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    scope = _scope(args)
    with _memory(args) as mem:
        data = [formats.session_to_json(s) for s in mem.export_sessions(scope)]
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        _write_atomically(args.output, text)
        print(f"exported {len(data)} sessions of {scope} to {args.output}", file=sys.stderr)
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
    scope = _scope(args)
    if not args.yes:
        raise CliError(f"refusing to erase {scope} without --yes")
    with _memory(args) as mem:
        before = mem.stats(scope)  # opens the database: a scope held by a running server is reported busy
        erased = mem.forget(scope)
    if erased:
        print(f"erased {scope}: {before.sessions} sessions, {before.messages} messages")
    else:
        print(f"nothing stored for {scope}")
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
    args.root = _root(args)
    run_server(args)  # reads root, host, port, keys, insecure_local, max_body_bytes, log_level, embedder
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    _require_extra("mcp", ("mcp",), "the MCP server")
    try:
        from graphrecall.server.mcp import run_server
    except ImportError as e:
        raise CliError(f"the MCP server cannot be loaded ({e}); pip install 'graphrecall[mcp]'") from None
    args.root = _root(args)
    args.hashing_dim = 64 if args.embedder == "hashing" else None
    run_server(args)
    return EXIT_OK


COMMANDS = {
    "ingest": cmd_ingest,
    "search": cmd_search,
    "context": cmd_context,
    "stats": cmd_stats,
    "sessions": cmd_sessions,
    "export": cmd_export,
    "forget": cmd_forget,
    "serve": cmd_serve,
    "mcp": cmd_mcp,
    **cli_extract.COMMANDS,  # -- extraction commands (cli_extract.py) --
}


# == answer: the Reader (owned by the reader; keep this block self-contained) ========================================
def _add_answer_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "answer", parents=parents, help="answer a question from a scope's memory (needs an LLM)"
    )
    params.add_arguments(s, params.AnswerParams)
    s.add_argument("--llm", help="provider:model, e.g. openai:gpt-4o-mini (default: $GRAPHRECALL_LLM)")
    s.add_argument(
        "--llm-base-url", help="OpenAI-compatible server or Ollama host (default: $GRAPHRECALL_LLM_BASE_URL)"
    )


def cmd_answer(args: argparse.Namespace) -> int:
    from graphrecall.llm import LLMConfigError, llm_from_settings_or_none

    scope = _scope(args)
    p = params.from_cli(params.AnswerParams, args)
    try:
        llm = llm_from_settings_or_none(args.llm, args.llm_base_url)
    except LLMConfigError as e:
        raise CliError(f"--llm: {e}") from None
    with _memory(args) as mem:
        ans = mem.answer(
            scope, p.question, question_date=p.question_date, mode=p.mode, llm=llm,
            tools=p.tools, max_tool_steps=p.max_tool_steps, token_budget=p.token_budget,
        )  # fmt: skip
    if args.json:
        _print_json({**ans.model_dump(mode="json"), "usage": ans.usage.model_dump()})
        return EXIT_OK
    print(ans.text)
    verdict = f", verifier {ans.verdict}" if ans.verdict else ""
    print(
        f"\nmode: {ans.mode} ({ans.question_type}), abstained: {'yes' if ans.abstained else 'no'}{verdict}, "
        f"{len(ans.tool_trace)} tool calls, {ans.usage.total_tokens} tokens, {ans.latency_s:.1f} s"
    )
    if ans.preferences:
        print("preferences used:")
        for p in ans.preferences:
            print(f"  - {p}")
    if ans.citations:
        print("evidence:")
        for c in ans.citations:
            print(f"  [{c.hit_id}] {_date(c.date)}  session {c.session_id}: {_snippet(c.snippet, 120)}")
    return EXIT_OK


COMMANDS["answer"] = cmd_answer
# == end of the answer block ===========================================================================================


if __name__ == "__main__":
    sys.exit(main())
