"""The ``wakeful.bench.harness/1`` JSON schema (benchmarks.md §2.1 "Output"), checked with ``schema.validate``.

A run is one system (``wakeful`` on a store, or the ``dbos`` peer) in one round; steps a system cannot take are
``null``. Figures a store cannot count are ``null`` (SQLite commits are the node's own count, ``Store.commits``).
"""

from __future__ import annotations

from typing import Any

from wakeful.bench.schema import HEADER_PROPERTIES, validate

__all__ = ["HARNESS_SCHEMA", "validate_harness"]

_NUM_OR_NULL = {"type": ["number", "null"]}
_INT_OR_NULL = {"type": ["integer", "null"]}
_LOAD = {"type": "array", "items": {"type": "number"}}
_P50_P99 = {"type": "object", "required": ["p50", "p99"],
            "properties": {"p50": {"type": "number"}, "p99": {"type": "number"}}}
_ERRORS = {"type": "object", "additionalProperties": {"type": "integer"}}
# per failing HTTP status, the first answer's error code and message (cut short); the peer's: per exception type
_SAMPLES = {"type": "object", "additionalProperties": {
    "type": "object", "required": ["error", "message"],
    "properties": {"error": {"type": ["string", "null"]}, "message": {"type": "string"}}}}
_SNAPSHOT = {"type": "object", "required": ["rss", "pss", "pss_is_rss"],
             "properties": {"rss": {"type": "integer"}, "pss": {"type": "integer"}, "pss_is_rss": {"type": "boolean"}}}


def _step(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    props = {**required, "load_average": _LOAD}
    return {"type": ["object", "null"], "required": list(props), "properties": {**props, **(optional or {})}}


_STEPS = {
    "type": "object",
    "properties": {
        "create": _step({"count": {"type": "integer"}, "created": {"type": "integer"}, "create_s": {"type": "number"},
                         "creates_per_s": _NUM_OR_NULL, "errors": _ERRORS, "retried": _ERRORS,
                         "error_samples": _SAMPLES, "all_running_s": _NUM_OR_NULL},
                        # wakeful's nodes (not the peer): CPU seconds from the first request until all ran
                        {"node_cpu_s": {"type": "number"}, "node_cpu_ms_per_create": _NUM_OR_NULL}),
        "memory": _step({"before": _SNAPSHOT, "after": _SNAPSHOT, "pss_per_loop": {"type": "number"},
                         "rss_per_loop": {"type": "number"}}),
        "idle": _step({"seconds": {"type": "number"}, "cpu_s": {"type": "number"},
                       "cpu_s_per_min": {"type": "number"}, "commits": _INT_OR_NULL,
                       "commits_per_min": _NUM_OR_NULL}),
        "ingest": _step({"seconds": {"type": "number"}, "in_flight": {"type": "integer"},
                         "accepted": {"type": "integer"}, "accepted_per_s": {"type": "number"}, "errors": _ERRORS,
                         "retried": _ERRORS, "error_samples": _SAMPLES, "latency_ms": _P50_P99, "drained": {"type": "boolean"}, "drain_s": {"type": "number"},
                         "commits": _INT_OR_NULL, "commits_per_event": _NUM_OR_NULL,
                         # the node's CPU over the step and its drain, per accepted event (null for the peer)
                         "node_cpu_s": _NUM_OR_NULL, "node_cpu_ms_per_event": _NUM_OR_NULL},
                        # where the machine's CPU went over the step and its drain (harness_node.CpuWindow)
                        {"cpu": {"type": "object", "required": ["machine_busy_s", "steal_s", "bench_s", "other_s"],
                                 "properties": {"machine_busy_s": {"type": "number"}, "steal_s": {"type": "number"},
                                                "bench_s": {"type": "number"}, "other_s": _NUM_OR_NULL}}}),
        "wake": _step({"wakes": {"type": "integer"}, "samples": {"type": "integer"}, "latency_ms": _P50_P99}),
        "restart": _step({"kill9_all_running_s": _NUM_OR_NULL, "sigterm_all_running_s": _NUM_OR_NULL}),
    },
}
_RUN = {
    "type": "object",
    "required": ["round", "system", "store", "count", "load_average_start", "steps", "failures"],
    "properties": {
        "round": {"type": "integer"},
        "system": {"enum": ["wakeful", "dbos"]},
        "store": {"enum": ["sqlite", "postgresql"]},
        "count": {"type": "integer"},
        "load_average_start": _LOAD,
        "steps": _STEPS,
        "failures": {"type": "array", "items": {"type": "string"}},
    },
}
_TARGET = {
    "type": "object",
    "required": ["name", "target", "measured", "store", "pass", "checked"],
    "properties": {"name": {"type": "string"}, "target": {"type": "string"}, "measured": _NUM_OR_NULL,
                   "store": {"enum": ["sqlite", "postgresql"]}, "pass": {"type": ["boolean", "null"]},
                   "checked": {"type": "boolean"}},
}
HARNESS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema", "started_at", "wakeful_version", "git_revision", "git_dirty", "python", "platform",
                 "cpu_model", "cpu_count", "mem_total_bytes", "options", "peer_version", "runs", "targets"],
    "properties": {
        "schema": {"const": "wakeful.bench.harness/1"},
        **HEADER_PROPERTIES,
        "peer_version": {"type": ["string", "null"]},
        "runs": {"type": "array", "items": _RUN},
        "targets": {"type": "array", "items": _TARGET},
    },
}


def validate_harness(doc: Any) -> None:
    """Raise ``BenchSchemaError`` naming the first JSON path that does not match the harness schema."""
    validate(doc, HARNESS_SCHEMA)
