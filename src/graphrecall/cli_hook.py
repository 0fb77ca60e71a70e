"""``graphrecall hook EVENT``: the hooks a coding agent runs (Claude Code's hook protocol), and ``hook install`` /
``hook errors``.

A hook never stands in its agent's way: whatever goes wrong (bad input, a busy or unreachable store, a bug), it
exits 0 with one line on stderr and the error counted under ``<root>/.hooks/errors.jsonl`` (``hook errors`` shows the
counts). Exit 2 would mean "block" to Claude Code (a refused prompt, a session that may not stop), so no path here
returns it, usage errors included (``cli.main`` hands those to ``usage_failed``).

Where the operations run: the server that holds ``--root`` or the one configured by URL (``cli_remote``), with a
short timeout; else a ``Memory`` opened here. The scope: ``--org`` (default ``$GRAPHRECALL_ORG``, else ``local``) and
``--user`` (default ``$GRAPHRECALL_USER``, else the login name); the project from the git root of the hook's
``cwd`` (``hooks.project``).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphrecall.cli_common import EXIT_OK, notice, open_memory, positive_int, print_json, root_of
from graphrecall.config import default_root
from graphrecall.errors import GraphRecallError, InvalidInput
from graphrecall.hooks import events, install, state
from graphrecall.hooks.payload import HookInput, read_payload
from graphrecall.hooks.project import HookScopes, scopes_for
from graphrecall.models import Scope

EVENTS = ("session-start", "prompt", "stop", "session-end", "pre-compact")
AGENT_EVENT = {"session-start": "SessionStart", "prompt": "UserPromptSubmit"}
ORG_ENV, USER_ENV = "GRAPHRECALL_ORG", "GRAPHRECALL_USER"
HOOK_TIMEOUT_S = 25.0  # below the installed hooks' timeout: a slow server is given up on, not waited for


def default_user() -> str:
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        name = ""
    return re.sub(r"[^\w.+-]+", "-", name).strip("-.") or "me"


def register(sub: Any, *, common: argparse.ArgumentParser, client: argparse.ArgumentParser) -> None:
    hook = sub.add_parser(
        "hook",
        help="hooks for coding agents (Claude Code): memory at session start and per prompt, transcripts stored",
        description="Run as the agent's hook: reads its hook JSON on stdin, never fails the agent (exit 0; one "
        "line on stderr and a counted error when something goes wrong). docs/agents.md",
    )
    events_ = hook.add_subparsers(dest="event", required=True, metavar="EVENT")
    scope = argparse.ArgumentParser(add_help=False)
    scope.add_argument("--org", default=None, help=f"organisation id (default: ${ORG_ENV}, else 'local')")
    scope.add_argument("--user", default=None, help=f"user id (default: ${USER_ENV}, else the login name)")
    helps = {
        "session-start": "SessionStart: print the user's profile and the project's latest sessions",
        "prompt": "UserPromptSubmit: print the memory relevant to the prompt, or nothing",
        "stop": "Stop: store the transcript's new turns",
        "session-end": "SessionEnd: store the transcript's new turns",
        "pre-compact": "PreCompact: store the transcript's new turns before the agent compacts its context",
    }
    for event, text in helps.items():
        s = events_.add_parser(event, parents=[common, scope, client], help=text, description=text)
        if event in AGENT_EVENT:
            default = events.Budgets().session_start if event == "session-start" else events.Budgets().prompt
            s.add_argument(
                "--budget",
                type=positive_int,
                default=default,
                help=f"most tokens printed (default: {default})",
            )
            s.add_argument(
                "--plain",
                action="store_true",
                help="print the text alone, not the hookSpecificOutput JSON (Claude Code takes either)",
            )
    s = events_.add_parser(
        "install",
        parents=[scope],
        help="print the Claude Code settings that run these hooks, or merge them into a settings file",
    )
    s.add_argument(
        "--write",
        type=Path,
        metavar="SETTINGS",
        help="merge into this settings file (e.g. ~/.claude/settings.json), keeping every other setting",
    )
    s.add_argument("--root", type=Path, default=None, help="store directory the hooks use (default: theirs)")
    s.add_argument("--url", default=None, help="the graphrecall server the hooks use (default: theirs)")
    s.add_argument("--embedder", default=None, metavar="SPEC", help="the hooks' --embedder (default: theirs)")
    s.set_defaults(debug=False)
    s = events_.add_parser(
        "errors",
        parents=[common],
        help="how many errors the hooks swallowed, by event and code, and the last one",
    )
    s.add_argument("--json", action="store_true", help="print JSON")


def cmd_hook(args: argparse.Namespace) -> int:
    if args.event == "install":
        return _install(args)
    if args.event == "errors":
        return _errors(args)
    root = root_of(args)
    scope: list[str] = []  # the scope the hook works on, once known (for the error line)
    try:
        output = _run(args, root, sys.stdin.read(), scope)
    except BaseException as e:  # a hook never fails its agent, whatever failed
        where = scope[0] if scope else None
        failed(root, args.event, e, debug=bool(getattr(args, "debug", False)), scope=where)
        return EXIT_OK
    if output:
        sys.stdout.write(output)
    return EXIT_OK


def failed(
    root: Path, event: str, e: BaseException, *, debug: bool = False, scope: str | None = None
) -> None:
    """One line on stderr and one counted error; the traceback too under ``--debug``."""
    code = getattr(e, "code", None) if isinstance(e, GraphRecallError) else None
    code = code if isinstance(code, str) else "internal"
    message = " ".join(str(e).split()) or type(e).__name__
    if debug:
        traceback.print_exception(e, file=sys.stderr)
    print(f"graphrecall hook {event}: {code}: {message}", file=sys.stderr)
    state.record_error(root, event, code, message, scope)


def usage_failed(argv: list[str], message: str) -> int:
    """A malformed hook command line: counted like any other hook failure, and exit 0 (``cli.main``)."""
    root = default_root()
    if "--root" in argv and argv.index("--root") + 1 < len(argv):
        root = Path(argv[argv.index("--root") + 1]).expanduser()
    failed(root, argv[1] if len(argv) > 1 else "hook", InvalidInput(message, where="command line"))
    return EXIT_OK


def _scopes(args: argparse.Namespace, payload: HookInput) -> HookScopes:
    org = args.org or os.environ.get(ORG_ENV) or "local"
    user = args.user or os.environ.get(USER_ENV) or default_user()
    try:
        return scopes_for(org, user, payload.cwd)
    except ValueError as e:
        raise InvalidInput(str(e).splitlines()[-1], where="--org/--user") from None


def _run(args: argparse.Namespace, root: Path, stdin: str, scope: list[str]) -> str:
    payload = read_payload(stdin)
    scopes = _scopes(args, payload)
    scope.append(str(scopes.memory))

    added = 0

    def work(backend: events.Backend) -> str:
        nonlocal added
        if args.event == "session-start":
            return _agent_output(args, events.session_start(backend, scopes, payload, args.budget))
        if args.event == "prompt":
            return _agent_output(args, events.prompt(backend, scopes, payload, args.budget))
        added = events.ingest(backend, scopes, payload, root).messages_added
        return ""

    output, local_root = _on_server_or_here(args, work)
    if added and local_root:  # a session with new turns: its extraction is due (again)
        _queue_extraction(root, scopes.memory, events.session_id_of(payload))
    return output


def _on_server_or_here(args: argparse.Namespace, work: Callable[[events.Backend], str]) -> tuple[str, bool]:
    """``work`` through the server (``cli_remote.server_of``), else over a ``Memory`` here; and whether the
    store under ``--root`` is the one written (here, or a server that holds that root)."""
    from graphrecall.cli_remote import server_of

    server = server_of(args)
    if server is not None:
        from graphrecall.remote.client import NotReached, RemoteMemory

        try:
            with RemoteMemory(server, timeout=HOOK_TIMEOUT_S) as remote:
                return work(remote), server.discovered
        except NotReached:
            if not server.discovered:
                raise
    with open_memory(args) as mem:
        return work(_Local(mem)), True


class _Local:
    """A ``Memory`` in this process as a hook's backend."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    def call(self, op: Any, scope: Scope, p: Any) -> Any:
        return op.invoke(self.memory, scope, p)


