"""Throughput of a LongMemEval retrieval batch on a one-node and then a two-node Ray cluster on this machine.

Starts a head node (``--cpus`` CPUs) on loopback, runs ``benchmarks.longmemeval.retrieval --ray ADDRESS`` on the
first ``--limit`` questions, adds a second node of the same size, runs the same questions again, and prints the
wall times and their ratio. Each run gets an empty embedding cache of its own, so both embed every round (a warm
cache would measure SQLite, not the work). ``ray stop --force`` runs whatever happens.

    python -m benchmarks.ray_nodes --data ../shared/data/longmemeval/longmemeval_s_dev.json.gz --limit 16
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.jsonfile import data_file


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> str:
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else (shutil.which("ray") or "ray")


def _run(data: Path, limit: int, address: str, cpus: float, work: Path, name: str) -> dict[str, float]:
    out = work / name
    cmd = [
        sys.executable, "-m", "benchmarks.longmemeval.retrieval", "--data", str(data), "--limit", str(limit),
        "--out", str(out), "--embed-cache", str(work / f"{name}-cache.sqlite"), "--folds", "0",
        "--ray", address, "--ray-cpus", str(cpus),
    ]  # fmt: skip
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    total = time.perf_counter() - t0
    config = json.loads((out / "retrieval.json").read_text())["config"]
    return {"wall_s": total, "batch_s": float(config["wall_s"])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ray_nodes", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, type=data_file)
    p.add_argument("--limit", type=int, default=16)
    p.add_argument("--cpus", type=float, default=1.0, help="CPUs of each node, and of each task")
    args = p.parse_args(argv)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    env = os.environ | {"RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    os.environ.update({"RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"})
    node = [f"--num-cpus={args.cpus:g}", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    cli = _ray_cli()
    work = Path(tempfile.mkdtemp(prefix="ray-nodes-"))
    results: dict[str, dict[str, float]] = {}
    try:
        subprocess.run(
            [cli, "start", "--head", f"--port={port}", "--include-dashboard=false", *node],
            check=True, env=env, capture_output=True,
        )  # fmt: skip
        results["one node"] = _run(args.data, args.limit, address, args.cpus, work, "one")
        subprocess.run(
            [cli, "start", f"--address={address}", *node], check=True, env=env, capture_output=True
        )
        results["two nodes"] = _run(args.data, args.limit, address, args.cpus, work, "two")
    finally:
        subprocess.run([cli, "stop", "--force"], env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    for name, r in results.items():
        print(f"{name}: {r['batch_s']:.1f} s batch ({r['wall_s']:.1f} s with start-up), "
              f"{args.limit / r['batch_s'] * 60:.2f} questions/min")  # fmt: skip
    one, two = results["one node"]["batch_s"], results["two nodes"]["batch_s"]
    print(f"throughput ratio two/one: {one / two:.2f}; load average now {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
