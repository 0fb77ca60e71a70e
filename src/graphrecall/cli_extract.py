"""CLI commands for extracted memory: ``extract``, ``facts``, and the LLM part of ``ingest --extract``.

Kept apart from ``cli.py`` (which registers these through ``register``) so the extraction commands evolve with
the extraction code; both build on ``cli_common`` and neither imports the other's helpers. The LLM comes from
``--llm provider:model`` / ``--llm-base-url``, else from ``GRAPHRECALL_LLM`` / ``GRAPHRECALL_LLM_BASE_URL``
(docs/llm.md).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from graphrecall import params
from graphrecall.cli_common import (
    EXIT_FAIL,
    EXIT_OK,
    add_llm_options,
    jsonable,
    llm_from_args,
    minute,
    open_memory,
    positive_int,
    print_json,
    progress,
    require_scope,
    scope_of,
)
from graphrecall.models import ExtractionResult, Fact, Scope

if TYPE_CHECKING:  # annotations only: Memory brings Kuzu, which the parser (--help) does not need
    from graphrecall.llm import LLM
    from graphrecall.memory import Memory


def register(sub: Any, *, common: argparse.ArgumentParser, scope: argparse.ArgumentParser,
             as_json: argparse.ArgumentParser) -> None:  # fmt: skip
    """Add the ``extract`` and ``facts`` subcommands to the main parser."""
    s = sub.add_parser(
        "extract", parents=[common, scope, as_json], help="extract facts/events/entities from stored sessions"
    )
    s.add_argument("--session", help="only this session (re-extracted whatever its status)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_options(s)
    s = sub.add_parser("facts", parents=[common, scope, as_json], help="list extracted facts")
    params.add_arguments(s, params.FactsParams, aliases={"include_superseded": ["--all"]})
    s = sub.add_parser(
        "profile",
        parents=[common, scope, as_json],
        help="the user's current facts by kind, for a system prompt",
    )
    params.add_arguments(s, params.ProfileParams, aliases={"token_budget": ["--budget"]})
    s = sub.add_parser(
        "add-fact",
        parents=[common, scope, as_json],
        help="store a fact the application knows (versioned by the LLM when one is configured, else by rule)",
    )
    params.add_arguments(s, params.AddFactParams, aliases={"entities": ["--entity"]})
    add_llm_options(s)
    s = sub.add_parser(
        "consolidate",
        parents=[common, scope, as_json],
        help="merge duplicate facts, link events to entities, summarize old periods (--dry-run: plan only)",
    )
    params.add_arguments(s, params.ConsolidateParams)
    add_llm_options(s)
    s = sub.add_parser(
        "history", parents=[common, scope, as_json], help="the versions of one fact, oldest first"
    )
    s.add_argument("fact_id", help="a fact id, as `graphrecall facts` prints it")
    sub.add_parser(
        "entities", parents=[common, scope, as_json], help="list extracted entities and their aliases"
    )
    s = sub.add_parser("events", parents=[common, scope, as_json], help="list extracted events in time order")
    s.add_argument("--limit", type=positive_int, default=1000, help="at most this many events")


def run_extract(mem: Memory, scope: Scope, llm: LLM, *, session_id: str | None = None,
                quiet: bool = False) -> ExtractionResult:  # fmt: skip
    """Extract with a progress bar on stderr (sessions), using ``llm`` for this Memory."""
    mem.llm = llm
    todo = 1 if session_id else sum(1 for s in mem.sessions(scope, limit=10**9) if s.extract_status != "done")
    with progress(todo, quiet=quiet) as bar:
        last = [0]

        def tick(done: int, total: int) -> None:
            bar(done - last[0])
            last[0] = done

        return mem.extract(scope, session_id=session_id, progress=tick)


def summary(r: ExtractionResult) -> str:
    """The one-line report of an extraction, with its LLM cost."""
    line = (
        f"extract: {r.sessions_done}/{r.sessions} sessions done, {r.sessions_failed} failed; "
        f"{r.facts_added} facts (+{r.facts_reinforced} reinforced, {r.facts_superseded} superseded), "
        f"{r.events_added} events, {r.entities_added} entities; {r.items_dropped} items dropped; "
        f"LLM: {r.llm_calls} calls, {r.input_tokens} input + {r.output_tokens} output tokens"
    )
    if r.cost_usd:
        line += f" (${r.cost_usd:.4f})"
    return line


def cmd_extract(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    llm = llm_from_args(args, "extraction")
    with open_memory(args) as mem:
        require_scope(mem, scope)
        r = run_extract(mem, scope, llm, session_id=args.session, quiet=args.quiet)
    if args.json:
        print_json(jsonable(r))
    else:
        print(summary(r))
        for sid, err in r.errors.items():
            print(f"  failed {sid}: {err}", file=sys.stderr)
    return EXIT_FAIL if r.sessions and r.sessions_failed == r.sessions else EXIT_OK


def _fact_line(f: Fact) -> str:
    when = minute(f.valid_from)
    until = f" until {minute(f.valid_to)}" if f.valid_to else ""
    mark = "" if f.current else f"  [superseded by {f.superseded_by}]"
    neg = " (not)" if f.polarity == "negative" else ""
    return f"{f.id}  {when}{until}  {f.kind.value:<12} {f.text}{neg}{mark}"


def cmd_facts(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    p = params.from_cli(params.FactsParams, args)
    with open_memory(args) as mem:
        require_scope(mem, scope)
        facts = mem.facts(
            scope, as_of=p.as_of, include_superseded=p.include_superseded, limit=p.limit, offset=p.offset
        )
    if args.json:
        print_json([jsonable(f) for f in facts])
    else:
        for f in facts:
            print(_fact_line(f))
        if not facts:
            print(f"no facts for {scope}", file=sys.stderr)
    return EXIT_OK


def cmd_profile(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    p = params.from_cli(params.ProfileParams, args)
    with open_memory(args) as mem:
        require_scope(mem, scope)
        found = mem.profile(scope, p.as_of, p.token_budget)
    if args.json:
        print_json(jsonable(found))
        return EXIT_OK
    sys.stdout.write(found.text)
    if not found.text:
        print(f"nothing known about {scope} yet (facts come from extraction or add-fact)", file=sys.stderr)
    elif found.truncated:
        print(
            f"({found.omitted} more left out: {found.token_count}/{found.token_budget} tokens)",
            file=sys.stderr,
        )
    return EXIT_OK


def cmd_add_fact(args: argparse.Namespace) -> int:
    """With ``--llm`` (or ``GRAPHRECALL_LLM``) the LLM makes the versioning decision, as for extraction; without
    either, the rule does (no model is contacted)."""
    scope = scope_of(args)
    p = params.from_cli(params.AddFactParams, args)
    from graphrecall.llm.factory import ENV_SPEC

    configured = args.llm or os.environ.get(ENV_SPEC, "").strip()
    llm = llm_from_args(args, "add-fact") if configured else None
    with open_memory(args) as mem:
        mem.llm = llm
        r = mem.add_fact(
            scope, p.text, kind=p.kind, entities=p.entities or [], valid_from=p.valid_from, source=p.source
        )
    if args.json:
        print_json(jsonable(r))
        return EXIT_OK
    print(_fact_line(r.fact))
    replaced = f"; replaces {r.superseded}" if r.superseded else ""
    print(f"({r.decision} by {r.decided_by}{replaced}: {r.reason})", file=sys.stderr)
    return EXIT_OK


def cmd_consolidate(args: argparse.Namespace) -> int:
    """With ``--llm`` (or ``GRAPHRECALL_LLM``) one call per cluster of similar facts decides whether to merge,
    and ``--summaries`` is possible; without, only the same or near-identical facts merge (no model contacted)."""
    scope = scope_of(args)
    p = params.from_cli(params.ConsolidateParams, args)
    from graphrecall.llm.factory import ENV_SPEC

    configured = args.llm or os.environ.get(ENV_SPEC, "").strip()
    llm = llm_from_args(args, "consolidate") if configured else None
    with open_memory(args) as mem:
        require_scope(mem, scope)
        r = mem.consolidate(scope, dry_run=p.dry_run, summaries=p.summaries, llm=llm)
    if args.json:
        print_json(jsonable(r))
        return EXIT_OK
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
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    with open_memory(args) as mem:
        require_scope(mem, scope)
        chain = mem.history(scope, args.fact_id)  # NotFound (exit 1) names the fact when it is not stored
    if args.json:
        print_json([jsonable(f) for f in chain])
    else:
        for f in chain:
            print(_fact_line(f))
    return EXIT_OK


def cmd_entities(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    with open_memory(args) as mem:
        require_scope(mem, scope)
        found = mem.entities(scope)
    if args.json:
        print_json([jsonable(e) for e in found])
        return EXIT_OK
    for e in found:
        aliases = f"  (also: {', '.join(e.aliases)})" if e.aliases else ""
        print(f"{e.id}  {e.type:<12} {e.name}{aliases}")
    if not found:
        print(f"no entities for {scope}", file=sys.stderr)
    return EXIT_OK


def cmd_events(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    with open_memory(args) as mem:
        require_scope(mem, scope)
        found = mem.events(scope, limit=args.limit)
    if args.json:
        print_json([jsonable(e) for e in found])
        return EXIT_OK
    for e in found:
        until = f" to {minute(e.time_end)}" if e.time_end and e.time_end != e.time_start else ""
        print(f"{e.id}  {minute(e.time_start)}{until}  {e.text}")
    if not found:
        print(f"no events for {scope}", file=sys.stderr)
    return EXIT_OK


COMMANDS = {
    "extract": cmd_extract,
    "facts": cmd_facts,
    "profile": cmd_profile,
    "add-fact": cmd_add_fact,
    "consolidate": cmd_consolidate,
    "history": cmd_history,
    "entities": cmd_entities,
    "events": cmd_events,
}