def _agent_output(args: argparse.Namespace, text: str) -> str:
    """What Claude Code reads from a SessionStart or UserPromptSubmit hook: the text, or the same as
    ``hookSpecificOutput.additionalContext``; nothing at all when there is nothing to add."""
    if not text:
        return ""
    if args.plain:
        return text
    out = {"hookSpecificOutput": {"hookEventName": AGENT_EVENT[args.event], "additionalContext": text}}
    return json.dumps(out, ensure_ascii=False) + "\n"


def _queue_extraction(root: Path, scope: Scope, session_id: str) -> None:
    """With an LLM configured (``$GRAPHRECALL_LLM``), the session goes into the store's durable extraction queue
    (``extract.queue``) for a process that has the model (``Memory(llm=...)``, ``graphrecall extract``): the hook
    itself never waits for an LLM."""
    from graphrecall.llm.factory import ENV_SPEC

    if not os.environ.get(ENV_SPEC, "").strip():
        return
    from graphrecall.extract.queue import ExtractionQueue

    def never(scope: Scope, session_id: str) -> None:  # no workers: this process only enqueues
        raise RuntimeError("the hook's queue runs nothing")

    queue = ExtractionQueue(root, never, workers=0, start=False)
    try:
        queue.enqueue(scope, session_id)
    finally:
        queue.close()


def _install(args: argparse.Namespace) -> int:
    options: list[str] = []
    for flag, value in (
        ("--root", args.root),
        ("--org", args.org),
        ("--user", args.user),
        ("--url", args.url),
        ("--embedder", args.embedder),
    ):
        if value is not None:
            options += [flag, str(Path(value).expanduser().resolve()) if flag == "--root" else str(value)]
    if args.write is None:
        print_json(install.snippet(options))
        return EXIT_OK
    install.write(args.write.expanduser(), options)
    notice(f"hooks for {', '.join(install.EVENTS)} written into {args.write}")
    return EXIT_OK


def _errors(args: argparse.Namespace) -> int:
    counts = state.error_counts(root_of(args))
    if args.json:
        print_json(counts)
        return EXIT_OK
    if not counts["errors"]:
        print("no hook errors recorded")
        return EXIT_OK
    by_event = ", ".join(f"{k} {v}" for k, v in sorted(counts["by_event"].items()))
    by_code = ", ".join(f"{k} {v}" for k, v in sorted(counts["by_code"].items()))
    print(f"{counts['errors']} hook errors (by event: {by_event}; by code: {by_code})")
    last = counts["last"]
    print(f"last: {last.get('at')} {last.get('event')}: {last.get('code')}: {last.get('message')}")
    return EXIT_OK
