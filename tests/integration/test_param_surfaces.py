"""Every operation of ``graphrecall.operations`` takes the same parameters on every surface that exposes it.

The Python API (``Memory`` and ``AsyncMemory``), the HTTP API (its OpenAPI document), the MCP tools (their input
schemas) and the CLI (its argparse options) are each compared with the operation's parameter model: names, types,
defaults, choices and bounds. A parameter added to a model and missing from a surface, or declared differently
there, fails here; so does a bound one surface enforces and another does not.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from mcp import Client
from pydantic import BaseModel

from graphrecall import cli, params
from graphrecall.aio import AsyncMemory
from graphrecall.embed import HashingEmbedder
from graphrecall.errors import InvalidInput
from graphrecall.memory import Memory
from graphrecall.models import FactKind
from graphrecall.operations import OPERATIONS, Operation, exposed
from graphrecall.server.mcp import create_mcp_server
from graphrecall.server.openapi import openapi_schema

REQUIRED = "<required>"
SCOPE_ARGS = {"org_id", "user_id"}  # MCP: whose memory; HTTP has them in the path, the CLI as --org/--user
CLI_OWN = {
    "help",
    "root",
    "debug",
    "embedder",
    "reranker",
    "org",
    "user",
    "json",
    "llm",
    "llm_base_url",
    "yes",
    "url",  # cli_remote: where the command runs, not what it does
    "api_key_file",
    "local",
}
HTTP_OPS = [op.name for op in exposed("http")]
MCP_OPS = [op.name for op in exposed("mcp")]
CLI_OPS = [op.name for op in exposed("cli") if op.cli is not None and not op.cli.custom]
SAMPLE = {"str": "x", "integer": "3"}  # a valid positional value, by JSON-schema type


def described(prop: dict[str, Any], components: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-schema property reduced to what a caller relies on: type, format, choices, bounds, default."""
    options = prop.get("anyOf", [prop])
    kinds = [o for o in options if o.get("type") != "null"]
    assert len(kinds) == 1, prop
    kind = kinds[0]
    if "$ref" in kind and components is not None:
        kind = components[kind["$ref"].rsplit("/", 1)[1]]
    keys = ("type", "format", "enum", "minimum", "maximum", "minLength", "maxLength", "const")
    out = {k: kind[k] for k in keys if k in kind}
    if kind.get("type") == "array":
        items = kind.get("items", {})
        if "$ref" in items and components is not None:
            items = components[items["$ref"].rsplit("/", 1)[1]]
        out["items"] = {k: v for k, v in items.items() if k in keys}
    return out | {"default": prop.get("default", REQUIRED), "nullable": len(options) > 1}


def spec_of(spec: type[BaseModel]) -> dict[str, dict[str, Any]]:
    schema = spec.model_json_schema()
    return {name: described(prop, schema.get("$defs")) for name, prop in schema["properties"].items()}


def same_default(a: Any, b: Any) -> bool:
    """Python spells a list default as a tuple (immutable), a wire as a list."""
    return list(a) == list(b) if isinstance(a, tuple | list) and isinstance(b, tuple | list) else a == b


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return openapi_schema()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory.open(tmp_path / "store", embedder=HashingEmbedder(64)) as m:
        yield m


# -- Python --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_memory_takes_the_spec_parameters_and_its_python_only_ones(name: str) -> None:
    op = OPERATIONS[name]
    for cls in (Memory, AsyncMemory):
        sig = inspect.signature(getattr(cls, name))
        given = [p for p in list(sig.parameters.values())[1:] if not (op.scoped and p.name == "scope")]
        assert {p.name for p in given} == set(op.params.model_fields) | set(op.python_only), cls
        for p in given:
            if p.name in op.params.model_fields:
                field = op.params.model_fields[p.name]
                default = REQUIRED if field.is_required() else field.default
                got = REQUIRED if p.default is inspect.Parameter.empty else p.default
                assert same_default(got, default), (cls, name, p.name)


@pytest.mark.parametrize(
    ("op", "field", "value"),
    [
        (op, name, bound)
        for op in OPERATIONS.values()
        for name, want in spec_of(op.params).items()
        for bound in ([want["minimum"] - 1] if "minimum" in want else [])
        + ([want["maximum"] + 1] if "maximum" in want else [])
    ],
    ids=lambda x: x.name if isinstance(x, Operation) else str(x),
)
def test_python_enforces_every_bound_and_names_the_argument(
    memory: Memory, op: Operation[Any], field: str, value: int
) -> None:
    args = valid_arguments(op) | {field: value}
    scope = [("acme", "alice")] if op.scoped else []
    with pytest.raises(InvalidInput) as caught:
        getattr(memory, op.name)(*scope, **args)
    assert caught.value.where == field


