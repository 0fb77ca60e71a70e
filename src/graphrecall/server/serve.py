"""``run_server``: check the security settings, open the store, serve the HTTP API with uvicorn.

Kept apart from the app so that the refusal rules (no keys => loopback + ``--insecure-local`` only) run before
anything is opened or bound, and so that ``graphrecall serve`` and ``python -m graphrecall.server`` share them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from graphrecall import telemetry
from graphrecall.config import EMBEDDER_ENV, EMBEDDER_SPECS, RERANKER_HELP, default_root
from graphrecall.errors import InvalidInput
from graphrecall.remote import discovery
from graphrecall.server.auth import (
    ALL_ORGS,
    ApiKey,
    ApiKeyAuth,
    ServerConfigError,
    check_startup,
    hash_key,
    is_loopback,
)
from graphrecall.server.limits import DEFAULT_MAX_BODY_BYTES
from graphrecall.server.webhooks import WEBHOOKS_ENV, dispatcher_from_settings

if TYPE_CHECKING:
    from graphrecall.embed import Embedder
    from graphrecall.llm import LLM

KEYS_ENV = "GRAPHRECALL_API_KEYS_FILE"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8420
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def server_embedder(spec: str | None, *, batching: bool = True, in_flight: int | None = None) -> Embedder:
    """The server's embedder: ``embedder_from_spec``'s, with concurrent small calls merged into one model call
    (``embed.batching``: under load every search embeds one query and every turn two texts, each from its own
    worker thread, and one call of several texts costs far less per text).

    With batching, up to ``in_flight`` model calls (default: one per core) run side by side, each on one ONNX
    Runtime thread: on a server whose cores are all busy, a call split over both cores waits at every operator
    for its descheduled half, and with calls serialized behind it that wait caps the whole server. For the default
    model the batcher sits under the content-hash cache, so a cached text never queues; ``$GRAPHRECALL_EMBED_CACHE``
    is honoured as ``Memory`` would. ``batching=False`` gives what ``Memory`` would build itself."""
    from graphrecall.config import Settings
    from graphrecall.embed import (
        BatchingEmbedder,
        CachedEmbedder,
        SentenceTransformerEmbedder,
        embedder_from_spec,
    )
    from graphrecall.embed.spec import DEFAULT_SPEC, configured_spec

    chosen = configured_spec(None if spec in (None, "", "default") else spec)
    calls = in_flight or os.cpu_count() or 1
    cache = Settings.from_env().embed_cache
    if chosen != DEFAULT_SPEC:
        inner = embedder_from_spec(chosen)
        model = BatchingEmbedder(inner, max_in_flight=calls) if batching else inner
        return model if chosen.startswith("hashing") else CachedEmbedder(model, path=cache)
    if not batching:
        return CachedEmbedder(SentenceTransformerEmbedder(), path=cache)
    # Symmetric: the default model gets no query prompt, so queries and turns may share a call (bigger batches).
    model = BatchingEmbedder(SentenceTransformerEmbedder(onnx_threads=1), max_in_flight=calls, symmetric=True)
    return CachedEmbedder(model, path=cache)


def server_llm() -> LLM | None:
    """The model ``GRAPHRECALL_LLM`` (and ``GRAPHRECALL_LLM_BASE_URL``) names, for the queued extraction of
    ``extract: true`` and for answers; ``None`` when unset. A setting that cannot be used stops the server before it
    binds, naming the variable, instead of failing every extraction later."""
    from graphrecall.llm import LLMError
    from graphrecall.llm.factory import llm_from_settings_or_none

    try:
        return llm_from_settings_or_none()
    except (LLMError, ImportError) as e:
        raise ServerConfigError(f"GRAPHRECALL_LLM cannot be used: {e}") from None


def load_auth(keys: str | None) -> ApiKeyAuth | None:
    """Keys from ``--keys``, else from ``$GRAPHRECALL_API_KEYS_FILE``, else none."""
    path = keys or os.environ.get(KEYS_ENV) or None
    return ApiKeyAuth.from_file(path) if path else None


def run_server(args: argparse.Namespace) -> None:
    """Serve until interrupted. ``args``: root, host, port, keys, insecure_local; optional embedder and reranker
    (spec strings), embed_batching, embed_batch_in_flight, max_body_bytes, log_level. Raises ``ServerConfigError`` (before binding
    anything) when unsafe or invalid."""
    import uvicorn

    from graphrecall.memory import Memory
    from graphrecall.server.http import create_app

    host = getattr(args, "host", None) or DEFAULT_HOST
    port = getattr(args, "port", None)
    port = DEFAULT_PORT if port is None else int(port)
    insecure_local = bool(getattr(args, "insecure_local", False))
    auth = load_auth(getattr(args, "keys", None))
    check_startup(auth, host=host, insecure_local=insecure_local)
    loopback_only = bool(getattr(args, "loopback_only", False))
    if loopback_only and not is_loopback(host):
        raise ServerConfigError(f"the local console binds to loopback only, not {host!r}")
    if not 0 <= port <= 65535:
        raise ServerConfigError(f"port must be within 0-65535, got {port}")
    max_body = getattr(args, "max_body_bytes", None) or DEFAULT_MAX_BODY_BYTES
    log_level = str(getattr(args, "log_level", None) or "info").lower()
    if log_level not in LOG_LEVELS:
        raise ServerConfigError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    configure_logging(log_level)
    telemetry.configure_from_env()  # OTEL_*: off unless asked for (graphrecall.telemetry)
    embedder = server_embedder(
        getattr(args, "embedder", None),
        batching=bool(getattr(args, "embed_batching", True)),
        in_flight=getattr(args, "embed_batch_in_flight", None),
    )
    reranker = (getattr(args, "reranker", None) or "").strip() or None  # None: $GRAPHRECALL_RERANKER
    mode = auth_mode(auth)
    local_key = discovery.mint_local_key() if auth is not None else None
    llm = server_llm()
    refuse_a_second_server(Path(getattr(args, "root", None) or default_root()).expanduser())
    with Memory.open(getattr(args, "root", None), embedder=embedder, reranker=reranker, llm=llm) as memory:
        root = memory.root
        app = create_app(
            memory,
            auth=with_local_key(auth, local_key),
            insecure_local=insecure_local,
            max_body_bytes=max_body,
            # Port 0 (the system picks one) has no address to hand out before uvicorn binds.
            on_ready=(lambda: announce_to_commands(root, discovery.local_url(host, port), local_key))
            if port
            else None,
            on_stop=lambda: discovery.remove(root),
            loopback_only=loopback_only,
        )
        hooks = dispatcher_from_settings(getattr(args, "webhooks", None), memory.root)
        if hooks is not None:
            memory.subscribe(hooks.sink)
            hooks.start()  # also sends what an earlier server left in the outbox
        upkeep = None
        if getattr(args, "maintain", False):
            from graphrecall.server.upkeep import MaintenanceLoop

            upkeep = MaintenanceLoop(
                memory,
                every_s=float(getattr(args, "maintain_every_s", 300.0)),
                idle_s=float(getattr(args, "maintain_idle_s", 1800.0)),
            )
            upkeep.start()
        announce(mode, root=str(root), host=host, port=port)
        try:
            # uvicorn's access log prints query strings (users' search text); ours logs paths only.
            uvicorn.run(app, host=host, port=port, access_log=False, log_level=log_level, server_header=False)
        finally:
            discovery.remove(root)
            if upkeep is not None:
                upkeep.close()
            if hooks is not None:
                hooks.close()


LOCAL_KEY_NAME = "server-file"
"""The name the server's local key (``remote.discovery``) goes by in logs and metrics."""


