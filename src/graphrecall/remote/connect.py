"""Which server, if any, a command sends its operation to.

In order: none when the caller insists on the store itself (``local``); the server configured by URL (``--url``,
else ``$GRAPHRECALL_URL``) with the key from ``--api-key-file``, else ``$GRAPHRECALL_API_KEY``; else the server
that holds the store root, found through its server file (``remote.discovery``) with the key the server wrote
there. A configured server that does not answer is an error (the caller asked for it); a discovered one that does
not answer is as good as none (it was killed and left its file behind).

The key is never taken from the command line (``--api-key``): the process list shows every argument to every user
of the machine. It comes from the environment or from a file the user keeps unreadable to others.
"""

from __future__ import annotations

import os
from pathlib import Path

from graphrecall.errors import ConfigurationError
from graphrecall.remote import discovery
from graphrecall.remote.client import Server

URL_ENV = "GRAPHRECALL_URL"
KEY_ENV = "GRAPHRECALL_API_KEY"


def choose_server(
    root: Path, *, url: str | None = None, key_file: Path | None = None, local: bool = False
) -> Server | None:
    """The server to send operations on ``root`` to, or ``None`` to open the store in this process."""
    if local:
        return None
    configured = url if url else os.environ.get(URL_ENV, "").strip() or None
    if configured is not None:
        source = "--url" if url else URL_ENV
        if not configured.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"{configured!r} is not an http:// or https:// URL of a graphrecall server", where=source
            )
        key, key_source = _key(key_file)
        return Server(configured, key, source, key_source)
    if key_file is not None:
        raise ConfigurationError(
            "--api-key-file is the key for a server given by --url or GRAPHRECALL_URL, and none is",
            where="--api-key-file",
        )
    found = discovery.read(root)
    if found is None or not found.alive():
        return None
    where = str(found.path)
    return Server(found.url, found.key, where, f"{where} (this server run's local key)", discovered=True)


def _key(key_file: Path | None) -> tuple[str | None, str]:
    if key_file is not None:
        try:
            key = key_file.expanduser().read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ConfigurationError(
                f"cannot read the API key file {key_file}: {e.strerror or e}", where="--api-key-file"
            ) from None
        if not key:
            raise ConfigurationError(f"the API key file {key_file} is empty", where="--api-key-file")
        return key, f"--api-key-file {key_file}"
    key = os.environ.get(KEY_ENV, "").strip()
    return (key, KEY_ENV) if key else (None, "")
