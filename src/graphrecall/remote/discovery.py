"""The server file: how a ``graphrecall serve`` tells commands on the same store root that it holds the root.

Why: Kuzu lets one process at a time open a scope's database, so while a server runs every command that opens the
store itself fails with ``store_busy`` (and each one that embeds loads the model again, 10-19 s on a loaded
machine). A server writes ``<root>/.server.json`` once it is ready and removes it when it stops; a command on that
root reads it and sends its operation to the server instead (``remote.connect``).

What the file holds: the URL a process on this machine reaches the server at, the server's pid, and a key minted
for this run of the server (``local_key``), which the server accepts beside its configured keys with access to
every organisation. The key is the one secret in the file, so the file is created with mode 0600 (owner only, never
world-readable, whatever the umask), written beside its final name and renamed into place: a reader never sees it
half-written, and nobody but the user the server runs as can read it. That user can read every scope's database
under the root anyway, so the key gives nobody access they did not have. The configured API keys (their hashes)
never go into it, and the key stops working when the server stops.

A file left behind by a server that was killed names a pid that is gone (``alive``), or a URL where nothing
answers: a command then opens the store itself, as if there were no file.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER_FILE = ".server.json"
FORMAT = "graphrecall.server/v1"


@dataclass(frozen=True)
class ServerFile:
    """What ``<root>/.server.json`` says: where the server answers, who it is, and the key it gave this root."""

    url: str
    pid: int
    key: str | None  # None: the server runs without authentication (--insecure-local)
    path: Path

    def alive(self) -> bool:
        """Whether the process that wrote the file still runs (on this machine; a pid we may not signal is
        taken as alive)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def server_file(root: Path) -> Path:
    return root / SERVER_FILE


def mint_local_key() -> str:
    """A fresh secret for one run of a server, handed to the commands on its root through the server file."""
    return "gr_local_" + secrets.token_urlsafe(32)


def local_url(host: str, port: int) -> str:
    """The URL a process on this machine reaches a server bound to ``host`` at: a wildcard bind answers on
    loopback."""
    h = host.strip().strip("[]")
    if h in ("", "0.0.0.0"):
        h = "127.0.0.1"
    elif h == "::":
        h = "::1"
    return f"http://[{h}]:{port}" if ":" in h else f"http://{h}:{port}"


def write(root: Path, *, url: str, key: str | None) -> Path:
    """Write the server file for this process (mode 0600, atomically); returns its path."""
    root.mkdir(parents=True, exist_ok=True)
    path = server_file(root)
    data = {"format": FORMAT, "url": url, "pid": os.getpid(), "key": key}
    tmp = path.with_name(f"{SERVER_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode is cut by the umask, and an old file keeps its own: set it
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def remove(root: Path) -> None:
    """Remove the server file if this process wrote it (a server started later on the root keeps its own)."""
    found = read(root)
    if found is not None and found.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            found.path.unlink()


def read(root: Path) -> ServerFile | None:
    """The server file of ``root``, or ``None`` when there is none or it cannot be used (unreadable, another
    user's, not ours in shape): a command then opens the store itself."""
    path = server_file(root)
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        return None
    url, pid, key = raw.get("url"), raw.get("pid"), raw.get("key")
    if not isinstance(url, str) or not isinstance(pid, int) or not (key is None or isinstance(key, str)):
        return None
    return ServerFile(url=url, pid=pid, key=key, path=path)
