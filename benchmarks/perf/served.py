"""Commands cold and through a running server: the wall time of ``graphrecall`` commands run as a person (or a
coding agent's hook) runs them, each a fresh process, first with nothing running (every command that embeds loads
the model) and then while ``graphrecall serve`` holds the root (the command sends its operation there).

Cases: ``ingest`` (a two-message session, a new one each time), ``search``; with ``--hooks``, the hook commands
(``session-start``, ``prompt``, ``stop``) fed the hook JSON that Claude Code sends, over a transcript that grows by
one exchange before each ``stop``. Each case runs ``--repeats`` times per mode; the report gives the median, the
minimum and the maximum, and the server's start-up (process start to ready) once.

    python -m benchmarks.perf.served --repeats 5 --hooks --out benchmarks/results/served
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.percentile import percentile
from benchmarks.provenance import Run
from graphrecall.remote import discovery
from graphrecall.server.testing import free_port

ORG, USER = "bench", "ann"


@dataclass
class Case:
    name: str
    argv: Callable[[int], list[str]]  # the command's arguments for repeat i
    stdin: Callable[[int], str] | None = None
    before: Callable[[int], None] | None = None  # prepare repeat i (untimed)


def graphrecall(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "graphrecall", *args, "--root", str(root)]


def time_once(argv: list[str], stdin: str | None, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=600)
    seconds = time.perf_counter() - started
    quiet_hook = (
        "hook" not in argv or not done.stderr.strip()
    )  # a hook exits 0 whatever failed: its stderr says
    if done.returncode != 0 or "error:" in done.stderr or not quiet_hook:
        raise RuntimeError(f"{' '.join(argv[2:5])} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds


def cli_cases(root: Path, work: Path, tag: str) -> list[Case]:
    def session_file(i: int) -> None:
        data = [
            {
                "session_id": f"{tag}-{i}",
                "date": "2024-05-01T10:00:00",
                "messages": [
                    {"role": "user", "content": f"I adopted a cat named Miso{i} last week."},
                    {"role": "assistant", "content": "Congratulations on the new cat!"},
                ],
            }
        ]
        (work / f"{tag}-{i}.json").write_text(json.dumps(data))

    scope = ["--org", ORG, "--user", USER]
    return [
        Case(
            "ingest (2 messages)",
            lambda i: graphrecall(root, "ingest", str(work / f"{tag}-{i}.json"), *scope, "--quiet"),
            before=session_file,
        ),
        Case("search", lambda i: graphrecall(root, "search", "what is my cat called?", *scope)),
    ]


def measure(cases: list[Case], repeats: int, env: dict[str, str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {c.name: [] for c in cases}
    for i in range(repeats):
        for c in cases:
            if c.before is not None:
                c.before(i)
            out[c.name].append(time_once(c.argv(i), c.stdin(i) if c.stdin else None, env))
    return out


def start_server(root: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], float]:
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        graphrecall(root, "serve", "--insecure-local", "--port", str(port), "--log-level", "warning"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while discovery.read(root) is None:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        if time.perf_counter() - started > 300:
            proc.kill()
            raise RuntimeError("the server was not ready after 300 s")
        time.sleep(0.05)
    return proc, time.perf_counter() - started


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(percentile(samples, 50), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
        "n": len(samples),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="runs of each case per mode (default: 5)")
    p.add_argument(
        "--hooks", action="store_true", help="also the hook commands (session-start, prompt, stop)"
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/served"), help="report directory")
    args = p.parse_args(argv)
    run = Run.begin()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for name in ("GRAPHRECALL_URL", "GRAPHRECALL_API_KEY", "GRAPHRECALL_ROOT", "GRAPHRECALL_LLM"):
        env.pop(name, None)
    results: dict[str, Any] = {"repeats": args.repeats, "modes": {}}
    with tempfile.TemporaryDirectory(prefix="served-") as tmp:
        work = Path(tmp)
        root = work / "store"
        cases: dict[str, Callable[[str], list[Case]]] = {"cli": lambda tag: cli_cases(root, work, tag)}
        if args.hooks:
            from benchmarks.perf.served_hooks import hook_cases

            cases["hooks"] = lambda tag: hook_cases(root, work, tag, ORG, USER)
        for mode in ("cold", "server"):
            proc = None
            if mode == "server":
                proc, startup = start_server(root, env)
                results["server_startup_s"] = round(startup, 2)
            try:
                results["modes"][mode] = {
                    name: summary(samples)
                    for make in cases.values()
                    for name, samples in measure(make(mode), args.repeats, env).items()
                }
            finally:
                if proc is not None:
                    proc.terminate()
                    proc.wait(timeout=120)
    names = list(results["modes"]["cold"])
    lines = [
        f"Wall time per command, fresh process each, {args.repeats} runs per mode (median [min-max], s); "
        f"server start-up to ready: {results.get('server_startup_s')} s",
        "",
        "| command | cold (no server) | through `graphrecall serve` |",
        "|---|---|---|",
    ]
    for name in names:
        cold, served = results["modes"]["cold"][name], results["modes"]["server"][name]
        lines.append(
            f"| {name} | {cold['median_s']:.2f} [{cold['min_s']:.2f}-{cold['max_s']:.2f}] | "
            f"{served['median_s']:.2f} [{served['min_s']:.2f}-{served['max_s']:.2f}] |"
        )
    save_report(args.out, "served", results, "\n".join(lines), run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
