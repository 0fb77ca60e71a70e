"""Turning pydantic JSON schemas into what OpenAI's strict ``json_schema`` mode accepts.

Strict mode guarantees schema-valid output, but only for a subset of JSON schema: every object must list all
its properties as required and set ``additionalProperties: false``, ``default`` is not allowed and ``$ref``
may not have sibling keywords. Pydantic schemas break all of these, so they are rewritten here. Fields that
have a default in pydantic simply become required: the model then always fills them in, which
pydantic accepts.
"""

from __future__ import annotations

from typing import Any

_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
_DROP = {"default", "$defs", "definitions", "discriminator"}


class NotStrictable(ValueError):
    """The schema contains free-form objects (``dict[str, X]``), which strict mode cannot express."""


def _ref_name(ref: str) -> str | None:
    prefix = "#/$defs/"
    return ref[len(prefix) :] if ref.startswith(prefix) else None


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str) and (name := _ref_name(node["$ref"])):
            found.add(name)
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _refs(value)
    return found


def _recursive_defs(defs: dict[str, Any]) -> set[str]:
    """Definitions that can reach themselves; those must stay as ``$ref`` (inlining would never end)."""
    graph = {name: _refs(body) for name, body in defs.items()}
    out: set[str] = set()
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            cur = todo.pop()
            if cur == start:
                out.add(start)
                break
            if cur in seen or cur not in graph:
                continue
            seen.add(cur)
            todo.extend(graph[cur])
    return out


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return a strict-mode copy of ``schema``; raise ``NotStrictable`` when that is impossible."""
    defs: dict[str, Any] = schema.get("$defs", {})
    keep = _recursive_defs(defs)

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = _ref_name(ref)
            if name is not None and name in defs and name not in keep:
                merged = walk(defs[name])
                if "description" in node:
                    merged["description"] = node["description"]
                return merged
            return {"$ref": ref}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROP or (key == "format" and value not in _FORMATS):
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {k: walk(v) for k, v in value.items()}
            else:
                out[key] = walk(value)
        if out.get("type") == "object" or "properties" in out:
            extra = node.get("additionalProperties")
            if "properties" not in out or isinstance(extra, dict):
                raise NotStrictable(f"free-form object in schema: {node.get('title', node)!r}")
            out["additionalProperties"] = False
            out["required"] = list(out["properties"])
        return out

    result: dict[str, Any] = walk(schema)
    if keep:
        result["$defs"] = {name: walk(defs[name]) for name in sorted(keep)}
    return result
