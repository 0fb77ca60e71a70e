"""Sharding the HTTP API over N ``graphrecall serve`` nodes behind nginx: the config, and which node owns a scope.

Each scope (org/user) is one database on one node's disk, so a scope must always reach the same node: nginx's
``hash $graphrecall_scope consistent`` (ketama) routes on the org/user taken from the path. Three choices keep a
scope from ever being served by a second node, which would fork its data into two databases:

- ``proxy_next_upstream off``: a failed node is not retried on another;
- ``max_fails=0`` on every shard server: nginx's consistent hash otherwise *skips* a peer it has seen fail (for
  ``fail_timeout``) and picks the next point on the ring, i.e. another node, even for the first try;
- the key is taken from ``$uri``, the percent-decoded path that the node routes on too (uvicorn decodes it), so
  ``ac%6De`` and ``acme`` hash alike. Ids cannot contain ``/`` or start with ``.`` (``models.validate_identifier``),
  so nginx's normalization of ``//`` and dot segments only ever changes the key of a request the node rejects.

A node that is down answers 503 ``shard_unavailable`` for its scopes only (nginx's 502 rewritten as JSON in the
API's error shape); every other node keeps serving its own.

``owner`` reimplements nginx's ketama ring (``ngx_http_upstream_hash_module.c``, ``init_chash`` and
``find_chash_point``): 160 points per server of weight 1, point ``j`` = ``crc32(HOST "\\0" PORT prev)`` where
``prev`` is point ``j-1`` as 4 little-endian bytes (0 for the first); a key goes to the first point at or above
``crc32(key)``, wrapping to the first point. The server string is hashed exactly as written in the ``server``
line, so ``owner`` must be given the same ``HOST:PORT`` text as ``--nodes``. nginx drops duplicate points after an
unstable sort, so on a 32-bit point collision (~3e-5 for three nodes) the surviving server is not specified; we
keep the first in node order. ``tests/integration/test_shard_proxy.py`` checks ``owner`` against a real nginx.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from graphrecall.models import validate_identifier
from graphrecall.server.limits import DEFAULT_MAX_BODY_BYTES

POINTS_PER_NODE = 160  # nginx: peer->weight * 160
DEFAULT_LISTEN = "8080"
UPSTREAM = "graphrecall_shards"
ANY_UPSTREAM = "graphrecall_any"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")
# One character that may stand in a JSON string as is, as a byte-level regex: printable ASCII except '"' and '\\',
# or one well-formed UTF-8 sequence (RFC 3629 table 3).
_JSON_SAFE = (
    r"(?:[ !#-\[\]-~]|[\xC2-\xDF][\x80-\xBF]|\xE0[\xA0-\xBF][\x80-\xBF]|[\xE1-\xEC\xEE\xEF][\x80-\xBF]{2}"
    r"|\xED[\x80-\x9F][\x80-\xBF]|\xF0[\x90-\xBF][\x80-\xBF]{2}|[\xF1-\xF3][\x80-\xBF]{3}"
    r"|\xF4[\x80-\x8F][\x80-\xBF]{2})"
)
STANDALONE_ACCESS_LOG = "graphrecall-shards-access.log"  # under nginx's -p prefix
INCLUDED_ACCESS_LOG = "/var/log/nginx/graphrecall-shards-access.log"


class ShardConfigError(ValueError):
    """A node list, listen address or scope that cannot make a working config; the message names the bad part."""


@dataclass(frozen=True)
class Node:
    """One ``graphrecall serve`` node as nginx's ``server`` line names it (``address`` is what ketama hashes)."""

    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(text: str, what: str = "node") -> Node:
    """``HOST:PORT`` (a hostname, an IPv4 address or a bracketed IPv6 address) -> ``Node``; else ShardConfigError."""
    item = text.strip()
    host, sep, port_text = item.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ShardConfigError(f"{what} {item!r} is not HOST:PORT (e.g. 10.0.0.5:8420)")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ShardConfigError(f"{what} {item!r}: port must be within 1-65535")
    if host.startswith("["):
        try:
            ok = host.endswith("]") and ipaddress.ip_address(host[1:-1]).version == 6
        except ValueError:
            ok = False
        if not ok:
            raise ShardConfigError(f"{what} {item!r}: not a bracketed IPv6 address")
    elif not _HOSTNAME.match(host):  # an IPv4 address matches the hostname pattern too
        raise ShardConfigError(f"{what} {item!r}: {host!r} is not a host name or IP address")
    return Node(host, port)


def parse_nodes(text: str) -> list[Node]:
    """``--nodes``: comma-separated ``HOST:PORT``, at least one, no repeats (a repeat would double its share)."""
    items = [part for part in text.split(",") if part.strip()]
    if not items:
        raise ShardConfigError("--nodes needs at least one HOST:PORT")
    nodes = [parse_address(item) for item in items]
    seen: set[str] = set()
    for node in nodes:
        if node.address in seen:
            raise ShardConfigError(f"node {node.address} appears twice in --nodes")
        seen.add(node.address)
    return nodes