def with_local_key(auth: ApiKeyAuth | None, key: str | None) -> ApiKeyAuth | None:
    """The configured keys plus this run's local key, which the server file hands to commands on its root."""
    if auth is None or key is None:
        return auth
    taken = {k.name for k in auth.keys}
    name = next(
        n for n in (LOCAL_KEY_NAME, *(f"{LOCAL_KEY_NAME}-{i}" for i in range(1, 99))) if n not in taken
    )
    local = ApiKey(name=name, sha256=hash_key(key), orgs=frozenset({ALL_ORGS}), shared_write=True)
    return ApiKeyAuth([*auth.keys, local])


def refuse_a_second_server(root: Path) -> None:
    """Stop before anything opens when a live server already serves ``root``: both would hold buckets of the same
    organisations (each bucket belongs to one process), and the second would take over the server file that sends
    commands to the first. A file left by a server that is gone is replaced as usual."""
    found = discovery.read(root)
    if found is not None and found.pid != os.getpid() and found.alive():
        raise ServerConfigError(
            f"a graphrecall server (pid {found.pid}, {found.url}) already serves {root}: stop it, or serve "
            "another --root"
        )


def announce_to_commands(root: Path, url: str, key: str | None) -> None:
    """Write the server file, so that commands on ``root`` come here instead of failing with ``store_busy``; a
    root where it cannot be written is served all the same (commands there then say the store is busy)."""
    try:
        path = discovery.write(root, url=url, key=key)
    except OSError as e:
        logging.getLogger("graphrecall.server").warning("cannot write the server file under %s: %s", root, e)
        return
    print(f"graphrecall: commands on {root} go through this server ({path})", file=sys.stderr, flush=True)


