"""``graphrecall shard-config``: input checks, nginx's consistent hash in Python, and the checked-in example config.

The ring is checked against a real nginx in tests/integration/test_shard_proxy.py; the owners pinned here were
read from nginx 1.22.1 (Debian 12) through the config's X-Graphrecall-Shard header, so the hash stays checked on
machines without nginx.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from graphrecall.cli import main
from graphrecall.server import shards

REPO = Path(__file__).resolve().parents[2]
THREE = "127.0.0.1:18421,127.0.0.1:18422,127.0.0.1:18423"
EXAMPLE_NODES = "10.0.0.11:8420,10.0.0.12:8420,10.0.0.13:8420"


@pytest.mark.parametrize(
    ("scope", "owner"),
    [
        ("org0/user-0", "127.0.0.1:18421"),
        ("acme/alice", "127.0.0.1:18422"),
        ("globex/bob", "127.0.0.1:18423"),
        ("acme/carol", "127.0.0.1:18423"),
        ("ünï/çødé", "127.0.0.1:18423"),
    ],
)
def test_owners_match_what_nginx_chose(scope: str, owner: str) -> None:
    ring = shards.Ring(tuple(shards.parse_nodes(THREE)))
    assert ring.owner(*shards.parse_scope(scope)).address == owner


def test_scopes_spread_evenly_and_a_new_node_takes_only_its_share() -> None:
    before = shards.parse_nodes(THREE)
    after = [*before, shards.Node("127.0.0.1", 18424)]
    scopes = [("o", f"u{i}") for i in range(20_000)]
    ring = shards.Ring(tuple(before))
    counts = collections.Counter(ring.owner(*s) for s in scopes)
    assert all(0.25 < c / len(scopes) < 0.42 for c in counts.values()), counts
    moved = shards.moves(scopes, before, after)
    assert {new for *_, new in moved} == {after[-1]}  # only to the new node, never between old ones
    assert 0.18 < len(moved) / len(scopes) < 0.32
    assert {old for _, _, old, _ in shards.moves(scopes, after, before)} == {
        after[-1]
    }  # removing: its own only


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        ("127.0.0.1", "is not HOST:PORT"),
        ("127.0.0.1:0", "port must be within 1-65535"),
        ("127.0.0.1:70000", "port must be within 1-65535"),
        ("a b:80", "is not a host name or IP address"),
        ("[zz]:80", "not a bracketed IPv6 address"),
        ("h:1,h:1", "appears twice"),
        (" , ", "at least one"),
        ("http://h:80", "is not a host name"),
    ],
)
def test_bad_nodes_are_one_line_and_exit_2(
    nodes: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["shard-config", "--nodes", nodes]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("graphrecall: error: ")


def test_good_addresses() -> None:
    nodes = shards.parse_nodes("node-1.internal:8420, 10.0.0.2:8420,[::1]:8420")
    assert [n.address for n in nodes] == ["node-1.internal:8420", "10.0.0.2:8420", "[::1]:8420"]
    assert shards.parse_listen("8080") == "8080"
    assert shards.parse_listen("127.0.0.1:8080") == "127.0.0.1:8080"


def test_which_and_new_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["shard-config", "--nodes", THREE, "--which", "acme/alice", "--which", "globex/bob"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "acme/alice\t127.0.0.1:18422",
        "globex/bob\t127.0.0.1:18423",
    ]
    four = f"{THREE},127.0.0.1:18424"
    scopes = ["acme/alice", "globex/bob", "acme/bob"]
    assert (
        main(["shard-config", "--nodes", THREE, "--new-nodes", four, *(f"--which={s}" for s in scopes)]) == 0
    )
    out = capsys.readouterr()
    assert out.out.splitlines() == ["acme/bob\t127.0.0.1:18423 -> 127.0.0.1:18424"]
    assert "1 of 3 scope(s) move" in out.err
    assert main(["shard-config", "--nodes", THREE, "--which", "acme"]) == 2
    assert main(["shard-config", "--nodes", THREE, "--new-nodes", four]) == 2


@pytest.mark.parametrize(
    ("name", "extra"),
    [("graphrecall-shards.conf", []), ("graphrecall-shards.http.conf", ["--http-block"])],
)
def test_the_checked_in_example_is_what_the_command_writes(
    name: str, extra: list[str], tmp_path: Path
) -> None:
    """deploy/nginx/ cannot drift from the generator: regenerate it with the command on its first line."""
    checked_in = REPO / "deploy" / "nginx" / name
    first = checked_in.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(f"# graphrecall shard-config --nodes {EXAMPLE_NODES} --listen 8080")
    out = tmp_path / name
    assert (
        main(["shard-config", "--nodes", EXAMPLE_NODES, "--listen", "8080", *extra, "--out", str(out)]) == 0
    )
    assert out.read_text(encoding="utf-8") == checked_in.read_text(encoding="utf-8"), (
        f"regenerate: {first[2:]} --out deploy/nginx/{name}"
    )


def test_the_config_routes_on_the_scope_and_never_retries_elsewhere() -> None:
    text = shards.render(shards.parse_nodes(THREE), listen="8080", max_body_bytes=1234)
    assert "hash $graphrecall_scope consistent;" in text
    assert "proxy_next_upstream off;" in text
    assert text.count("max_fails=0;") == 3
    assert "client_max_body_size 1234;" in text
    assert '"$request_method $uri"' in text and "$request " not in text  # no query strings in the log
