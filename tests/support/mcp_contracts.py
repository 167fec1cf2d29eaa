"""Checks of what an MCP server publishes (issue 18): every tool's input schema (valid JSON Schema, every parameter
described, no array ``type``), its output schema and annotations, and a result's full text. Used by the unit
tests (in-memory client) and the transport tests (stdio and /mcp).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator

HINTS = ("read_only_hint", "destructive_hint", "idempotent_hint")

# what each tool does, as an agent must be able to rely on it (readOnly, destructive, idempotent)
EXPECTED_HINTS = {
    "loop.sdk": (True, False, True), "loop.list": (True, False, True), "loop.get": (True, False, True),
    "loop.test": (True, False, True), "script.sdk": (True, False, True), "goal.status": (True, False, True),
    "loop.delete": (False, True, True), "loop.create": (False, False, False), "loop.send": (False, False, True),
    "loop.webhook": (False, True, False), "loop.events": (False, True, False), "loop.build": (False, False, True),
    "session.messages": (False, False, True), "script.run": (False, True, False), "work.add": (False, False, False),
    "work.supersede": (False, True, False),
}


def schema_nodes(schema: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema of ``schema`` with a path (properties, items, anyOf/oneOf branches, additionalProperties)."""
    if not isinstance(schema, dict):
        return
    yield where, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from schema_nodes(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from schema_nodes(schema[key], f"{where}[{key}]")
    for key in ("anyOf", "oneOf"):
        for i, sub in enumerate(schema.get(key) or []):
            yield from schema_nodes(sub, f"{where}|{key}{i}")


def check_listed_tool(tool: Any) -> None:
    """One ``tools/list`` entry of a built-in tool: schemas valid, parameters described, hints present."""
    name = tool.name
    Draft202012Validator.check_schema(tool.input_schema)
    for param, spec in tool.input_schema.get("properties", {}).items():
        assert spec.get("description"), f"{name}.{param} has no description"
    for path, node in schema_nodes(tool.input_schema):
        assert not isinstance(node.get("type"), list), f"{name}{path} uses an array type"
    assert tool.output_schema is not None, f"{name} has no outputSchema"
    assert tool.output_schema["type"] == "object", name
    Draft202012Validator.check_schema(tool.output_schema)
    assert tool.annotations is not None, f"{name} has no annotations"
    for hint in HINTS:
        assert isinstance(getattr(tool.annotations, hint), bool), f"{name}: {hint} not set"
    expected = EXPECTED_HINTS.get(name.replace("_", ".", 1))
    if expected is not None:
        got = tuple(getattr(tool.annotations, hint) for hint in HINTS)
        assert got == expected, f"{name}: hints {got} != {expected}"
    if tool.annotations.read_only_hint:
        assert not tool.annotations.destructive_hint, name


def check_full_text(result: Any, output_schema: dict[str, Any] | None) -> None:
    """``content[0].text`` is the whole structured JSON (nothing cut), and a success matches the outputSchema."""
    text = result.content[0].text
    assert not text.endswith("…")
    assert json.loads(text) == result.structured_content
    if not result.is_error and output_schema is not None:
        Draft202012Validator(output_schema).validate(result.structured_content)
