"""``graphrecall learn FILE...``: documents as memory (``Memory.add_document``, the ``add_document`` operation).

Every file is read and split here, in the process that has it (a PDF through pypdf: the ``pdf`` extra), and all of
them are checked before the first is stored: a missing, binary or empty file, or a type we do not read, stops the
command with the file named and nothing learned. Each document goes in under its path as given (``--source`` names
a single one otherwise), so running the same command again replaces the files that changed and leaves the others
alone. Through a running server the documents' text is sent (``POST .../documents``), and its LLM extracts when
``--extract`` asks; here, ``--extract`` extracts each learned document with ``--llm`` before the command returns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphrecall import operations as ops
from graphrecall import params
from graphrecall.cli_common import (
    EXIT_OK,
    CliError,
    add_llm_options,
    jsonable,
    llm_from_args,
    open_memory,
    print_json,
    scope_of,
)
from graphrecall.cli_remote import through_server
from graphrecall.errors import InvalidInput
from graphrecall.models import LearnedDocument, Scope

if TYPE_CHECKING:
    from graphrecall.remote.client import RemoteMemory

FLAGS = {"date": "--date", "source": "--source", "format": "--format"}


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the ``learn`` subcommand (its row in ``graphrecall.operations``); ``parents``: the common options, the
    scope, ``--json`` and the options of a command that can go through a server."""
    op = ops.ADD_DOCUMENT
    assert op.cli is not None
    s = sub.add_parser(op.cli.command, parents=parents, help=op.cli.help)
    s.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="Markdown (.md), plain text (.txt) or PDF"
    )
    fields = op.params.model_fields
    s.add_argument(
        "--source",
        help="the name to learn a single file under (default: its path as given); " + _help("source"),
    )
    s.add_argument(
        "--format",
        choices=("auto", "markdown", "text"),
        default="auto",
        help=f"{fields['format'].description} (default: auto; a PDF is always read as a PDF)",
    )
    s.add_argument("--date", metavar="DATE", help=_help("date"))
    s.add_argument("--extract", action="store_true", help=_help("extract"))
    s.add_argument("--quiet", action="store_true", help="no notes on stderr")
    add_llm_options(s)


def _help(name: str) -> str:
    return ops.ADD_DOCUMENT.params.model_fields[name].description or ""


def cmd_learn(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    if args.source is not None and len(args.files) > 1:
        raise CliError("--source names one document: give it one file", where="--source")
    documents = [_read(path, args) for path in args.files]  # all checked before any is stored

    def on_server(server: RemoteMemory) -> list[LearnedDocument]:
        out: list[LearnedDocument] = [server.call(ops.ADD_DOCUMENT, scope, p) for p in documents]
        return out

    served, got = through_server(args, on_server)
    learned = got if served and got is not None else _in_process(args, scope, documents)
    if args.json:
        print_json({"documents": [jsonable(d) for d in learned]})
        return EXIT_OK
    for path, d in zip(args.files, learned, strict=True):
        title = f" '{d.title}'" if d.title else ""
        what = {
            "added": f"added, {d.passages} passages",
            "replaced": f"replaced: {d.removed} passages out, {d.passages} in",
            "unchanged": f"unchanged ({d.passages} passages stored)",
        }[d.status]
        print(f"{path}{title} -> {scope} ({d.format}): {what}; session {d.session_id}")
        if d.extraction is not None:
            from graphrecall.cli_extract import summary

            print(f"  {summary(d.extraction)}")
        elif d.extraction_job is not None and not args.quiet:
            print(f"  extraction queued on the server ({d.extraction_job.status})", file=sys.stderr)
    return EXIT_OK


def _read(path: Path, args: argparse.Namespace) -> params.AddDocumentParams:
    """One file as the operation's parameters, every problem named by its file or flag (a file whose passages
    would be none too: the operation would refuse it, after the files before it were stored)."""
    from graphrecall.documents import read_document, split

    text, fmt = read_document(path, None if args.format == "auto" else args.format)
    if not split(text, fmt).passages:
        raise InvalidInput("holds no text besides its headings: nothing to learn", where=str(path))
    values = {
        "document": text,
        "source": args.source if args.source is not None else path.as_posix(),
        "format": fmt,
        "date": args.date,
        "extract": bool(args.extract),
    }
    try:
        p: params.AddDocumentParams = params.validate(ops.ADD_DOCUMENT.params, values)
    except InvalidInput as e:
        where = FLAGS.get(e.where, str(path))
        raise InvalidInput(str(e).removeprefix(f"{e.where}: "), where=where) from None
    return p


def _in_process(
    args: argparse.Namespace, scope: Scope, documents: list[params.AddDocumentParams]
) -> list[LearnedDocument]:
    """Learn here; with ``--extract``, extract each document that changed (or was never extracted) now."""
    # Checked reachable before anything is stored.
    llm = llm_from_args(args, "learn --extract") if args.extract else None
    out: list[LearnedDocument] = []
    with open_memory(args) as mem:
        for p in documents:
            d = mem.add_document(scope, p.document, source=p.source, format=p.format, date=p.date)
            if llm is not None and (d.status != "unchanged" or _not_extracted(mem, scope, d.session_id)):
                from graphrecall.cli_extract import run_extract

                done = run_extract(mem, scope, llm, session_id=d.session_id, quiet=args.quiet)
                d = d.model_copy(update={"extraction": done})
            out.append(d)
    return out


def _not_extracted(mem: Any, scope: Scope, session_id: str) -> bool:
    return bool(mem.get_session(scope, session_id).extract_status != "done")
