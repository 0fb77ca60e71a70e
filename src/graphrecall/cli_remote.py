"""Commands through a running server: the options (``--url``, ``--api-key-file``, ``--local``) and the one way a
command runs its operations on the server that ``remote.connect`` chooses.

Why: while ``graphrecall serve`` holds a root, a command that opens the store itself fails with ``store_busy``,
and every command that embeds loads the model (10-19 s on a loaded machine). Through the server the command gets
the same output with neither. A command whose operation has no HTTP route (``reembed``, ``import``, ``extract``...)
still opens the store itself.

Options that choose what runs in this process (``--embedder``, ``--reranker``, ``--llm``, ``--llm-base-url``) do not
travel: the server uses its own, and the command says once on stderr that it ignored them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from graphrecall.cli_common import notice, root_of

if TYPE_CHECKING:
    from graphrecall.remote.client import RemoteMemory, Server

T = TypeVar("T")
LOCAL_ONLY = ("embedder", "reranker", "llm", "llm_base_url")


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url",
        default=None,
        help="send the command to the graphrecall server at this URL (default: $GRAPHRECALL_URL, else the server "
        "that holds --root, if one does)",
    )
    p.add_argument(
        "--api-key-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="file holding the API key for --url (default: $GRAPHRECALL_API_KEY)",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="open the store in this process even when a server holds it or one is configured",
    )


def server_of(args: argparse.Namespace) -> Server | None:
    """The server this command's operations go to, or ``None`` (``remote.connect.choose_server``)."""
    from graphrecall.remote.connect import choose_server

    return choose_server(
        root_of(args),
        url=getattr(args, "url", None),
        key_file=getattr(args, "api_key_file", None),
        local=bool(getattr(args, "local", False)),
    )


def through_server(args: argparse.Namespace, run: Callable[[RemoteMemory], T]) -> tuple[bool, T | None]:
    """``(True, run(remote))`` when a server takes this command, ``(False, None)`` when the command should open
    the store itself: no server, or a discovered one where nothing answers (``NotReached``: nothing was sent)."""
    server = server_of(args)
    if server is None:
        return False, None
    from graphrecall.remote.client import NotReached, RemoteMemory

    _ignored_options(args, server)
    try:
        with RemoteMemory(server) as remote:
            return True, run(remote)
    except NotReached:
        if server.discovered:
            return False, None
        raise


def _ignored_options(args: argparse.Namespace, server: Server) -> None:
    given = [f"--{name.replace('_', '-')}" for name in LOCAL_ONLY if getattr(args, name, None)]
    if given:
        notice(f"{', '.join(given)} ignored: the server at {server.url} uses its own (--local: run here)")
