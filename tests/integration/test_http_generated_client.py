"""A client generated from docs/openapi.json by a real generator (openapi-python-client) drives a live server.

This is what a team consuming the API does: generate, import, call. The test checks that the generated methods are
the short operation ids (``search``, ``add_session``...) rather than FastAPI's path-derived names, and that requests
and typed responses work end to end over loopback HTTP with an API key.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from graphrecall import Memory
from graphrecall.llm import ScriptedLLM, Step
from graphrecall.server import create_app
from graphrecall.server.auth import ApiKey, ApiKeyAuth, hash_key
from graphrecall.server.openapi import openapi_schema
from graphrecall.server.testing import serve_in_thread

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "graphrecall_generated_client"
SECRET = "gr_generated-client-0123456789abcdef"


def generator() -> str | None:
    beside = Path(sys.executable).parent / "openapi-python-client"
    return str(beside) if beside.exists() else shutil.which("openapi-python-client")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    tool = generator()
    if tool is None:
        pytest.skip(
            "openapi-python-client is not installed (it is in the dev extra: pip install -e '.[dev]')"
        )
    out = tmp_path_factory.mktemp("generated")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [tool, "generate", "--path", str(REPO / "docs" / "openapi.json"), "--meta", "none",
         "--output-path", str(out / PACKAGE)],
        capture_output=True, text=True, timeout=300, env=env, cwd=out,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def operation(tag: str, name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.api.{tag}.{name}")


def test_generated_methods_are_the_short_operation_ids_grouped_by_tag(generated: ModuleType) -> None:
    api = Path(generated.__file__).parent / "api"
    found = {
        (tag.name, module.stem)
        for tag in api.iterdir()
        if tag.is_dir() and not tag.name.startswith("_")
        for module in tag.glob("*.py")
        if module.stem != "__init__"
    }
    documented = {
        (op["tags"][0], op["operationId"])
        for ops in openapi_schema()["paths"].values()
        for op in ops.values()
    }
    assert found == documented
    assert {name for _, name in found} >= {
        "add_session", "add_messages", "search", "context", "answer", "facts", "stats",
        "list_sessions", "get_session", "forget",
    }  # fmt: skip
    assert all("_v1_" not in name for _, name in found)


@pytest.fixture
def url(mem: Memory) -> Iterator[str]:
    auth = ApiKeyAuth([ApiKey("generated", hash_key(SECRET), frozenset({"acme"}))])
    with serve_in_thread(create_app(mem, auth=auth)) as u:
        yield u


def test_the_generated_client_drives_a_live_server_with_typed_objects(
    generated: ModuleType, url: str, mem: Memory
) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    client = generated.AuthenticatedClient(base_url=url, token=SECRET, raise_on_unexpected_status=True)
    turns = [
        models.MessageIn(role=models.Role.USER, content="My sister Ana moved to Porto last month."),
        models.MessageIn(role=models.Role.ASSISTANT, content="Nice!"),
    ]
    body = models.AddSessionParams(
        session_id="s1", messages=turns, date=datetime.fromisoformat("2024-03-01T10:00:00")
    )
    added = operation("sessions", "add_session").sync("acme", "alice", client=client, body=body)
    assert isinstance(added, models.IngestResult) and added.sessions_added == 1

    more = models.AddMessagesParams(
        session_id="s2", messages=[models.MessageIn(role=models.Role.USER, content="I bought a green bike.")]
    )
    appended = operation("sessions", "add_messages").sync("acme", "alice", client=client, body=more)
    assert isinstance(appended, models.IngestResult) and appended.messages_added == 1

    found = operation("recall", "search").sync(
        "acme", "alice", client=client, query="where does Ana live", k=2
    )
    assert isinstance(found, models.SearchResponse)
    direct = mem.search(("acme", "alice"), "where does Ana live", 2)
    assert [h.id for h in found.hits] == [h.id for h in direct]
    assert isinstance(found.hits[0], models.Hit) and found.hits[0].session_id == "s1"

    ctx = operation("recall", "context").sync(
        "acme", "alice", client=client, query="green bike", token_budget=300
    )
    assert isinstance(ctx, models.Context) and "green bike" in ctx.text and ctx.token_count <= 300

    mem.llm = ScriptedLLM(
        [
            Step("Retrieved memory", {"verdict": "YES", "evidence_ids": ["s1@0"]}),
            Step("Memory excerpts", "NOTES:\n[s1@0] Ana moved to Porto\nANSWER: Porto.\nEVIDENCE: [s1@0]"),
        ]
    )
    ask = models.AnswerParams(
        question="Where does my sister live?",
        question_date=datetime.fromisoformat("2024-04-01T00:00:00"),
        mode=models.AnswerParamsMode.RECALL,
    )
    answer = operation("recall", "answer").sync("acme", "alice", client=client, body=ask)
    assert isinstance(answer, models.Answer)
    assert answer.text == "Porto." and [c.hit_id for c in answer.citations] == ["s1@0"]

    stats = operation("scope", "stats").sync("acme", "alice", client=client)
    assert isinstance(stats, models.ScopeStats) and (stats.sessions, stats.messages) == (2, 3)
    listed = operation("sessions", "list_sessions").sync("acme", "alice", client=client)
    assert [s.id for s in listed.sessions] == ["s1", "s2"]


def test_generated_client_errors_are_typed_error_responses(generated: ModuleType, url: str) -> None:
    models = importlib.import_module(f"{PACKAGE}.models")
    anonymous = generated.Client(base_url=url)
    refused = operation("recall", "search").sync("acme", "alice", client=anonymous, query="x")
    assert isinstance(refused, models.ErrorResponse) and refused.error.code == "unauthorized"
    client = generated.AuthenticatedClient(base_url=url, token=SECRET)
    other_org = operation("scope", "stats").sync("globex", "bob", client=client)
    assert isinstance(other_org, models.ErrorResponse) and other_org.error.code == "forbidden"
