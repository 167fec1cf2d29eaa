"""The ``wakeful.bench.density/1`` JSON schema (benchmarks.md §1.7) and a small validator for it.

The schema is JSON Schema (draft 2020-12 subset: type, required, properties, items, enum, const,
additionalProperties); ``validate`` implements exactly that subset so the benchmark checks its own output.
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import WakefulError

__all__ = ["DENSITY_SCHEMA", "HEADER_PROPERTIES", "BenchSchemaError", "validate"]

_NUM = {"type": "number"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_INT = {"type": "integer"}
_P50_P99 = {"type": "object", "required": ["p50", "p99"], "properties": {"p50": _NUM, "p99": _NUM}}
_SNAPSHOT = {
    "type": "object",
    "required": ["rss", "pss", "pss_is_rss", "vm_size", "vm_rss", "threads", "guest_bytes", "handle_bytes"],
    "properties": {
        "rss": _INT,
        "pss": _INT,
        "pss_is_rss": {"type": "boolean"},
        "vm_size": _INT,
        "vm_rss": _INT,
        "threads": _INT,
        "guest_bytes": _INT,
        "handle_bytes": _INT,
    },
}
_SNAPSHOT_NAMES = ["baseline", "active", "after_events", "after_soak", "after_unload"]
_RUN = {
    "type": "object",
    "required": [
        "transport",
        "count",
        "distinct",
        "init",
        "snapshots",
        "load_start_s",
        "fanout_s",
        "acks",
        "idle_rtt_ms",
        "control_rtt_ms",
        "active_pss_per_object",
        "mixed_pss_per_object",
        "shapes",
        "failures",
    ],
    "properties": {
        "transport": {"enum": ["inproc", "stdio"]},
        "count": _INT,
        "distinct": {"enum": ["data", "imm", "structure"]},
        "init": {"type": "object"},
        "snapshots": {
            "type": "object",
            "required": _SNAPSHOT_NAMES,
            "properties": {name: _SNAPSHOT for name in _SNAPSHOT_NAMES},
        },
        "load_start_s": _NUM,
        "fanout_s": _NUM,
        "acks": _INT,
        "idle_rtt_ms": _P50_P99,
        "control_rtt_ms": {
            "type": ["object", "null"],
            "required": ["p50", "p99"],
            "properties": {"p50": _NUM, "p99": _NUM},
        },
        "active_pss_per_object": _NUM,
        "mixed_pss_per_object": _NUM,
        "shapes": {
            "type": "object",
            "required": ["translated", "hits", "misses"],
            "properties": {"translated": _INT, "hits": _INT, "misses": _INT},
        },
        "failures": {"type": "array", "items": {"type": "string"}},
    },
}
_KERNEL = {
    "type": "object",
    "required": ["insns", "seconds", "minsn_per_s"],
    "properties": {"insns": _INT, "seconds": _NUM, "minsn_per_s": _NUM},
}
_CPU = {
    "type": ["object", "null"],
    "required": ["kernels", "geomean_minsn_per_s"],
    "properties": {
        "kernels": {"type": "object", "additionalProperties": _KERNEL},
        "geomean_minsn_per_s": _NUM,
    },
}
_COMPILE = {
    "type": ["object", "null"],
    "required": ["cold_ms", "parallel_builds_per_s", "hit_ms"],
    "properties": {
        "cold_ms": {"type": "object", "required": ["p50", "p95"], "properties": {"p50": _NUM, "p95": _NUM}},
        "parallel_builds_per_s": _NUM,
        "hit_ms": {"type": "object", "required": ["p50"], "properties": {"p50": _NUM}},
    },
}
_REALISTIC = {
    "type": ["object", "null"],
    "required": [
        "count",
        "events_per_object",
        "snapshots",
        "realistic_pss_per_object",
        "realistic_rss_per_object",
    ],
    "properties": {
        "count": _INT,
        "events_per_object": _INT,
        "snapshots": {
            "type": "object",
            "required": ["baseline", "realistic"],
            "properties": {"baseline": _SNAPSHOT, "realistic": _SNAPSHOT},
        },
        "realistic_pss_per_object": _NUM,
        "realistic_rss_per_object": _NUM,
    },
}
_TARGET = {
    "type": "object",
    "required": ["name", "target", "measured", "transport", "pass", "checked"],
    "properties": {
        "name": {"type": "string"},
        "target": {"type": "string"},
        "measured": _NUM_OR_NULL,
        "transport": {"type": ["string", "null"]},
        "pass": {"type": ["boolean", "null"]},
        "checked": {"type": "boolean"},
    },
}
# the machine and run header every bench document starts with (benchmarks.md §1.7, §2.1)
HEADER_PROPERTIES: dict[str, Any] = {
    "started_at": {"type": "string"},
    "wakeful_version": {"type": "string"},
    "git_revision": {"type": ["string", "null"]},
    "git_dirty": {"type": ["boolean", "null"]},
    "python": {"type": "string"},
    "platform": {"type": "string"},
    "cpu_model": {"type": ["string", "null"]},
    "cpu_count": {"type": ["integer", "null"]},
    "mem_total_bytes": {"type": ["integer", "null"]},
    "options": {"type": "object"},
}

DENSITY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "wakeful.bench.density/1",
    "type": "object",
    "required": [
        "schema",
        "started_at",
        "wakeful_version",
        "git_revision",
        "git_dirty",
        "python",
        "platform",
        "cpu_model",
        "cpu_count",
        "mem_total_bytes",
        "options",
        "runs",
        "cpu",
        "compile",
        "realistic",
        "targets",
        "reference",
    ],
    "properties": {
        "schema": {"const": "wakeful.bench.density/1"},
        **HEADER_PROPERTIES,
        "runs": {"type": "array", "items": _RUN},
        "cpu": _CPU,
        "compile": _COMPILE,
        "realistic": _REALISTIC,
        "targets": {"type": "array", "items": _TARGET},
        "reference": {"type": "object"},
    },
}


class BenchSchemaError(WakefulError, ValueError):
    """The document does not match the schema; the message names the JSON path."""


_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
    "integer": int,
    "number": (int, float),
}


def _is(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[name])


def validate(value: Any, schema: dict[str, Any] | None = None, path: str = "$") -> None:
    """Raise ``BenchSchemaError`` at the first mismatch of ``value`` with ``schema`` (default: the density schema)."""
    schema = DENSITY_SCHEMA if schema is None else schema
    if "const" in schema and value != schema["const"]:
        raise BenchSchemaError(f"{path}: expected {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise BenchSchemaError(f"{path}: {value!r} not one of {schema['enum']}")
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_is(value, n) for n in names):
            raise BenchSchemaError(f"{path}: expected {' or '.join(names)}, got {type(value).__name__}")
    if isinstance(value, dict):
        _validate_object(value, schema, path)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{path}[{i}]")


def _validate_object(value: dict[str, Any], schema: dict[str, Any], path: str) -> None:
    for key in schema.get("required", ()):
        if key not in value:
            raise BenchSchemaError(f"{path}: missing {key!r}")
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if key in properties:
            validate(item, properties[key], f"{path}.{key}")
        elif isinstance(extra, dict):
            validate(item, extra, f"{path}.{key}")
