"""``graphrecall reembed`` killed (SIGKILL) at random moments: does the store always open whole, with one embedder
or the other? The measurement behind ``store.move.torn`` and ``store.database.create_bucket``.

A store of ``--sessions`` sessions of one user (two turns each, two facts, a superseded one) is written once with a
64-d hashing embedder; one unkilled run to 128-d measures how long a run takes. Then each trial copies the store,
starts ``graphrecall reembed`` on the copy, kills it at a moment drawn uniformly from ``--window`` (fractions of
that duration, after the run's first output: the default is the run's second half, where the rows are copied into
the new bucket and the files swapped), and opens the copy: it must open with exactly one of the two embedders and
export exactly what it held (sessions, messages, facts, supersessions). A trial counts as ``old`` (the kill came
before the swap's commit point), ``new`` (after it: the next open finished the swap), ``finished`` (the run ended
before the kill) or ``failed`` (the store did not open whole: the copy is kept under ``--out`` for a look).

    python -m benchmarks.perf.reembed_kills --trials 60
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.jsonfile import save_report
from benchmarks.provenance import Run
from graphrecall import EmbedderMismatch, Memory
from graphrecall.embed import HashingEmbedder
from graphrecall.models import Scope

ANA = Scope(org_id="acme", user_id="ana")


def seed(root: Path, sessions: int) -> None:
    with Memory.open(root, embedder=HashingEmbedder(64)) as m:
        m.add_sessions(
            ANA,
            [
                {
                    "session_id": f"s{i}",
                    "date": f"2024-03-{1 + i % 28:02d}T10:00:00",
                    "messages": [
                        {
                            "role": "user",
                            "content": f"I bought a red bicycle, number {i}, and rode to Lisbon",
                        },
                        {"role": "assistant", "content": f"Enjoy bicycle {i}!"},
                    ],
                }
                for i in range(sessions)
            ],
        )
        old = m.add_fact(ANA, "The user lives in Porto.", valid_from="2024-01-01")
        new = m.add_fact(ANA, "The user lives in Lisbon.", valid_from="2024-03-01")
        m.supersede(ANA, old.fact.id, new.fact.id)


def contents(root: Path, dim: int) -> dict[str, Any] | None:
    """What the scope holds, opened with the ``dim``-d embedder; None when the store was written with the other."""
    try:
        with Memory.open(root, embedder=HashingEmbedder(dim)) as m:
            doc = m.export_scope(ANA).model_dump(mode="json")
    except EmbedderMismatch:
        return None
    for key in ("embedder_id", "exported_at"):
        doc.pop(key)
    return doc


def command(root: Path) -> list[str]:
    return [sys.executable, "-m", "graphrecall", "reembed", "--root", str(root), "--embedder", "hashing:128",
            "--org", "acme", "--user", "ana"]  # fmt: skip


def start(root: Path) -> tuple[subprocess.Popen[bytes], float]:
    """The run, started; returns once it printed its first output (then its stderr is drained in the background:
    a full pipe would stall it), with that moment."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.Popen(command(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert run.stderr is not None
    run.stderr.read(1)
    at = time.perf_counter()
    threading.Thread(target=run.stderr.read, daemon=True).start()
    return run, at


def trial(base: Path, work: Path, delay: float, expected: dict[str, Any], keep: Path, n: int) -> str:
    root = work / "trial"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(base, root)
    run, at = start(root)
    time.sleep(max(0.0, at + delay - time.perf_counter()))
    if run.poll() is None:
        run.send_signal(signal.SIGKILL)
    run.wait(120)
    killed = run.returncode == -signal.SIGKILL
    try:
        opened = {dim: contents(root, dim) for dim in (64, 128)}
    except Exception as e:  # the store does not open at all
        print(f"  trial {n + 1}: {type(e).__name__}: {e}", flush=True)
        opened = {}
    whole = [dim for dim, doc in opened.items() if doc == expected]
    if len(whole) == 1 and sum(doc is not None for doc in opened.values()) == 1:
        return ("old" if whole == [64] else "new") if killed else "finished"
    shutil.copytree(root, keep / f"failed-{n + 1}")
    return "failed"


def measure(
    sessions: int, trials: int, window: tuple[float, float], seed_: int, keep: Path
) -> dict[str, Any]:
    rng = random.Random(seed_)
    with tempfile.TemporaryDirectory(prefix="reembed-kills-") as tmp:
        work = Path(tmp)
        base = work / "base"
        seed(base, sessions)
        expected = contents(base, 64)
        assert expected is not None
        probe = work / "probe"
        shutil.copytree(base, probe)
        run, at = start(probe)
        run.wait(600)
        duration = time.perf_counter() - at
        if run.returncode != 0 or contents(probe, 128) != expected:
            raise SystemExit("an unkilled run did not move the store whole: fix that first")
        print(f"an unkilled run: {duration:.2f} s after its first output", flush=True)
        outcomes: dict[str, int] = {"old": 0, "new": 0, "finished": 0, "failed": 0}
        for n in range(trials):
            delay = duration * rng.uniform(*window)
            got = trial(base, work, delay, expected, keep, n)
            outcomes[got] += 1
            print(f"  trial {n + 1}: killed {delay:.2f} s in: {got}", flush=True)
    return {"duration_s": duration, "outcomes": outcomes}


def report(res: dict[str, Any]) -> str:
    a, o = res["args"], res["outcomes"]
    return "\n".join(
        [
            f"# graphrecall reembed killed at random moments ({a['trials']} trials, {a['sessions']} sessions)",
            "",
            f"An unkilled run: {res['duration_s']:.2f} s after its first output; kills drawn uniformly from "
            f"{a['window']} of it.",
            "",
            "| killed before the swap's commit point: old store, whole | after it: new store, whole "
            "| run finished first | store not whole |",
            "|---:|---:|---:|---:|",
            f"| {o['old']} | {o['new']} | {o['finished']} | **{o['failed']}** |",
            "",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--sessions", type=int, default=400)
    ap.add_argument(
        "--window", default="0.5,1.0", help="kill moments, as fractions of a run (default: %(default)s)"
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/reembed_kills"))
    a = ap.parse_args()
    lo, _, hi = a.window.partition(",")
    try:
        window = (float(lo), float(hi))
    except ValueError:
        ap.error(f"--window takes two fractions, such as 0.5,1.0 (got {a.window!r})")
    if not 0 <= window[0] <= window[1] or a.trials < 1 or a.sessions < 1:
        ap.error("--window must be two increasing fractions from 0; --trials and --sessions at least 1")
    record = Run.begin()
    a.out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"args": {k: str(v) for k, v in vars(a).items()}}
    res.update(measure(a.sessions, a.trials, window, a.seed, a.out))
    save_report(a.out, "reembed_kills", res, report(res), record)
    if res["outcomes"]["failed"]:
        raise SystemExit(
            f"{res['outcomes']['failed']} trial(s) left a store that does not open whole: {a.out}"
        )


if __name__ == "__main__":
    main()
