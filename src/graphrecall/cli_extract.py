"""CLI commands for extracted memory: ``extract``, ``facts``, and the LLM part of ``ingest --extract``.

Kept apart from ``cli.py`` (which registers these through ``register``) so the extraction commands evolve with
the extraction code; both build on ``cli_common`` and neither imports the other's helpers. The LLM comes from
``--llm provider:model`` / ``--llm-base-url``, else from ``GRAPHRECALL_LLM`` / ``GRAPHRECALL_LLM_BASE_URL``
(docs/llm.md).

``extract`` takes one scope (``--org``/``--user``) or many (``--all-scopes``, ``--scopes FILE``); many scopes run one
after another here, or as Ray tasks with ``--ray [ADDRESS]`` (``graphrecall.raymap``), each task opening the root
itself. A rerun is resumable either way: extraction marks each session done, so only what is left runs again.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphrecall import params, raymap
from graphrecall.cli_common import (
    EXIT_FAIL,
    EXIT_OK,
    CliError,
    add_llm_options,
    jsonable,
    llm_from_args,
    minute,
    open_memory,
    positive_int,
    print_json,
    progress,
    require_scope,
    root_of,
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
        "extract", parents=[common, as_json], help="extract facts/events/entities from stored sessions"
    )
    s.add_argument("--org", help="organisation id (alone with --all-scopes: that organisation's scopes)")
    s.add_argument("--user", help="user id (one scope, with --org)")
    s.add_argument(
        "--all-scopes",
        action="store_true",
        help="every scope under --root (or of --org), each in turn or a Ray task",
    )
    s.add_argument(
        "--scopes", metavar="FILE", help="the scopes listed in FILE, one org/user per line ('-': stdin)"
    )
    s.add_argument("--session", help="only this session (re-extracted whatever its status; one scope only)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    add_llm_options(s)
    raymap.add_ray_arguments(s, what="scopes (with --all-scopes or --scopes)")
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


def _many_scopes(args: argparse.Namespace) -> bool:
    """Whether ``extract`` was asked for many scopes; refuses the combinations that mean nothing."""
    many = bool(args.all_scopes or args.scopes)
    if args.all_scopes and args.scopes:
        raise CliError("give --all-scopes or --scopes, not both", where="--scopes")
    if many and args.user is not None:
        raise CliError("--user names one scope; leave it out with --all-scopes or --scopes", where="--user")
    if many and args.session:
        raise CliError("--session needs one scope (--org and --user)", where="--session")
    if not many:
        if args.org is None or args.user is None:
            raise CliError("extract needs --org and --user, or --all-scopes or --scopes FILE", where="--user")
        if args.ray is not None:
            raise CliError("--ray runs many scopes: add --all-scopes or --scopes FILE", where="--ray")
    if args.scopes and args.org is not None:
        raise CliError("--org filters --all-scopes only; the --scopes file names whole scopes", where="--org")
    return many


def _read_scopes(source: str) -> list[Scope]:
    """``org/user`` lines (blank lines and ``#`` comments skipped), each checked as a scope, duplicates once."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    found: list[Scope] = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        org, sep, user = line.partition("/")
        try:
            if not sep:
                raise ValueError("expected org/user")
            found.append(Scope(org_id=org, user_id=user))
        except ValueError as e:  # pydantic's ValidationError is a ValueError
            raise CliError(f"{source} line {n}: {line!r} is not a scope ({e})", where="--scopes") from None
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class ExtractSpec:
    """What a Ray task needs to extract one scope, as plain values: the store root (every node must see it at this
    path: a shared file system), the embedder and the LLM spec (API keys travel in the workers' environment)."""

    root: str
    embedder: str
    llm: str | None
    llm_base_url: str | None


class _ExtractWorker:
    """A worker's embedder and LLM client, built once and reused task after task. The store is opened per task
    and closed when it ends: a worker that kept a scope's database open would hold it after the run (Ray ends a
    job's workers some moments after the driver leaves), and the next command on that scope would find it busy."""

    def __init__(self, spec: ExtractSpec) -> None:
        from graphrecall.embed import Embedder, HashingEmbedder
        from graphrecall.llm.factory import llm_from_settings
        from graphrecall.memory import Memory

        self.root = Path(spec.root)
        with Memory.open(
            self.root, embedder=HashingEmbedder(64) if spec.embedder == "hashing" else None
        ) as mem:
            self.embedder: Embedder = (
                mem.embedder
            )  # the store's own choice (the default model, its cache file)
        self.llm = llm_from_settings(spec.llm, spec.llm_base_url)

    def extract(self, scope: Scope) -> ExtractionResult:
        from graphrecall.memory import Memory

        with Memory.open(self.root, embedder=self.embedder) as mem:
            mem.llm = self.llm
            return mem.extract(scope)


def extract_scope_task(spec: ExtractSpec, scope: Scope) -> ExtractionResult:
    """One scope's extraction on a Ray worker."""
    return raymap.worker_state(("extract", spec), lambda: _ExtractWorker(spec)).extract(scope)


def cmd_extract_many(args: argparse.Namespace) -> int:
    """Extract every listed scope; a scope that fails is reported and the others go on. One line per scope as it
    finishes (with ``--json``: one JSON list at the end); exit 1 when any scope failed."""
    ray = raymap.options_from_args(args)  # --ray without Ray installed: not_available (exit 2), nothing run
    llm = llm_from_args(args, "extraction")  # checked (reachable) before anything runs
    with open_memory(args) as mem:
        if args.scopes:
            scopes = _read_scopes(args.scopes)
        else:
            scopes = [s for s in mem.scopes() if args.org is None or s.org_id == args.org]
        if not scopes:
            raise CliError(
                f"no scopes to extract under {mem.root}" + (f" for org {args.org}" if args.org else ""),
                EXIT_FAIL,
                error_code="not_found",
            )
        known = set(mem.scopes())
        missing = [str(s) for s in scopes if s not in known]
        if missing:
            raise CliError(
                f"{len(missing)} listed scope(s) hold nothing under {mem.root}: {', '.join(missing[:5])}",
                EXIT_FAIL,
                error_code="not_found",
                where="--scopes",
            )
        if ray is None:
            mem.llm = llm
            outcomes = list(
                _report(raymap.run_map(mem.extract, scopes, desc="scopes", progress=_bar(args)), args)
            )
        else:
            spec = ExtractSpec(
                root=str(root_of(args).resolve()),
                embedder=args.embedder,
                llm=args.llm,
                llm_base_url=args.llm_base_url,
            )
    if ray is not None:  # the driver's store is closed: workers on this machine open the same root
        work = partial(extract_scope_task, spec)
        outcomes = list(
            _report(raymap.run_map(work, scopes, ray=ray, desc="scopes", progress=_bar(args)), args)
        )
    if args.json:
        print_json(
            [
                {"scope": str(o.item), **({"result": jsonable(o.value)} if o.ok else {"error": o.error})}
                for o in outcomes
            ]
        )
    failed = [
        o for o in outcomes if not o.ok or (o.value and o.value.sessions_failed == o.value.sessions > 0)
    ]
    return EXIT_FAIL if failed else EXIT_OK


def _bar(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _report(
    outcomes: Iterable[raymap.Outcome[Scope, ExtractionResult]], args: argparse.Namespace
) -> Iterator[raymap.Outcome[Scope, ExtractionResult]]:
    """Print each scope's summary line as it arrives (not under ``--json``), passing the outcomes on."""
    for o in outcomes:
        if not args.json:
            if o.value is not None:
                print(f"{o.item}: {summary(o.value)}", flush=True)
                for sid, err in o.value.errors.items():
                    print(f"  {o.item} failed {sid}: {err}", file=sys.stderr)
            else:
                print(f"{o.item}: failed: {o.error}", file=sys.stderr, flush=True)
        yield o


def cmd_extract(args: argparse.Namespace) -> int:
    if _many_scopes(args):
        return cmd_extract_many(args)
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