def configure_logging(level: str) -> None:
    """Make ``level`` hold for the server's loggers (the access log is ``graphrecall.server.access`` at INFO) even
    when the process configured logging before (the ``graphrecall`` CLI sets WARNING for its other commands)."""
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("graphrecall.server").setLevel(level.upper())


def auth_mode(auth: ApiKeyAuth | None) -> str:
    """One line saying who may call the server, loud when nobody is checked."""
    if auth is None:
        return (
            "WARNING: AUTHENTICATION IS OFF (--insecure-local): any local process can read and erase every "
            "user's memory"
        )
    return f"authentication: {len(auth.keys)} API key(s); requests need 'Authorization: Bearer <key>'"


def announce(mode: str, *, root: str, host: str, port: int) -> None:
    """Printed to stderr at start whatever the log level, so the auth mode is never a surprise."""
    print(f"graphrecall: serving {root} on http://{host}:{port}", file=sys.stderr, flush=True)
    print(f"graphrecall: web console at http://{host}:{port}/ui/", file=sys.stderr, flush=True)
    print(f"graphrecall: {mode}", file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m graphrecall.server", description="Serve the graphrecall HTTP API."
    )
    p.add_argument("--root", help="store root (default: $GRAPHRECALL_ROOT or ~/.graphrecall/store)")
    add_arguments(p)
    p.add_argument(
        "--embedder", default=None, help=f"{EMBEDDER_SPECS} (default: ${EMBEDDER_ENV}, else minilm)"
    )
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The serving options shared by ``graphrecall serve`` and ``python -m graphrecall.server``."""
    p.add_argument("--host", default=DEFAULT_HOST, help=f"bind address (default: {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    p.add_argument("--keys", help=f"API keys file (JSON or TOML); default ${KEYS_ENV}")
    p.add_argument(
        "--insecure-local",
        action="store_true",
        help="serve without authentication, on a loopback address only; refused together with keys",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=None,
        help=f"largest request body accepted, in bytes (default: {DEFAULT_MAX_BODY_BYTES})",
    )
    p.add_argument("--reranker", default=None, metavar="SPEC", help=RERANKER_HELP)
    p.add_argument(
        "--maintain",
        action="store_true",
        help="maintain scopes by itself: a backup, then consolidation, for each scope that changed and is idle;"
        " and compaction of the files whose free space passed the bound (compact_free_fraction)",
    )
    p.add_argument(
        "--maintain-every-s",
        type=float,
        default=300.0,
        help="seconds between maintenance passes (default: 300)",
    )
    p.add_argument(
        "--maintain-idle-s",
        type=float,
        default=1800.0,
        help="seconds a changed scope must be left alone before it is maintained (default: 1800)",
    )
    p.add_argument(
        "--webhooks",
        default=None,
        metavar="FILE",
        help=f"webhook endpoints per organisation (JSON or TOML; docs/http-api.md, 'Webhooks'); default ${WEBHOOKS_ENV}",
    )
    p.add_argument(
        "--embed-batching",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="merge concurrent small embedding calls (search queries, turns) into one model call (default: on)",
    )
    p.add_argument(
        "--embed-batch-in-flight",
        type=int,
        default=None,
        help="with batching: most embedding model calls at once, each on one thread (default: one per core)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=LOG_LEVELS,
        help="server log level; 'info' prints the access log, one line per request (default: info)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        run_server(parser().parse_args(argv))
    except (ServerConfigError, InvalidInput) as e:
        print(f"graphrecall server: {e}", flush=True)
        return 2
    return 0