def parse_listen(text: str) -> str:
    """``--listen``: ``PORT`` (every interface) or ``HOST:PORT``, returned as nginx's ``listen`` argument."""
    if text.isdigit():
        if not 1 <= int(text) <= 65535:
            raise ShardConfigError(f"--listen {text!r}: port must be within 1-65535")
        return text
    return parse_address(text, "--listen").address


def scope_key(org: str, user: str) -> str:
    """The hash key nginx builds from ``/v1/scopes/{org}/{user}/...`` (the ``map`` in ``render_http_block``)."""
    return f"{org}/{user}"


def parse_scope(text: str) -> tuple[str, str]:
    """``org/user`` -> (org, user), both valid ids (``models.validate_identifier``); else ShardConfigError."""
    org, sep, user = text.strip().partition("/")
    if not sep:
        raise ShardConfigError(f"scope {text.strip()!r} is not ORG/USER")
    try:
        return validate_identifier(org, "org"), validate_identifier(user, "user")
    except ValueError as e:
        raise ShardConfigError(f"scope {text.strip()!r}: {e}") from None


# -- nginx's ketama ring ---------------------------------------------------------------------------------------------
def _node_points(address: str) -> list[int]:
    host, port = address, ""
    head, sep, tail = address.rpartition(":")
    if sep and tail.isdigit():  # nginx splits at the last ':' followed by digits only
        host, port = head, tail
    base = host.encode() + b"\0" + port.encode()
    points, prev = [], 0
    for _ in range(POINTS_PER_NODE):
        prev = zlib.crc32(base + prev.to_bytes(4, "little"))
        points.append(prev)
    return points


@dataclass(frozen=True)
class Ring:
    """nginx's consistent-hash ring over ``nodes`` (the ``server`` lines of the upstream, in order)."""

    nodes: tuple[Node, ...]

    @cached_property
    def _points(self) -> tuple[list[int], list[Node]]:
        tagged = sorted(
            ((h, i) for i, node in enumerate(self.nodes) for h in _node_points(node.address)),
            key=lambda p: p[0],
        )
        hashes: list[int] = []
        owners: list[Node] = []
        for h, i in tagged:
            if not hashes or hashes[-1] != h:
                hashes.append(h)
                owners.append(self.nodes[i])
        return hashes, owners

    def owner(self, org: str, user: str) -> Node:
        """The node nginx sends ``/v1/scopes/{org}/{user}/...`` to."""
        hashes, owners = self._points
        index = bisect.bisect_left(hashes, zlib.crc32(scope_key(org, user).encode()))
        return owners[index % len(owners)]


def moves(
    scopes: Iterable[tuple[str, str]], before: Sequence[Node], after: Sequence[Node]
) -> list[tuple[str, str, Node, Node]]:
    """The scopes whose owner changes from the ``before`` node list to ``after``: (org, user, from, to). With
    consistent hashing, adding a node moves only scopes *to* it (about 1/N of them) and removing one moves only
    its own scopes."""
    old, new = Ring(tuple(before)), Ring(tuple(after))
    out = []
    for org, user in scopes:
        a, b = old.owner(org, user), new.owner(org, user)
        if a != b:
            out.append((org, user, a, b))
    return out


# -- the nginx config --------------------------------------------------------------------------------------------------
def _json_error(code: str, message: str, field: str = "null") -> str:
    """A body in the API's error shape (server/errors.py), as a single-quoted nginx string (no ' inside)."""
    return f'\'{{"error":{{"code":"{code}","message":"{message}","field":{field}}}}}\''


