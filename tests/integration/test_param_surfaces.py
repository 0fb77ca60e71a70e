"""search, context, answer, facts, profile, add_fact, erase and consolidate take the same parameters on every surface: the HTTP API, the MCP tools and
the CLI are each compared with ``graphrecall.params`` (name, type, default, bounds), so a parameter added to the
spec and missing from a surface, or declared differently there, fails here."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from mcp import Client
from pydantic import BaseModel

from graphrecall import cli, params
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import InvalidInput
from graphrecall.memory import Memory
from graphrecall.models import FactKind
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.openapi import openapi_schema

REQUIRED = "<required>"
HTTP = {"search": ("get", "search"), "context": ("get", "context"), "answer": ("post", "answer"), "facts": ("get", "facts"),
        "profile": ("get", "profile"), "add_fact": ("post", "facts"), "erase": ("post", "erase"),
        "consolidate": ("post", "consolidate")}  # fmt: skip
MCP_TOOL = {name: f"memory_{name}" for name in params.SPECS}
SCOPE_ARGS = {"org_id", "user_id"}  # MCP: whose memory; HTTP has them in the path, the CLI as --org/--user
CLI_OWN = {"help", "root", "debug", "embedder", "org", "user", "json", "llm", "llm_base_url", "yes"}
POSITIONAL = {
    "search": ["q"],
    "context": ["q"],
    "answer": ["q?"],
    "facts": [],
    "profile": [],
    "add_fact": ["x"],
    "erase": [],
    "consolidate": [],
}
CLI_COMMAND = {"add_fact": "add-fact"}  # the CLI spells multi-word commands with a dash


def described(prop: dict[str, Any], components: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-schema property reduced to what a caller relies on: type, format, choices, bounds, default."""
    options = prop.get("anyOf", [prop])
    kinds = [o for o in options if o.get("type") != "null"]
    assert len(kinds) == 1, prop
    kind = kinds[0]
    if "$ref" in kind and components is not None:
        kind = components[kind["$ref"].rsplit("/", 1)[1]]
    keys = ("type", "format", "enum", "minimum", "maximum", "minLength", "maxLength")
    return {k: kind[k] for k in keys if k in kind} | {
        "default": prop.get("default", REQUIRED),
        "nullable": len(options) > 1,
    }


def spec_of(spec: type[BaseModel]) -> dict[str, dict[str, Any]]:
    schema = spec.model_json_schema()
    return {name: described(prop, schema.get("$defs")) for name, prop in schema["properties"].items()}


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return openapi_schema()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        yield m


@pytest.mark.parametrize("command", sorted(params.SPECS))
def test_http_takes_the_spec_parameters(openapi: dict[str, Any], command: str) -> None:
    method, path = HTTP[command]
    op = openapi["paths"][f"/v1/scopes/{{org}}/{{user}}/{path}"][method]
    components = openapi["components"]["schemas"]
    if method == "get":
        found = {}
        for p in op["parameters"]:
            if p["in"] == "query":
                # An optional query parameter without a default in its schema is absent, i.e. None.
                default = REQUIRED if p.get("required") else p["schema"].get("default")
                found[p["name"]] = described(p["schema"], components) | {"default": default}
    else:
        ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        body = components[ref]
        needed = set(body.get("required", []))
        found = {
            name: described(prop, components)
            | {"default": REQUIRED if name in needed else prop.get("default")}
            for name, prop in body["properties"].items()
        }
    assert found == spec_of(params.SPECS[command])


@pytest.mark.parametrize("command", sorted(params.SPECS))
async def test_mcp_tools_take_the_spec_parameters(memory: Memory, command: str) -> None:
    async with Client(create_mcp_server(memory)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools[MCP_TOOL[command]].input_schema
    found = {
        name: described(prop, schema.get("$defs"))
        for name, prop in schema["properties"].items()
        if name not in SCOPE_ARGS
    }
    assert found == spec_of(params.SPECS[command])
    required = set(schema.get("required", []))
    assert required == {n for n, p in spec_of(params.SPECS[command]).items() if p["default"] == REQUIRED}


def subparser(command: str) -> argparse.ArgumentParser:
    actions = cli.build_parser()._subparsers._group_actions  # type: ignore[union-attr]
    choices: dict[str, argparse.ArgumentParser] = actions[0].choices  # type: ignore[assignment]
    return choices[CLI_COMMAND.get(command, command)]


def bounded(command: str) -> bool:
    return any("minimum" in p or "maximum" in p for p in spec_of(params.SPECS[command]).values())


@pytest.mark.parametrize("command", sorted(params.SPECS))
def test_the_cli_takes_the_spec_parameters_with_their_defaults_and_choices(command: str) -> None:
    spec = params.SPECS[command]
    expected = spec_of(spec)
    parser = subparser(command)
    options = {a.dest: a for a in parser._actions if a.dest not in CLI_OWN}
    assert set(options) == set(expected)
    parsed = parser.parse_args([*POSITIONAL[command], "--org", "acme", "--user", "alice"])
    for name, want in expected.items():
        action = options[name]
        if want["default"] == REQUIRED:
            assert not action.option_strings, f"{name} is required: a positional argument"
            continue
        assert getattr(parsed, name) == want["default"], name
        if "enum" in want:
            assert list(action.choices or []) == want["enum"], name
        if want.get("type") == "boolean":
            assert isinstance(action, argparse._StoreTrueAction), name
    # What the CLI parsed becomes the spec model, defaults included.
    assert params.from_cli(spec, parsed) == spec.model_validate(
        {n: v for n, v in vars(parsed).items() if n in expected}
    )


@pytest.mark.parametrize("command", sorted(c for c in params.SPECS if bounded(c)))
def test_the_cli_enforces_the_spec_bounds_and_names_the_flag(command: str) -> None:
    spec = params.SPECS[command]
    parser = subparser(command)
    checked = 0
    for name, want in spec_of(spec).items():
        for bound, step in (("minimum", -1), ("maximum", 1)):
            if bound not in want:
                continue
            value = str(want[bound] + step)
            parsed = parser.parse_args(
                [*POSITIONAL[command], "--org", "a", "--user", "b", params.flag(name), value]
            )
            with pytest.raises(InvalidInput) as caught:
                params.from_cli(spec, parsed)
            assert caught.value.where == params.flag(name)
            checked += 1
    assert checked > 0


def test_question_date_means_the_same_everywhere(openapi: dict[str, Any]) -> None:
    # One description, carried by the HTTP schema and the CLI help of each command that takes a question date.
    assert "omitted = now (UTC)" in params.QUESTION_DATE_HELP
    for command in ("search", "context", "answer"):
        method, path = HTTP[command]
        op = openapi["paths"][f"/v1/scopes/{{org}}/{{user}}/{path}"][method]
        if method == "get":
            [qd] = [p for p in op["parameters"] if p["name"] == "question_date"]
            assert qd["description"] == params.QUESTION_DATE_HELP
        else:
            body = openapi["components"]["schemas"]["AnswerRequest"]["properties"]
            assert body["question_date"]["description"] == params.QUESTION_DATE_HELP
        assert params.QUESTION_DATE_HELP in " ".join(subparser(command).format_help().split())


def test_the_fact_kinds_of_the_spec_are_the_models() -> None:
    assert get_args(params.FactKindName) == tuple(k.value for k in FactKind)
