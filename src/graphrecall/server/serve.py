"""``run_server``: check the security settings, open the store, serve the HTTP API with uvicorn.

Kept apart from the app so that the refusal rules (no keys => loopback + ``--insecure-local`` only) run before
anything is opened or bound, and so that ``graphrecall serve`` and ``python -m graphrecall.server`` share them.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

from graphrecall.embed import Embedder, HashingEmbedder
from graphrecall.errors import InvalidInput
from graphrecall.server.auth import ApiKeyAuth, ServerConfigError, check_startup

KEYS_ENV = "GRAPHRECALL_API_KEYS_FILE"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8420


def embedder_from_spec(spec: str | None) -> Embedder | None:
    """``None``/``default`` -> the library default (bundled MiniLM); ``hashing:<dim>`` -> the test embedder."""
    if spec is None or spec in {"", "default"}:
        return None
    name, _, arg = spec.partition(":")
    if name == "hashing":
        try:
            return HashingEmbedder(int(arg or "64"))
        except ValueError as e:
            raise InvalidInput(f"bad embedder spec {spec!r}: {e}", where="embedder") from None
    raise InvalidInput(f"unknown embedder {spec!r}; use 'default' or 'hashing:<dim>'", where="embedder")


def load_auth(keys: str | None) -> ApiKeyAuth | None:
    """Keys from ``--keys``, else from ``$GRAPHRECALL_API_KEYS_FILE``, else none."""
    path = keys or os.environ.get(KEYS_ENV) or None
    return ApiKeyAuth.from_file(path) if path else None


def run_server(args: argparse.Namespace) -> None:
    """Serve until interrupted. ``args``: root, host, port, keys, insecure_local; optional embedder (spec string),
    max_body_bytes, log_level. Raises ``ServerConfigError`` (before binding anything) when unsafe or invalid."""
    import uvicorn

    from graphrecall.memory import Memory
    from graphrecall.server.http import DEFAULT_MAX_BODY_BYTES, create_app

    host = getattr(args, "host", None) or DEFAULT_HOST
    port = getattr(args, "port", None)
    port = DEFAULT_PORT if port is None else int(port)
    insecure_local = bool(getattr(args, "insecure_local", False))
    auth = load_auth(getattr(args, "keys", None))
    check_startup(auth, host=host, insecure_local=insecure_local)
    if not 0 <= port <= 65535:
        raise ServerConfigError(f"port must be within 0-65535, got {port}")
    max_body = getattr(args, "max_body_bytes", None) or DEFAULT_MAX_BODY_BYTES
    log_level = getattr(args, "log_level", None) or "info"
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    embedder = embedder_from_spec(getattr(args, "embedder", None))
    with Memory.open(getattr(args, "root", None), embedder=embedder) as memory:
        app = create_app(memory, auth=auth, insecure_local=insecure_local, max_body_bytes=max_body)
        logging.getLogger("graphrecall.server").info(
            "serving %s on http://%s:%d (%s)",
            memory.root,
            host,
            port,
            f"{len(auth.keys)} API key(s)" if auth else "NO AUTHENTICATION, loopback only",
        )
        # uvicorn's access log prints query strings (users' search text); ours logs paths only.
        uvicorn.run(app, host=host, port=port, access_log=False, log_level=log_level, server_header=False)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m graphrecall.server", description="Serve the graphrecall HTTP API."
    )
    p.add_argument("--root", help="store root (default: $GRAPHRECALL_ROOT or ~/.graphrecall/store)")
    p.add_argument("--host", default=DEFAULT_HOST)
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--keys", help=f"API keys file (JSON or TOML); default ${KEYS_ENV}")
    p.add_argument("--insecure-local", action="store_true", help="serve without keys, on loopback only")
    p.add_argument("--embedder", default=None, help="'default' (bundled MiniLM) or 'hashing:<dim>' (tests)")
    p.add_argument("--max-body-bytes", type=int, default=None)
    p.add_argument("--log-level", default="info")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        run_server(parser().parse_args(argv))
    except (ServerConfigError, InvalidInput) as e:
        print(f"graphrecall server: {e}", flush=True)
        return 2
    return 0
