"""What every benchmark report records about the run behind it: the code, the machine and the date.

Why: a figure is only worth comparing with another when both say what produced them. The commit (and whether the
tree held uncommitted changes) says which code ran; the cores and the load average at the start and at the end say
how much of the machine it had, which on a shared 2-core machine moves a latency more than most code changes; the
Python version, the platform and the date place it among the other runs. Before this module no report recorded its
commit and most did not record the machine.

``Run.begin()`` at the start of a benchmark, ``run.finish()`` when its report is written (``benchmarks.jsonfile``
puts it into every JSON and Markdown report). The checkout is the one this module lives in; when ``graphrecall``
was imported from another one (a venv with another checkout installed editable, a worktree on ``PYTHONPATH``) that
one is recorded too, because then it is the code that was measured.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import graphrecall

BENCHMARKS = Path(__file__).resolve().parent
GRAPHRECALL = Path(graphrecall.__file__).resolve().parent


def _git(directory: Path, *args: str) -> str | None:
    """``git`` read-only: ``--no-optional-locks`` keeps ``status`` from rewriting the index of a checkout that
    another process (an editor, another benchmark) may be using."""
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(directory), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def code_state(directory: Path) -> dict[str, Any]:
    """The git checkout holding ``directory``: its top level, ``commit`` (HEAD) and ``dirty``.

    ``dirty`` is true when ``git status`` lists anything, untracked files included: a new module that is not
    committed yet is code the commit does not hold. Outside a checkout (or without git) all three are ``None``,
    which a report shows as "unknown" rather than guessing.
    """
    top = _git(directory, "rev-parse", "--show-toplevel")
    commit = _git(directory, "rev-parse", "HEAD")
    status = _git(directory, "status", "--porcelain")
    return {
        "checkout": top.strip() if top else None,
        "commit": commit.strip() if commit else None,
        "dirty": None if status is None else bool(status.strip()),
    }


def _load() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Run:
    """One benchmark run, from ``begin()`` to ``finish()``."""

    started: str
    load_start: list[float]
    code: dict[str, Any]
    command: str
    _record: dict[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def begin(cls) -> Run:
        """Take the start's load average, time and code state (before the work changes either)."""
        code = code_state(BENCHMARKS)
        theirs = code_state(GRAPHRECALL)
        code["graphrecall"] = str(GRAPHRECALL)
        if theirs["checkout"] != code["checkout"]:
            code["graphrecall_checkout"] = theirs
        return cls(
            started=_now(),
            load_start=_load(),
            code=code,
            command=shlex.join(getattr(sys, "orig_argv", sys.argv)),
        )

    @classmethod
    def recorded(cls, record: dict[str, Any]) -> Run:
        """The run behind an existing record: a report re-rendered from its JSON keeps the record of the run that
        measured its figures, not the re-rendering's."""
        return cls(
            record["started"], record["machine"]["load_start"], record["code"], record["command"], record
        )

    def snapshot(self) -> dict[str, Any]:
        """The record so far, for a partial report written while the run goes on (``finished`` is null)."""
        return self._record if self._record is not None else self._make(finished=None)

    def finish(self) -> dict[str, Any]:
        """The run's record (JSON-ready), with the end's load average and time.

        The first call fixes the end, so that every report of one run (its JSON and its Markdown, written one
        after the other) carries the same record.
        """
        if self._record is None:
            self._record = self._make(finished=_now())
        return self._record

    def _make(self, finished: str | None) -> dict[str, Any]:
        cpus = os.cpu_count()
        return {
            "started": self.started,
            "finished": finished,
            "command": self.command,
            "code": self.code,
            "machine": {
                "cores": cpus,
                "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus,
                "load_start": self.load_start,
                "load_end": _load(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
        }


def _commit(state: dict[str, Any]) -> str:
    if not state.get("commit"):
        return "commit unknown"
    tree = {True: "uncommitted changes", False: "clean tree", None: "tree state unknown"}[state.get("dirty")]
    return f"commit `{state['commit'][:12]}` ({tree})"


def markdown(record: dict[str, Any]) -> str:
    """The record as one line for the end of a Markdown report."""
    code, machine = record["code"], record["machine"]
    parts = [_commit(code)]
    if "graphrecall_checkout" in code:
        other = code["graphrecall_checkout"]
        parts.append(f"graphrecall imported from {code['graphrecall']}, {_commit(other)}")
    load_start, load_end = machine["load_start"], machine["load_end"]
    load = (
        f"load average (1 min) {load_start[0]:.2f} at start, {load_end[0]:.2f} at end"
        if load_start and load_end
        else "load average unknown"
    )
    parts += [
        f"{record['started']} to {record['finished'] or '(still running)'}",
        f"{machine['cores']} cores ({machine['cores_usable']} usable), {load}",
        f"Python {machine['python']} on {machine['platform']}",
    ]
    return "Run: " + "; ".join(parts) + "."
