"""CLI commands for extracted memory: ``extract``, ``facts``, and the LLM part of ``ingest --extract``.

Kept apart from ``cli.py`` (which registers these through ``register``) so the extraction commands evolve with
the extraction code. The LLM comes from ``--llm provider:model`` / ``--llm-base-url``, else from
``GRAPHRECALL_LLM`` / ``GRAPHRECALL_LLM_BASE_URL`` (docs/llm.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphrecall import params
from graphrecall.errors import NotAvailable
from graphrecall.llm import LLM, LLMError, llm_from_settings
from graphrecall.memory import Memory
from graphrecall.models import ExtractionResult, Fact, Scope


def add_llm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", help="provider:model, e.g. openai:gpt-4o-mini (default: $GRAPHRECALL_LLM)")
    p.add_argument("--llm-base-url", help="OpenAI-compatible server URL (default: $GRAPHRECALL_LLM_BASE_URL)")


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


def llm_from_args(args: argparse.Namespace) -> LLM:
    """The configured LLM, or a usage error that says how to configure one."""
    try:
        return llm_from_settings(getattr(args, "llm", None), getattr(args, "llm_base_url", None))
    except LLMError as e:  # not configured, malformed spec, missing SDK key...
        raise NotAvailable(f"extraction needs an LLM: {e}") from None


def run_extract(mem: Memory, scope: Scope, llm: LLM, *, session_id: str | None = None,
                quiet: bool = False) -> ExtractionResult:  # fmt: skip
    """Extract with a progress bar on stderr (sessions), using ``llm`` for this Memory."""
    from graphrecall.cli import _progress

    mem.llm = llm
    todo = 1 if session_id else sum(1 for s in mem.sessions(scope, limit=10**9) if s.extract_status != "done")
    with _progress(todo, quiet=quiet) as bar:
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
    from graphrecall.cli import EXIT_FAIL, EXIT_OK, _jsonable, _memory, _print_json, _scope

    scope = _scope(args)
    llm = llm_from_args(args)
    with _memory(args) as mem:
        r = run_extract(mem, scope, llm, session_id=args.session, quiet=args.quiet)
    if args.json:
        _print_json(_jsonable(r))
    else:
        print(summary(r))
        for sid, err in r.errors.items():
            print(f"  failed {sid}: {err}", file=sys.stderr)
    return EXIT_FAIL if r.sessions and r.sessions_failed == r.sessions else EXIT_OK


def _fact_line(f: Fact) -> str:
    when = f.valid_from.strftime("%Y-%m-%d") if f.valid_from else "?"
    until = f" until {f.valid_to:%Y-%m-%d}" if f.valid_to else ""
    mark = "" if f.current else f"  [superseded by {f.superseded_by}]"
    neg = " (not)" if f.polarity == "negative" else ""
    return f"{f.id}  {when}{until}  {f.kind.value:<12} {f.text}{neg}{mark}"


def cmd_facts(args: argparse.Namespace) -> int:
    from graphrecall.cli import EXIT_OK, _jsonable, _memory, _print_json, _scope

    scope = _scope(args)
    p = params.from_cli(params.FactsParams, args)
    with _memory(args) as mem:
        facts = mem.facts(
            scope, as_of=p.as_of, include_superseded=p.include_superseded, limit=p.limit, offset=p.offset
        )
    if args.json:
        _print_json([_jsonable(f) for f in facts])
    else:
        for f in facts:
            print(_fact_line(f))
        if not facts:
            print(f"no facts for {scope}", file=sys.stderr)
    return EXIT_OK


COMMANDS = {"extract": cmd_extract, "facts": cmd_facts}