def render_http_block(
    nodes: Sequence[Node], *, listen: str, max_body_bytes: int, access_log: str = INCLUDED_ACCESS_LOG
) -> str:
    """What goes inside ``http { }``: the scope key, the two upstreams, the server. ``include`` it from an existing
    nginx (the distribution's ``/etc/nginx/conf.d/``) or wrap it with ``render_config``."""
    if not nodes:
        raise ShardConfigError("at least one node is needed")
    shard_servers = "\n".join(f"    server {n.address} max_fails=0;" for n in nodes)
    any_servers = "\n".join(f"    server {n.address} max_fails=1 fail_timeout=5s;" for n in nodes)
    down = _json_error(
        "shard_unavailable",
        "the node that owns scope $graphrecall_scope_shown ($upstream_addr) is unreachable; other scopes are "
        "served; retry once it is back",
    )
    timeout = _json_error(
        "shard_timeout",
        "the node that owns scope $graphrecall_scope_shown ($upstream_addr) did not answer in time",
    )
    too_large = _json_error(
        "payload_too_large", f"request body exceeds the limit of {max_body_bytes} bytes", '"body"'
    )
    metrics = _json_error(
        "not_found", "each node serves its own /metrics: scrape the nodes directly, not through the proxy"
    )
    not_found = _json_error("not_found", "no such route")
    return f"""\
# graphrecall shards: {len(nodes)} node(s); each scope (org/user) always goes to the node that owns it.
# Written by `graphrecall shard-config`; regenerate rather than edit. docs/scaling.md explains each choice.

# The hash key: org/user from the decoded path (what the node routes on), empty for other paths.
map $uri $graphrecall_scope {{
    "~^/v1/scopes/(?<gr_org>[^/]+)/(?<gr_user>[^/]+)(?:/|$)" "$gr_org/$gr_user";
    default "";
}}
# The key as shown in an error body, when it is safe inside a JSON string: printable ASCII but " and \\, or
# well-formed UTF-8 (nginx matches bytes); never a control character.
map $graphrecall_scope $graphrecall_scope_shown {{
    "~^{_JSON_SAFE}+$" $graphrecall_scope;
    default "(not shown)";
}}

# Paths only, like the nodes' own access log: query strings hold users' search text.
log_format graphrecall_paths '$remote_addr [$time_local] "$request_method $uri" $status '
                             '$request_time upstream=$upstream_addr';

# Owner of each scope. max_fails=0: never mark a node failed, since the hash would then move its scopes to
# another node for fail_timeout (forking their data); a down node answers 503 for its scopes instead.
upstream {UPSTREAM} {{
    hash $graphrecall_scope consistent;
{shard_servers}
    keepalive 32;
}}

# Stateless routes (health, the OpenAPI description, /docs): any live node answers the same.
upstream {ANY_UPSTREAM} {{
{any_servers}
    keepalive 8;
}}

server {{
    listen {listen};
    server_tokens off;
    access_log {access_log} graphrecall_paths;
    # The nodes' own limit (graphrecall serve --max-body-bytes): refused here before a byte is forwarded.
    client_max_body_size {max_body_bytes};
    client_body_buffer_size 256k;
    default_type application/json;

    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_connect_timeout 3s;
    proxy_read_timeout 300s;  # /answer waits for an LLM
    proxy_send_timeout 60s;

    error_page 413 = @too_large;  # a location with error_page lines of its own repeats this one
    location @too_large {{ return 413 {too_large}; }}

    location /v1/scopes/ {{
        proxy_pass http://{UPSTREAM};
        proxy_next_upstream off;  # never retry a scope on another node: that node would fork its data
        add_header X-Graphrecall-Shard $upstream_addr always;
        error_page 413 = @too_large;
        error_page 502 = @shard_down;
        error_page 504 = @shard_timeout;
    }}
    location @shard_down {{
        add_header Retry-After 5 always;
        add_header X-Graphrecall-Shard $upstream_addr always;
        return 503 {down};
    }}
    location @shard_timeout {{
        add_header X-Graphrecall-Shard $upstream_addr always;
        return 504 {timeout};
    }}

    location = /healthz {{ proxy_pass http://{ANY_UPSTREAM}; }}
    location = /readyz {{ proxy_pass http://{ANY_UPSTREAM}; }}
    location = /openapi.json {{ proxy_pass http://{ANY_UPSTREAM}; }}
    location /docs {{ proxy_pass http://{ANY_UPSTREAM}; }}
    location = /metrics {{ return 404 {metrics}; }}
    location / {{ return 404 {not_found}; }}
}}
"""


def render_config(nodes: Sequence[Node], *, listen: str, max_body_bytes: int) -> str:
    """A standalone ``nginx.conf`` for ``nginx -p PREFIX -c FILE``: the pid file, logs and temp files live under
    PREFIX, so it runs beside (or without) the distribution's nginx."""
    body = render_http_block(
        nodes, listen=listen, max_body_bytes=max_body_bytes, access_log=STANDALONE_ACCESS_LOG
    )
    inner = "\n".join(f"    {line}" if line else "" for line in body.splitlines())
    return f"""\
# Standalone: nginx -p PREFIX -c THIS_FILE (add -g 'daemon off;' to run in the foreground).
worker_processes auto;
pid graphrecall-shards.pid;
error_log graphrecall-shards-error.log warn;

events {{
    worker_connections 1024;
}}

http {{
    client_body_temp_path client_body_temp;
    proxy_temp_path proxy_temp;
    fastcgi_temp_path fastcgi_temp;
    uwsgi_temp_path uwsgi_temp;
    scgi_temp_path scgi_temp;

{inner}
}}
"""


def render(
    nodes: Sequence[Node],
    *,
    listen: str = DEFAULT_LISTEN,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    http_block_only: bool = False,
) -> str:
    """The text ``graphrecall shard-config`` writes."""
    make = render_http_block if http_block_only else render_config
    command = (
        f"graphrecall shard-config --nodes {','.join(n.address for n in nodes)} --listen {listen} "
        f"--max-body-bytes {max_body_bytes}{' --http-block' if http_block_only else ''}"
    )
    return f"# {command}\n" + make(nodes, listen=listen, max_body_bytes=max_body_bytes)
