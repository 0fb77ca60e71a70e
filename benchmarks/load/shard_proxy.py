"""Requests per second through the sharding proxy against direct to one node: the same closed-loop workload
(``benchmarks/load/http_load.py``) three times in one run.

1. ``direct``: straight to node 0;
2. ``proxy, 1 node``: through nginx whose upstream is node 0 only (the cost of the extra hop, nothing else);
3. ``proxy, N nodes``: through nginx over all N nodes (``graphrecall shard-config``'s config), users spread by scope.

Each phase uses its own org, so each seeds fresh user databases (outside the measured window) and verifies every
acknowledged write afterwards, as http_load does. Nodes run ``python -m graphrecall.server --insecure-local`` on
loopback with ``--embedder`` (default ``hashing:64``, so the figures measure HTTP, the proxy and the store rather
than the embedding model). On one machine the N nodes share its cores: phase 3 shows that the proxy spreads scopes,
not the speed-up of N machines.

    python -m benchmarks.load.shard_proxy --duration 20 --clients 16 --users 30

Needs nginx (``scripts/setup.sh`` installs it as root). Prints a table and writes JSON to
``--out``/shard_proxy.json.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphrecall.server import shards
from graphrecall.server.testing import NginxProcess, ServerProcess, free_port, nginx_binary

REPO = Path(__file__).resolve().parents[2]
sys.path.append(str(REPO))  # run as a script, the repository root (home of `benchmarks`) is not on the path
from benchmarks.jsonfile import write_json  # noqa: E402
from benchmarks.load import http_load  # noqa: E402
from benchmarks.provenance import Run  # noqa: E402


def phase(name: str, url: str, org: str, args: argparse.Namespace) -> dict[str, Any]:
    """One http_load closed-loop run against ``url``; its throughput, errors and verification."""
    argv = ["--url", url, "--org", org, "--duration", str(args.duration), "--clients", str(args.clients)]
    argv += ["--users", str(args.users), "--seed", str(args.seed), "--spot-check", "20"]
    report = http_load.run(http_load.parse(argv))
    ops = report["operations"]
    print(f"{name}: {report['throughput_per_s']} req/s", flush=True)
    return {
        "phase": name,
        "url": url,
        "throughput_per_s": report["throughput_per_s"],
        "total_requests": report["total_requests"],
        "server_errors": report["server_errors"],
        "transport_errors": report["transport_errors"],
        "verified": report["verification"]["ok"],
        "p50_ms": {op: ops[op].get("p50_ms") for op in ops},
        "p99_ms": {op: ops[op].get("p99_ms") for op in ops},
        "loadavg_1m": report["machine"]["loadavg_1m"],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    if nginx_binary() is None:
        raise SystemExit("no nginx binary: install Debian's nginx package (scripts/setup.sh does as root)")
    work = Path(tempfile.mkdtemp(prefix="graphrecall-shard-load-"))
    env = {"GRAPHRECALL_POOL_SIZE": str(3 * args.users + 4)}
    nodes = [
        ServerProcess(
            work / f"node{i}" / "store",
            embedder=args.embedder,
            extra_args=["--insecure-local", "--log-level", "warning"],
            env=env,
        )
        for i in range(args.nodes)
    ]
    proxies: list[NginxProcess] = []
    try:
        for node in nodes:
            node.start(timeout=180)
        addresses = [shards.Node("127.0.0.1", n.port) for n in nodes]
        for name, members in (("one", addresses[:1]), ("all", addresses)):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            config = shards.render(members, listen=f"127.0.0.1:{port}")
            proxies.append(NginxProcess(config, work / f"nginx-{name}", url).start())
        phases = [
            phase("direct to node 0", nodes[0].url, "direct", args),
            phase("proxy, 1 node", proxies[0].url, "proxyone", args),
            phase(f"proxy, {args.nodes} nodes", proxies[1].url, "proxyall", args),
        ]
    finally:
        for proxy in proxies:
            proxy.stop()
        for node in nodes:
            node.stop()
    direct = phases[0]["throughput_per_s"]
    return {
        "command": "python -m benchmarks.load.shard_proxy " + shlex.join(sys.argv[1:]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "config": vars(args) | {"out": str(args.out)},
        "phases": phases,
        "ratio_to_direct": {p["phase"]: round(p["throughput_per_s"] / direct, 3) for p in phases},
        "workdir": str(work),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=20.0, help="measured seconds per phase")
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (closed loop)")
    p.add_argument("--users", type=int, default=30, help="users (scopes) per phase")
    p.add_argument("--nodes", type=int, default=3, help="serve nodes behind the proxy")
    p.add_argument("--embedder", default="hashing:64", help="the nodes' embedder: hashing:<dim> | default")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "load")
    this_run = Run.begin()
    report = run(p.parse_args(argv))
    print(f"\n{'phase':<20} {'req/s':>8} {'ratio':>6} {'5xx':>4} verified")
    for ph in report["phases"]:
        ratio = report["ratio_to_direct"][ph["phase"]]
        print(
            f"{ph['phase']:<20} {ph['throughput_per_s']:>8} {ratio:>6} {ph['server_errors']:>4} {ph['verified']}"
        )
    write_json(Path(report["config"]["out"]) / "shard_proxy.json", report, this_run)
    ok = all(ph["server_errors"] == 0 and ph["verified"] for ph in report["phases"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