def valid_arguments(op: Operation[Any]) -> dict[str, Any]:
    """Required fields filled with a value the model accepts (so only the field under test is wrong)."""
    out: dict[str, Any] = {}
    for name, field in op.params.model_fields.items():
        if field.is_required():
            out[name] = {
                "messages": [{"role": "user", "content": "x"}],
                "sessions": [{"session_id": "s", "messages": [{"role": "user", "content": "x"}]}],
            }.get(name, "x")
    if op.name == "erase":
        out["matching"] = "word"
    return out


# -- HTTP ----------------------------------------------------------------------------------------------------------
def http_parameters(openapi: dict[str, Any], op: Operation[Any]) -> dict[str, dict[str, Any]]:
    assert op.http is not None
    route = openapi["paths"][op.http.template][op.http.method.lower()]
    components = openapi["components"]["schemas"]
    found: dict[str, dict[str, Any]] = {}
    for p in route.get("parameters", []):
        if p["in"] in ("query", "path") and p["name"] not in ("org", "user"):
            default = REQUIRED if p.get("required") else p["schema"].get("default")
            found[p["name"]] = described(p["schema"], components) | {"default": default}
    if "requestBody" in route:
        ref = route["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        body = components[ref]
        needed = set(body.get("required", []))
        found |= {
            name: described(prop, components)
            | {"default": REQUIRED if name in needed else prop.get("default")}
            for name, prop in body["properties"].items()
        }
    return found


def comparable(found: dict[str, Any], spec: dict[str, Any], path_fields: set[str]) -> tuple[Any, Any]:
    """A path parameter is a plain string in the route (its rules are checked when the handler validates it)."""
    keep = {"default"}
    a = {n: ({k: v for k, v in d.items() if k in keep} if n in path_fields else d) for n, d in found.items()}
    b = {n: ({k: v for k, v in d.items() if k in keep} if n in path_fields else d) for n, d in spec.items()}
    return a, b


@pytest.mark.parametrize("name", HTTP_OPS)
def test_http_takes_the_spec_parameters(openapi: dict[str, Any], name: str) -> None:
    op = OPERATIONS[name]
    assert op.http is not None
    in_path = set(re.findall(r"{(\w+)}", op.http.path))
    expected = spec_of(op.params)
    if op.http.level == "org":  # the organisation is the path's {org}
        assert openapi["paths"][op.http.template][op.http.method.lower()]["parameters"][0]["name"] == "org"
        expected.pop("org_id")
    found, spec = comparable(http_parameters(openapi, op), expected, in_path)
    assert found == spec


@pytest.mark.parametrize("name", HTTP_OPS)
def test_http_documents_the_operation_result_and_its_errors(openapi: dict[str, Any], name: str) -> None:
    op = OPERATIONS[name]
    assert op.http is not None
    route = openapi["paths"][op.http.template][op.http.method.lower()]
    model = op.response_model()
    assert model is not None
    ok = route["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": f"#/components/schemas/{model.__name__}"}
    assert ("404" in route["responses"]) == (op.unknown_scope == "not_found" or any(
        e.__name__ == "NotFound" for e in op.errors))  # fmt: skip
    assert ("409" in route["responses"]) == any(e.__name__ == "NotAvailable" for e in op.errors)


# -- MCP -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MCP_OPS)
async def test_mcp_tools_take_the_spec_parameters(memory: Memory, name: str) -> None:
    op = OPERATIONS[name]
    assert op.mcp is not None
    async with Client(create_mcp_server(memory)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools[op.mcp.tool].input_schema
    found = {
        n: described(prop, schema.get("$defs"))
        for n, prop in schema["properties"].items()
        if n not in SCOPE_ARGS
    }
    assert found == spec_of(op.params)
    required = set(schema.get("required", []))
    assert required == {n for n, p in spec_of(op.params).items() if p["default"] == REQUIRED}


# -- CLI -----------------------------------------------------------------------------------------------------------
def subparser(command: str) -> argparse.ArgumentParser:
    actions = cli.build_parser()._subparsers._group_actions  # type: ignore[union-attr]
    choices: dict[str, argparse.ArgumentParser] = actions[0].choices  # type: ignore[assignment]
    return choices[command]


def positionals(op: Operation[Any]) -> list[str]:
    """Required fields (positionals) with a valid value, and what else makes the command valid on its own."""
    required = [
        "true" if field.annotation is bool else "x"
        for field in op.params.model_fields.values()
        if field.is_required()
    ]
    return required + (["--matching", "word"] if op.name == "erase" else [])


@pytest.mark.parametrize("name", CLI_OPS)
def test_the_cli_takes_the_spec_parameters_with_their_defaults_and_choices(name: str) -> None:
    op = OPERATIONS[name]
    assert op.cli is not None
    expected = spec_of(op.params)
    parser = subparser(op.cli.command)
    options = {a.dest: a for a in parser._actions if a.dest not in CLI_OWN}
    assert set(options) == set(expected)
    parsed = parser.parse_args(
        [*positionals(op), *(["--org", "acme", "--user", "alice"] if op.scoped else [])]
    )
    for field, want in expected.items():
        action = options[field]
        if want["default"] == REQUIRED:
            assert not action.option_strings, f"{field} is required: a positional argument"
            continue
        if want.get("type") == "array":  # a repeatable option: left out, the spec's default applies
            assert isinstance(action, argparse._AppendAction), field
            continue
        if not (op.name == "erase" and field == "matching"):  # given, to make an erase valid at all
            assert getattr(parsed, field) == want["default"], field
        if "enum" in want:
            assert list(action.choices or []) == want["enum"], field
        if want.get("type") == "boolean":
            assert isinstance(action, argparse._StoreTrueAction), field
    # What the CLI parsed becomes the spec model, defaults included.
    values = {n: v for n, v in vars(parsed).items() if n in expected and v is not None}
    assert params.from_cli(op.params, parsed) == op.params.model_validate(values)


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        (name, field, bound)
        for name in CLI_OPS
        for field, want in spec_of(OPERATIONS[name].params).items()
        for bound in ([want["minimum"] - 1] if "minimum" in want else [])
        + ([want["maximum"] + 1] if "maximum" in want else [])
    ],
)
def test_the_cli_enforces_every_bound_and_names_the_flag(name: str, field: str, value: int) -> None:
    op = OPERATIONS[name]
    assert op.cli is not None
    parsed = subparser(op.cli.command).parse_args(
        [
            *positionals(op),
            *(["--org", "a", "--user", "b"] if op.scoped else []),
            params.flag(field),
            str(value),
        ]
    )
    with pytest.raises(InvalidInput) as caught:
        params.from_cli(op.params, parsed)
    assert caught.value.where == params.flag(field)


