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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import provenance
from benchmarks.jsonfile import data_file
from benchmarks.provenance import Run
from benchmarks.ray_loopback import LoopbackCluster


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
    this_run = Run.begin()
    os.environ["HF_HUB_OFFLINE"] = "1"  # for the harness runs and, through them, every worker
    work = Path(tempfile.mkdtemp(prefix="ray-nodes-"))
    results: dict[str, dict[str, float]] = {}
    try:
        with LoopbackCluster(cpus=args.cpus) as cluster:
            results["one node"] = _run(args.data, args.limit, cluster.address, args.cpus, work, "one")
            cluster.add_node()
            results["two nodes"] = _run(args.data, args.limit, cluster.address, args.cpus, work, "two")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, r in results.items():
        print(f"{name}: {r['batch_s']:.1f} s batch ({r['wall_s']:.1f} s with start-up), "
              f"{args.limit / r['batch_s'] * 60:.2f} questions/min")  # fmt: skip
    one, two = results["one node"]["batch_s"], results["two nodes"]["batch_s"]
    print(f"throughput ratio two/one: {one / two:.2f}")
    print(provenance.markdown(this_run.finish()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
