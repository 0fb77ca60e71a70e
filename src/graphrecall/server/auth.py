"""Bearer API keys: hashed secrets mapped to the orgs each key may touch.

Only the SHA-256 of each secret is configured, so a leaked keys file does not leak keys. The secrets are random
tokens (``mint_key``), not passwords, so a fast hash is enough: there is nothing to brute-force. Verification
hashes the presented token and compares it against *every* configured hash with ``hmac.compare_digest``, so the
response time says nothing about which key (or how much of one) matched.

Keys file (JSON or TOML), one entry per client::

    [{"name": "spring-prod", "sha256": "<64 hex>", "orgs": ["acme"]}]       # JSON: a list, or {"keys": [...]}
    [[keys]]                                                               # TOML
    name = "spring-prod"
    sha256 = "<64 hex>"
    orgs = ["acme"]                                                        # "*" = every org

Mint one with ``python -m graphrecall.server.auth --name spring-prod --orgs acme``.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphrecall.errors import ConfigurationError

ALL_ORGS = "*"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


class ServerConfigError(ConfigurationError):
    """The server cannot start safely as configured (bad keys file, no keys on a public interface)."""

    code = "server_config"


def hash_key(secret: str) -> str:
    """The SHA-256 hex digest of an API key secret: what goes into the keys file instead of the secret."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def mint_key() -> str:
    """A fresh random secret (256 bits, URL-safe) to hand to one client."""
    return "gr_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class ApiKey:
    """One configured client: a name for logs and metrics, the secret's hash, and the orgs it may touch."""

    name: str
    sha256: str
    orgs: frozenset[str]
    shared_write: bool = False

    def allows(self, org: str) -> bool:
        return ALL_ORGS in self.orgs or org in self.orgs


@dataclass(frozen=True)
class Principal:
    """Who made a request: the key's name (never its secret), its org grants, and whether it may write to the
    shared scopes of those orgs (user ids starting with ``_``: ``params.is_shared``). Reading a shared scope needs
    only the org grant, so every user's key of an organisation can search its shared memory with theirs."""

    name: str
    orgs: frozenset[str]
    shared_write: bool = True

    def allows(self, org: str) -> bool:
        return ALL_ORGS in self.orgs or org in self.orgs


class ApiKeyAuth:
    """Verifies bearer tokens against the configured key hashes."""

    def __init__(self, keys: Sequence[ApiKey]) -> None:
        if not keys:
            raise ServerConfigError("an ApiKeyAuth needs at least one key")
        names = [k.name for k in keys]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ServerConfigError(f"API key name {dup!r} appears twice; names identify keys in logs")
        self.keys = tuple(keys)
        self._digests = [bytes.fromhex(k.sha256) for k in keys]

    def verify(self, token: str) -> Principal | None:
        """The principal for a presented secret, or None. Constant time over all keys."""
        presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found: ApiKey | None = None
        for key, digest in zip(self.keys, self._digests, strict=True):
            if hmac.compare_digest(presented, digest):
                found = key
        return None if found is None else Principal(found.name, found.orgs, found.shared_write)

    @classmethod
    def from_file(cls, path: str | Path) -> ApiKeyAuth:
        """Load a JSON (``.json``) or TOML (``.toml``) keys file; errors name the file and the entry."""
        p = Path(path).expanduser()
        try:
            raw = p.read_bytes()
        except OSError as e:
            raise ServerConfigError(f"cannot read API keys file {p}: {e.strerror or e}") from None
        try:
            data: Any = tomllib.loads(raw.decode()) if p.suffix == ".toml" else json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            kind = "TOML" if p.suffix == ".toml" else "JSON"
            raise ServerConfigError(f"API keys file {p} is not valid {kind}: {e}") from None
        if isinstance(data, dict):
            data = data.get("keys")
        if not isinstance(data, list) or not data:
            raise ServerConfigError(
                f'API keys file {p} must hold a non-empty list of keys (or {{"keys": [...]}} / [[keys]])'
            )
        return cls([_parse_entry(entry, f"{p}: keys[{i}]") for i, entry in enumerate(data)])


def _parse_entry(entry: Any, where: str) -> ApiKey:
    if not isinstance(entry, dict):
        raise ServerConfigError(f"{where}: expected an object with name, sha256 and orgs")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ServerConfigError(f"{where}.name: a non-empty name is required")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not _HEX64.match(digest.lower()):
        raise ServerConfigError(
            f"{where}.sha256: expected the 64-hex-digit SHA-256 of the secret "
            "(graphrecall.server.auth.hash_key), never the secret itself"
        )
    orgs = entry.get("orgs")
    if isinstance(orgs, str):
        orgs = [orgs]
    if not isinstance(orgs, list) or not orgs or not all(isinstance(o, str) and o for o in orgs):
        raise ServerConfigError(
            f'{where}.orgs: a non-empty list of org ids (or "*" for all orgs) is required'
        )
    shared_write = entry.get("shared_write", False)
    if not isinstance(shared_write, bool):
        raise ServerConfigError(f"{where}.shared_write: expected true or false, got {shared_write!r}")
    return ApiKey(name=name.strip(), sha256=digest.lower(), orgs=frozenset(orgs), shared_write=shared_write)


def shared_write_refused(principal_name: str, scope: object) -> str:
    """Why a key that may read a shared scope was refused a write to it (HTTP 403, MCP's tool error)."""
    return (
        f"API key {principal_name!r} may read the shared scope {scope} but not change it (a key needs "
        '"shared_write": true in the keys file to write shared memory)'
    )


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server reachable from this machine only."""
    h = host.strip().strip("[]").lower()
    if h in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def check_startup(auth: ApiKeyAuth | None, *, host: str, insecure_local: bool) -> None:
    """Refuse an unauthenticated server unless it is explicitly local: loopback bind AND ``--insecure-local``; and
    refuse ``--insecure-local`` beside keys, since one of the two would be silently ignored."""
    if auth is not None:
        if insecure_local:
            raise ServerConfigError(
                "--insecure-local turns authentication off, but API keys are configured (--keys or "
                "$GRAPHRECALL_API_KEYS_FILE): drop --insecure-local to serve with the keys, or drop the keys"
            )
        return
    if not insecure_local:
        raise ServerConfigError(
            "no API keys configured: pass --keys FILE (or set GRAPHRECALL_API_KEYS_FILE). For local development "
            "only, an unauthenticated server can run with --host 127.0.0.1 --insecure-local."
        )
    if not is_loopback(host):
        raise ServerConfigError(
            f"--insecure-local serves without authentication, so it only binds to loopback "
            f"(127.0.0.1, ::1, localhost), not {host!r}. Configure API keys to serve on other interfaces."
        )


def _main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m graphrecall.server.auth",
        description="Mint an API key: prints the secret (give it to the client) and the keys-file entry.",
    )
    parser.add_argument("--name", required=True, help="a name for the client, shown in logs")
    parser.add_argument("--orgs", nargs="+", default=[ALL_ORGS], help='org ids the key may touch ("*" = all)')
    ns = parser.parse_args(argv)
    secret = mint_key()
    print(f"secret (store it in the client's secret store; it is not kept anywhere): {secret}")
    print("keys-file entry:")
    print(json.dumps({"name": ns.name, "sha256": hash_key(secret), "orgs": ns.orgs}))


if __name__ == "__main__":
    _main()
