"""What every ``graphrecall`` subcommand shares: exit codes, the usage error, opening the store and the scope, the
LLM from ``--llm``, progress bars and the way dates and JSON are printed.

``cli.py`` (the parser and the core commands) and ``cli_extract.py`` (the extraction commands) both build on this
module and import nothing from each other's private parts, so neither has to be loaded to change the other.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from graphrecall.config import default_root
from graphrecall.errors import ConfigurationError, InvalidInput, NotAvailable, NotFound
from graphrecall.models import Scope, Session
from graphrecall.operations import missing_scope
from graphrecall.params import MAX_LISTED

if TYPE_CHECKING:
    from graphrecall.llm import LLM
    from graphrecall.memory import Memory

PROG = "graphrecall"
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_BUSY, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
LLM_CONNECT_TIMEOUT_S = 3.0
SNIPPET_CHARS = 160


class CliError(Exception):
    """A problem the user must fix, reported as one line with a chosen exit code and a stable ``error_code``
    (the same names as the HTTP API's error codes where one fits)."""

    def __init__(
        self, message: str, code: int = EXIT_USAGE, *, error_code: str = "invalid_input", where: str = ""
    ) -> None:
        super().__init__(message)
        self.code = code
        self.error_code = error_code
        self.where = where


def whole_number(text: str, minimum: int) -> int:
    """``text`` as a whole number of at least ``minimum``, else argparse's usage error naming the value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type for counts and limits: a whole number of at least 1, else a usage error naming the value."""
    return whole_number(text, 1)


def positive_int_list(text: str) -> list[int]:
    """argparse type for comma-separated sizes ("60,250,1000"): each a whole number of at least 1."""
    values = [positive_int(x.strip()) for x in text.split(",") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError("give at least one number, comma-separated")
    return values


def non_negative_int(text: str) -> int:
    """argparse type for retry counts and offsets: a whole number of at least 0."""
    return whole_number(text, 0)


# -- store and scope -------------------------------------------------------------------------------------------------
def root_of(args: argparse.Namespace) -> Path:
    root: Path | None = args.root
    return (root if root is not None else default_root()).expanduser()


def embedder_of(args: argparse.Namespace) -> str | None:
    """The embedder spec given with ``--embedder`` (``embed.spec``), or ``None``: ``$GRAPHRECALL_EMBEDDER``, else
    the bundled MiniLM. A spec, not an embedder: ``Memory`` builds it, and nothing loads until something embeds."""
    spec: str | None = getattr(args, "embedder", None)
    return None if spec in (None, "", "default") else spec


def reranker_of(args: argparse.Namespace) -> str | None:
    """The reranker spec given with ``--reranker`` (``retrieve.rerank.load_reranker``), or ``None``:
    ``$GRAPHRECALL_RERANKER``, else none."""
    spec: str | None = getattr(args, "reranker", None)
    return spec.strip() if spec and spec.strip() else None


def add_reranker_option(p: argparse.ArgumentParser) -> None:
    from graphrecall.config import RERANKER_HELP

    p.add_argument("--reranker", default=None, metavar="SPEC", help=RERANKER_HELP)


@contextlib.contextmanager
def open_memory(args: argparse.Namespace) -> Iterator[Memory]:
    from graphrecall.memory import Memory

    with Memory.open(root_of(args), embedder=embedder_of(args), reranker=reranker_of(args)) as mem:
        yield mem


def scope_of(args: argparse.Namespace) -> Scope:
    try:
        return Scope(org_id=args.org, user_id=args.user)
    except ValidationError as e:
        first = e.errors()[0]
        flag = {"org_id": "--org", "user_id": "--user"}.get(str(first["loc"][0]), "scope")
        raise InvalidInput(first["msg"].removeprefix("Value error, "), where=flag) from None


def require_scope(mem: Memory, scope: Scope) -> None:
    """A read of a scope that holds nothing is almost always a typo: say so (``not_found``, exit 1) and name the
    stored scopes that look closest, instead of printing an empty result that reads like "no memory"."""
    known = mem.scopes()
    if scope in known:
        return
    error = missing_scope(
        scope,
        known,
        where=f" under {mem.root}",
        org_only=False,
        listed=f" (graphrecall stats --root {mem.root} lists them)",
        empty=" (graphrecall ingest adds sessions)",
    )
    raise CliError(str(error), EXIT_FAIL, error_code=NotFound.code, where="--user")


def every_session(mem: Memory, scope: Scope) -> Iterator[Session]:
    """Every session of a scope without its messages, a page (the operation's largest) at a time."""
    offset = 0
    while True:
        page = mem.sessions(scope, limit=MAX_LISTED, offset=offset)
        yield from page
        if len(page) < MAX_LISTED:
            return
        offset += len(page)


# -- LLM -------------------------------------------------------------------------------------------------------------
def add_llm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm", help="provider:model, e.g. openai:gpt-4o-mini (default: $GRAPHRECALL_LLM)")
    p.add_argument(
        "--llm-base-url",
        help="OpenAI-compatible server or Ollama host (default: $GRAPHRECALL_LLM_BASE_URL)",
    )


def llm_from_args(args: argparse.Namespace, purpose: str) -> LLM:
    """The LLM from ``--llm``/``--llm-base-url`` or the environment, checked to be reachable.

    Every way this can fail is a named error before any store is opened: nothing configured (``NotAvailable``),
    a spec, provider or key that cannot be used (``ConfigurationError``), a provider SDK that is not installed
    (``NotAvailable``), nothing listening at the URL (``Unreachable``, within a few seconds)."""
    from graphrecall.llm import LLMError, LLMNotConfigured
    from graphrecall.llm.factory import ENV_SPEC, check_reachable, endpoint, llm_from_settings

    spec: str | None = getattr(args, "llm", None)
    base_url: str | None = getattr(args, "llm_base_url", None)
    where = "--llm" if spec else ENV_SPEC
    if not (spec if spec is not None else os.environ.get(ENV_SPEC, "")).strip():
        raise NotAvailable(
            f"{purpose} needs an LLM: pass --llm provider:model (e.g. --llm openai:gpt-4o-mini) or set {ENV_SPEC}"
        )
    try:
        llm = llm_from_settings(spec, base_url)
        url = endpoint(spec, base_url)
    except LLMNotConfigured as e:  # the provider's own settings are incomplete, e.g. no API key
        raise ConfigurationError(str(e), where=where) from None
    except LLMError as e:  # malformed spec, unknown provider
        raise ConfigurationError(str(e), where=where) from None
    except ImportError as e:
        raise NotAvailable(str(e)) from None
    check_reachable(url, timeout=LLM_CONNECT_TIMEOUT_S)
    return llm


# -- output ----------------------------------------------------------------------------------------------------------
def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def minute(d: datetime | None) -> str:
    """Dates in human output: to the minute; seconds and microseconds are noise to a person reading a list."""
    return d.strftime("%Y-%m-%d %H:%M") if d else "?"


def snippet(text: str, limit: int = SNIPPET_CHARS, query: str | None = None) -> str:
    """``text`` on one line, cut to ``limit``: its opening, or with a ``query`` the sentences that share the most
    of its words (a long round matched by a detail deep inside shows that detail, not its first lines)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    if query is not None:
        # Here, not at the top: ``graphrecall.retrieve`` brings Kuzu and NumPy, which ``--help`` does not need.
        from graphrecall.retrieve.excerpt import excerpt, question_terms

        return " ".join(excerpt(text, question_terms(query), limit).split())
    return flat[: limit - 1].rstrip() + "…"


def notice(message: str) -> None:
    """A note for the person at the terminal (stderr, so it never mixes with data on stdout)."""
    print(f"{PROG}: {message}", file=sys.stderr)


@contextlib.contextmanager
def progress(total: int, *, quiet: bool) -> Iterator[Any]:
    """A tqdm bar on stderr, only for a person watching a terminal."""
    if quiet or not sys.stderr.isatty():
        yield lambda n: None
        return
    from tqdm import tqdm

    with tqdm(total=total, unit="session", file=sys.stderr, dynamic_ncols=True) as bar:
        yield bar.update
