"""The Java example (examples/java) against a live server on loopback: it compiles with plain ``javac`` (no jars),
authenticates, stores a session whose text needs JSON escaping, finds it again, reads context, and gets the
API's error code for a bad request."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphrecall import Memory
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.testing import serve_in_thread

JAVA_DIR = Path(__file__).resolve().parents[2] / "examples" / "java"
SECRET = "gr_java-example-secret"
SAID = 'We\'re moving to Zürich in September — my "new" office is near the lake.\nAny tips?'

pytestmark = pytest.mark.skipif(
    shutil.which("javac") is None or shutil.which("java") is None,
    reason="javac/java (JDK 17+) not on PATH; the Java example cannot be compiled here",
)


@pytest.fixture
def url(mem: Memory) -> Iterator[str]:
    auth = ApiKeyAuth([ApiKey("java-example", hash_key(SECRET), frozenset({"acme"}))])
    with serve_in_thread(create_app(mem, auth=auth)) as u:
        yield u


def test_java_example_adds_searches_and_reads_context(url: str, mem: Memory, tmp_path: Path) -> None:
    classes = tmp_path / "classes"
    subprocess.run(
        ["javac", "-Xlint:all", "-Werror", "-d", str(classes), *map(str, sorted(JAVA_DIR.glob("*.java")))],
        check=True,
        capture_output=True,
        timeout=180,
    )
    run = subprocess.run(
        ["java", "-cp", str(classes), "Example", url, SECRET, "acme", "java-demo"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert "messages_added=2" in lines
    assert "top_session=move-1" in lines
    assert "error_code=invalid_input status=422 field=k" in lines
    context = run.stdout.split("context_text_begin\n", 1)[1].split("\ncontext_text_end", 1)[0]
    assert SAID in context  # unescaped on the way back, byte for byte

    # the hand-written JSON escaping delivered the text exactly
    stored = mem.get_session(("acme", "java-demo"), "move-1")
    assert stored.messages[0].content == SAID
    assert stored.started_at.isoformat() == "2024-03-02T18:30:00"
