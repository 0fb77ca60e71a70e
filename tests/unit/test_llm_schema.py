"""Rewriting pydantic schemas for OpenAI's strict json_schema mode."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from graphrecall.llm._schema import NotStrictable, strict_json_schema


class Entity(BaseModel):
    name: str
    aliases: list[str] = Field(default_factory=list, description="other names")


class Extraction(BaseModel):
    facts: list[str]
    main: Entity = Field(description="the main entity")
    others: list[Entity] = []
    confidence: float = 1.0


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


def objects(node: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found += objects(value)
    elif isinstance(node, list):
        for value in node:
            found += objects(value)
    return found


def test_every_object_is_closed_and_requires_all_its_properties() -> None:
    schema = strict_json_schema(Extraction.model_json_schema())

    assert "$defs" not in schema  # non-recursive refs are inlined
    assert len(objects(schema)) == 3  # root, main, others[] item
    for obj in objects(schema):
        assert obj["additionalProperties"] is False
        assert set(obj["required"]) == set(obj["properties"])
    assert "default" not in str(schema)
    assert schema["properties"]["main"]["description"] == "the main entity"


def test_recursive_models_keep_their_definitions() -> None:
    schema = strict_json_schema(Tree.model_json_schema())

    assert schema["$ref"] == "#/$defs/Tree"
    assert schema["$defs"]["Tree"]["additionalProperties"] is False


def test_free_form_dicts_cannot_be_strict() -> None:
    class Loose(BaseModel):
        attrs: dict[str, int]

    with pytest.raises(NotStrictable):
        strict_json_schema(Loose.model_json_schema())
