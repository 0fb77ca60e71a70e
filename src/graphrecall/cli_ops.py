"""The ``graphrecall`` subcommands of ``graphrecall.operations``: one per operation that declares ``cli``.

Each command's options are its parameter model's fields (``params.add_arguments``: the same names, defaults,
choices and bounds as the Python API, HTTP and MCP), plus the scope (``--org``/``--user``), ``--json`` and, for an
operation that can use a model, ``--llm``. Running one is the same for all: validate the options, open the store,
refuse a scope that holds nothing (a person typing an id made a typo; the error names the closest stored
scopes), call the ``Memory`` method, and print the operation's wire model (``--json``: exactly what HTTP answers)
or its text form (``RENDER``). Commands whose row says ``custom`` (files, several scopes) are written in
``cli.py``. When a server holds the root or one is configured (``cli_remote``), a command whose operation has an
HTTP route sends it there instead of opening the store, and prints the same.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphrecall import params
from graphrecall.cli_common import (
    EXIT_FAIL,
    EXIT_OK,
    CliError,
    add_llm_options,
    add_reranker_option,
    jsonable,
    llm_from_args,
    minute,
    open_memory,
    print_json,
    require_scope,
    scope_of,
    snippet,
)
from graphrecall.cli_remote import through_server
from graphrecall.docref import parse_location
from graphrecall.errors import NotAvailable, NotFound
from graphrecall.models import Scope
from graphrecall.operations import STATS, Operation, exposed
from graphrecall.params import AnswerParams, ContextParams, SearchParams

if TYPE_CHECKING:
    from graphrecall.remote.client import RemoteMemory

Render = Callable[[Scope, Any, Any], None]


def register(
    sub: Any, parents: list[argparse.ArgumentParser], client: argparse.ArgumentParser
) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add the table's generic commands and return their runners (``cli.py`` adds the custom ones). ``client``:
    the options of a command that can go through a server (``cli_remote``), for those served over HTTP."""
    commands: dict[str, Callable[[argparse.Namespace], int]] = {}
    for op in exposed("cli"):
        cli = op.cli
        assert cli is not None
        if cli.custom:
            continue
        chosen = parents if op.scoped else [p for i, p in enumerate(parents) if i != 1]  # no --org/--user
        remote = op.http is not None and op.scoped  # an organisation-level route runs in process
        s = sub.add_parser(cli.command, parents=[*chosen, client] if remote else chosen, help=cli.help)
        aliases = {k: list(v) for k, v in cli.aliases.items()}
        params.add_arguments(s, op.params, aliases=aliases)
        if cli.llm:
            add_llm_options(s)
        if cli.reranker:
            add_reranker_option(s)
        if cli.confirm:
            s.add_argument(
                "--yes", action="store_true", help="confirm (not needed with --dry-run): deleted for good"
            )
        commands[cli.command] = _runner(op)
    return commands


