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
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphrecall import raymap
from graphrecall.cli_common import (
    EXIT_FAIL,
    EXIT_OK,
    CliError,
    add_llm_options,
    embedder_of,
    every_session,
    jsonable,
    llm_from_args,
    open_memory,
    print_json,
    progress,
    require_scope,
    root_of,
    scope_of,
)
from graphrecall.models import ExtractionResult, Scope

if TYPE_CHECKING:  # annotations only: Memory brings Kuzu, which the parser (--help) does not need
    from graphrecall.llm import LLM
    from graphrecall.memory import Memory


def register(
    sub: Any, *, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser, help: str
) -> None:
    """Add the ``extract`` subcommand to the main parser (its row in ``graphrecall.operations``)."""
    s = sub.add_parser("extract", parents=[common, as_json], help=help)
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


def run_extract(mem: Memory, scope: Scope, llm: LLM, *, session_id: str | None = None,
                quiet: bool = False) -> ExtractionResult:  # fmt: skip
    """Extract with a progress bar on stderr (sessions), using ``llm`` for this Memory."""
    mem.llm = llm
    todo = 1 if session_id else sum(1 for s in every_session(mem, scope) if s.extract_status != "done")
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
    embedder: str | None  # a spec (embed.spec); None: the configured one
    llm: str | None
    llm_base_url: str | None


class _ExtractWorker:
    """A worker's embedder and LLM client, built once and reused task after task. The store is opened per task
    and closed when it ends: a worker that kept a scope's database open would hold it after the run (Ray ends a
    job's workers some moments after the driver leaves), and the next command on that scope would find it busy."""

    def __init__(self, spec: ExtractSpec) -> None:
        from graphrecall.embed import Embedder
        from graphrecall.llm.factory import llm_from_settings
        from graphrecall.memory import Memory

        self.root = Path(spec.root)
        with Memory.open(self.root, embedder=spec.embedder) as mem:
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
                embedder=embedder_of(args),
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
