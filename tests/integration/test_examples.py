"""The shipped examples run as a user would run them (real bundled model) and show the evidence they promise."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
pytestmark = pytest.mark.slow


def run_example(name: str, *args: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return proc.stdout


def session_mentioning(phrase: str) -> str:
    """The id of the one example session whose text contains ``phrase``."""
    history = json.loads((EXAMPLES / "chat_history.json").read_text())
    [sid] = [s["session_id"] for s in history if phrase in json.dumps(s)]
    return str(sid)


def test_quickstart_recalls_the_dog_and_the_move() -> None:
    out = run_example("quickstart.py")
    lines = out.splitlines()
    assert "Biscuit" in lines[0]  # the best hit for "What is my dog called?"
    assert "### Session" in out and "Denver" in out


def test_demo_answers_each_question_with_the_right_session_first_and_can_rerun(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    out = run_example("demo.py", "--root", root)
    answers = {
        "Where do I live now?": session_mentioning("live in Denver now"),
        "What is my dog's name?": session_mentioning("We named him Biscuit"),
        "What did I plan for my trip?": session_mentioning("trip to Japan"),
    }
    for question, sid in answers.items():
        block = out.split(f"Q: {question}\n", 1)[1]
        first_hit = block.splitlines()[0]
        assert re.match(r"\s+1\. \[\d{4}-\d{2}-\d{2}\] ", first_hit), first_hit
        assert sid in first_hit, f"{question}: {first_hit}"
    assert "Context for a reader" in out
    stored = re.search(r"(\d+) new messages", out)
    assert stored and int(stored.group(1)) > 0
    again = run_example("demo.py", "--root", root)  # a kept store: the second run adds nothing
    assert f"0 new sessions, 0 new messages ({stored.group(1)} already stored)" in again