def test_every_surface_names_a_bad_date_the_same_way(memory: Memory, capsys: Any) -> None:
    """One date rule (``params.DateArg``): the same words from Python, HTTP's validation and the CLI."""
    with pytest.raises(InvalidInput) as python:
        memory.search(("acme", "alice"), "x", question_date="2024-02-30")
    code = cli.main(["search", "x", "--org", "acme", "--user", "alice", "--question-date", "2024-02-30",
                     "--root", str(memory.root), "--embedder", "hashing", "--json"])  # fmt: skip
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and error["where"] == "--question-date"
    assert "day is out of range for month" in str(python.value) and "day is out of range" in error["message"]


def test_question_date_means_the_same_everywhere(openapi: dict[str, Any]) -> None:
    # One description, carried by the HTTP schema and the CLI help of each command that takes a question date.
    assert "omitted = now (UTC)" in params.QUESTION_DATE_HELP
    for name in ("search", "context", "answer"):
        op = OPERATIONS[name]
        assert http_parameters(openapi, op)["question_date"] == spec_of(op.params)["question_date"]
        assert op.cli is not None
        assert params.QUESTION_DATE_HELP in " ".join(subparser(op.cli.command).format_help().split())
    route = openapi["paths"]["/v1/scopes/{org}/{user}/search"]["get"]
    [qd] = [p for p in route["parameters"] if p["name"] == "question_date"]
    assert qd["description"] == params.QUESTION_DATE_HELP


def test_the_fact_kinds_of_the_spec_are_the_models() -> None:
    assert get_args(params.FactKindName) == tuple(k.value for k in FactKind)


def test_every_operation_declares_its_surfaces_consistently() -> None:
    """A CLI command name is unique, an MCP tool name is unique, and an HTTP route is unique."""
    commands = [op.cli.command for op in exposed("cli") if op.cli is not None]
    tools = [op.mcp.tool for op in exposed("mcp") if op.mcp is not None]
    routes = [(op.http.method, op.http.path) for op in exposed("http") if op.http is not None]
    for names in (commands, tools, routes):
        assert len(names) == len(set(names)), names