def _runner(op: Operation[Any]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        cli = op.cli
        assert cli is not None
        scope = scope_of(args) if op.scoped else None
        p = params.from_cli(op.params, args)
        if cli.confirm and not (getattr(p, "dry_run", False) or args.yes):
            raise CliError(f"refusing to {cli.command} from {scope} without --yes (see what would go with --dry-run)",
                           where="--yes")  # fmt: skip
        remote, result = (
            through_server(args, lambda server: _on_server(server, op, scope, p))
            if op.http is not None and scope is not None
            else (False, None)
        )
        if not remote:
            result = _in_process(args, op, scope, p)
        if args.json:
            print_json(jsonable(op.wire(scope, p, result)))  # type: ignore[arg-type]
        else:
            RENDER[op.name](scope, p, result)  # type: ignore[arg-type]
        return EXIT_OK

    return run


def _in_process(args: argparse.Namespace, op: Operation[Any], scope: Scope | None, p: Any) -> Any:
    cli = op.cli
    assert cli is not None
    llm = _llm(op, args)
    with open_memory(args) as mem:
        if scope is not None and cli.command not in WRITES_ANYWHERE:
            require_scope(mem, scope)
        if llm is not None and "llm" not in op.python_only:
            mem.llm = llm
        extras = {"llm": llm} if "llm" in op.python_only else {}
        return op.invoke(mem, scope, p, **extras)  # type: ignore[arg-type]  # None: an unscoped operation


def _on_server(server: RemoteMemory, op: Operation[Any], scope: Scope, p: Any) -> Any:
    """The operation on the server (its LLM and reranker, not ours). A read of a scope that holds nothing is a
    typo here as in process: operations that answer such a scope as empty are preceded by ``stats``, whose 404
    names the organisation's closest users."""
    cli = op.cli
    assert cli is not None
    if cli.command not in WRITES_ANYWHERE and op.unknown_scope != "not_found":
        try:
            server.call(STATS, scope, params.NoParams())
        except NotFound as e:
            raise CliError(str(e), EXIT_FAIL, error_code=NotFound.code, where="--user") from None
    return server.call(op, scope, p)


WRITES_ANYWHERE = {"add-fact"}
"""Commands that may create a scope (every other command on a scope that holds nothing is a typo)."""


def _llm(op: Operation[Any], args: argparse.Namespace) -> Any:
    """The model from ``--llm`` or ``GRAPHRECALL_LLM``, checked to be reachable; ``None`` when the command can do
    without one and none is configured. ``answer`` cannot: it says how to configure one, in the CLI's terms."""
    cli = op.cli
    if cli is None or not cli.llm:
        return None
    from graphrecall.llm.factory import ENV_SPEC

    configured = (args.llm or os.environ.get(ENV_SPEC, "")).strip()
    if configured:
        return llm_from_args(args, cli.command)
    if op.name == "answer":
        raise NotAvailable(
            f"answer needs an LLM: pass --llm provider:model (e.g. --llm openai:gpt-4o-mini) or set {ENV_SPEC}"
        )
    return None


# -- text forms -------------------------------------------------------------------------------------------------------
def _search(scope: Scope, p: SearchParams, hits: Any) -> None:
    if not hits:
        print(f"no hits for {p.query!r} in {scope}", file=sys.stderr)
    for h in hits:
        signals = " ".join(f"{k}={v:.3f}" for k, v in sorted(h.signals.items()))
        kind = "" if h.kind == "round" else f"{h.kind}  "
        where = h.session_id
        if h.document is not None:  # a learned document's passage: its source and headings, not its session
            where = "document " + " › ".join([h.document.source, *h.document.title_path])
        print(f"{h.rank:>3}. {h.score:.4f}  {minute(h.date)}  {kind}{where}  [{signals}]")
        found = parse_location(h.text) if h.document is not None else None
        print(f"     {snippet(h.text if found is None else found[2], query=p.query)}")


def _context(scope: Scope, p: ContextParams, ctx: Any) -> None:
    sys.stdout.write(ctx.text)
    note = f"{len(ctx.hits)} hits, {ctx.token_count}/{ctx.token_budget} tokens"
    print(f"({note}{', truncated' if ctx.truncated else ''})", file=sys.stderr)


def _profile(scope: Scope, p: Any, found: Any) -> None:
    sys.stdout.write(found.text)
    if not found.text:
        print(f"nothing known about {scope} yet (facts come from extraction or add-fact)", file=sys.stderr)
    elif found.truncated:
        print(
            f"({found.omitted} more left out: {found.token_count}/{found.token_budget} tokens)",
            file=sys.stderr,
        )


def _answer(scope: Scope, p: AnswerParams, ans: Any) -> None:
    print(ans.text)
    verdict = f", verifier {ans.verdict}" if ans.verdict else ""
    print(
        f"\nmode: {ans.mode} ({ans.question_type}), abstained: {'yes' if ans.abstained else 'no'}{verdict}, "
        f"{len(ans.tool_trace)} tool calls, {ans.usage.total_tokens} tokens, {ans.latency_s:.1f} s"
    )
    if ans.preferences:
        print("preferences used:")
        for pref in ans.preferences:
            print(f"  - {pref}")
    if ans.citations:
        print("evidence:")
        for c in ans.citations:
            print(f"  [{c.hit_id}] {minute(c.date)}  session {c.session_id}: {snippet(c.snippet, 120)}")


def _sessions(scope: Scope, p: Any, found: Any) -> None:
    for s in found:
        print(f"{minute(s.started_at)}  {s.id}  (extract: {s.extract_status})")
    if not found:
        print(f"no sessions in {scope}", file=sys.stderr)


def _session(scope: Scope, p: Any, s: Any) -> None:
    print(f"{minute(s.started_at)}  {s.id}  (extract: {s.extract_status})")
    for m in s.messages:
        print(f"  {minute(m.at)}  {m.role.value:<9} {snippet(m.content, 200)}")


def fact_line(f: Any) -> str:
    when = minute(f.valid_from)
    until = f" until {minute(f.valid_to)}" if f.valid_to else ""
    mark = "" if f.current else f"  [superseded by {f.superseded_by}]"
    neg = " (not)" if f.polarity == "negative" else ""
    key = f"  [key {f.key}]" if getattr(f, "key", None) else ""
    disputed = "  [disputed]" if getattr(f, "disputed_at", None) else ""
    return f"{f.id}  {when}{until}  {f.kind.value:<12} {f.text}{neg}{key}{disputed}{mark}"


def _facts(scope: Scope, p: Any, facts: Any) -> None:
    for f in facts:
        print(fact_line(f))
    if not facts:
        print(f"no facts for {scope}", file=sys.stderr)


def _supersede(scope: Scope, p: Any, old: Any) -> None:
    print(fact_line(old))


def _add_fact(scope: Scope, p: Any, r: Any) -> None:
    print(fact_line(r.fact))
    replaced = f"; replaces {r.superseded}" if r.superseded else ""
    print(f"({r.decision} by {r.decided_by}{replaced}: {r.reason})", file=sys.stderr)


def _feedback(scope: Scope, p: Any, r: Any) -> None:
    if r.kind == "fact":
        state = "disputed" if r.disputed else f"reinforced ({r.reinforcement} observations)"
        print(f"{r.id}  fact {state}")
    else:
        print(f"{r.id}  {r.kind} feedback {r.feedback:+d}")


def _entities(scope: Scope, p: Any, found: Any) -> None:
    for e in found:
        aliases = f"  (also: {', '.join(e.aliases)})" if e.aliases else ""
        print(f"{e.id}  {e.type:<12} {e.name}{aliases}")
    if not found:
        print(f"no entities for {scope}", file=sys.stderr)


def _events(scope: Scope, p: Any, found: Any) -> None:
    for e in found:
        until = f" to {minute(e.time_end)}" if e.time_end and e.time_end != e.time_start else ""
        print(f"{e.id}  {minute(e.time_start)}{until}  {e.text}")
    if not found:
        print(f"no events for {scope}", file=sys.stderr)


def _erase(scope: Scope, p: Any, e: Any) -> None:
    verb = "would erase" if e.dry_run else "erased"
    counts = ", ".join(
        f"{len(ids)} {name}"
        for name, ids in (
            ("sessions", e.sessions), ("messages", e.messages), ("rounds", e.rounds), ("facts", e.facts),
            ("events", e.events), ("entities", e.entities),
        )
    )  # fmt: skip
    print(f"{verb} from {e.scope}: {counts}")
    for item in e.items:  # the text of each, so a person reads what goes (a message goes whole)
        where = f", session {item.session_id}" if item.session_id and item.kind != "session" else ""
        whole = "  [the WHOLE message goes]" if item.beyond_match else ""
        print(f"  {item.kind} {item.id} ({item.reason}{where}){whole}")
        print(f"      {snippet(item.text, 300)}")
    if e.items_omitted:
        print(f"  ... and {e.items_omitted} more (--json lists every id)")
    for warning in e.warnings:
        print(f"note: {warning}", file=sys.stderr)


def _consolidate(scope: Scope, p: Any, r: Any) -> None:
    verb = "would " if r.dry_run else ""
    for x in r.merges:
        how = "into a new fact" if x.new_fact else f"into {x.kept_id}"
        print(f"{verb}merge {', '.join(x.superseded)} {how} ({x.decided_by}): {x.text}")
    for sep in r.kept_separate:
        print(f"kept apart {', '.join(sep.fact_ids)}: {sep.reason}")
    for link in r.event_links:
        print(f"{verb}link event {link.event_id} -> {link.entity_id} ({link.role})")
    for s in r.summaries:
        print(
            f"{verb}summarize {s.start:%Y-%m-%d}..{s.end:%Y-%m-%d} ({len(s.session_ids)} sessions): {s.text}"
        )
    for err in r.errors:
        print(f"left alone: {err}", file=sys.stderr)
    tail = f"; {r.deferred} deferred (max_llm_calls)" if r.deferred else ""
    print(
        f"{len(r.merges)} merges, {len(r.event_links)} event links, {len(r.summaries)} summaries"
        f"{' planned, nothing written' if r.dry_run else ''}; LLM: {r.llm_calls} calls, "
        f"{r.input_tokens} input + {r.output_tokens} output tokens{tail}",
        file=sys.stderr,
    )


def _size(n: int) -> str:
    return f"{n / 1e3:.0f} KB" if n < 1e6 else f"{n / 1e6:.1f} MB"


def _scopes(scope: Scope | None, p: Any, page: Any) -> None:
    for x in page.scopes:
        print(
            f"{x.scope.user_id:<24} {x.sessions:>6} sessions {x.rounds:>7} rounds {x.facts:>6} facts "
            f"{_size(x.disk_bytes):>9}  last write {minute(x.last_write)}  backlog {x.backlog}"
            f"{f', {x.failed} failed' if x.failed else ''}"
        )
    shown = f"{p.offset + 1}-{p.offset + len(page.scopes)}" if page.scopes else "none"
    print(f"({shown} of {page.total} users in {page.org_id})", file=sys.stderr)


def _graph(scope: Scope, p: Any, g: Any) -> None:
    names = {n.id: n.label for n in g.nodes}
    for n in g.nodes:
        print(f"{n.kind:<7} {n.id}  {n.label}")
    for e in g.edges:
        label = f" ({e.label})" if e.label else ""
        print(f"  {names.get(e.source, e.source)} -{e.kind}{label}-> {names.get(e.target, e.target)}")
    if g.more:
        print("(more facts or events beyond this page: --offset)", file=sys.stderr)


def _jobs(scope: Scope, p: Any, q: Any) -> None:
    for j in q.jobs:
        why = f"  {j.reason}" if j.reason else ""
        print(f"{minute(j.updated_at)}  {j.status:<8} {j.session_id}  attempts {j.attempts}{why}")
    print(", ".join(f"{n} {k}" for k, n in q.counts.items()), file=sys.stderr)


def _retry(scope: Scope, p: Any, n: int) -> None:
    print(f"queued {n} failed extraction(s) of {scope} again")


RENDER: dict[str, Render] = {
    "search": _search,
    "context": _context,
    "profile": _profile,
    "answer": _answer,
    "sessions": _sessions,
    "get_session": _session,
    "facts": _facts,
    "history": _facts,
    "supersede": _supersede,
    "add_fact": _add_fact,
    "feedback": _feedback,
    "consolidate": _consolidate,
    "entities": _entities,
    "events": _events,
    "erase": _erase,
    "list_scopes": _scopes,
    "graph": _graph,
    "extraction_queue": _jobs,
    "retry_extraction": _retry,
}
"""The text form of each generic command's result (``--json`` prints the wire model instead)."""
