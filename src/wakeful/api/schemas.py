"""JSON Schemas of the face's answers (interfaces.md §2.2, issue 19), for the OpenAPI document only: the routes
return the harness's view dicts unchanged (no ``response_model`` filtering). Every object schema allows more
properties, so a field added to a view later is no breaking change; the fuzz test validates answers against
these (schemathesis ``response_schema_conformance``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["COMPONENTS", "SUCCESS", "success_schema"]

STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer"}
BOOL: dict[str, Any] = {"type": "boolean"}
OBJ: dict[str, Any] = {"type": "object"}
ANY: dict[str, Any] = {}


def null(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def arr(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": schema}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None, doc: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "required": sorted(required),
                           "properties": {**required, **(optional or {})}, "additionalProperties": True}
    if doc:
        out["description"] = doc
    return out


def page(item: dict[str, Any]) -> dict[str, Any]:
    return obj({"items": arr(item), "next_cursor": null(STR)}, doc="a page; pass next_cursor as cursor for the next")


_KEY = {"id": STR, "role": STR, "group_id": null(STR), "agent_id": null(STR), "label": null(STR), "created_ms": INT,
        "last_used_ms": null(INT), "revoked_ms": null(INT)}
_AGENT = {"id": STR, "group_id": STR, "name": STR, "status": STR, "created_ms": INT, "archived_ms": null(INT),
          "metadata": OBJ}

COMPONENTS: dict[str, dict[str, Any]] = {
    "Health": obj({"status": STR, "store": STR}, {"node": STR}),
    "Info": obj({"version": STR, "sdk_version": INT, "protocol_version": INT, "node_id": STR, "store": STR},
                {"node": STR, "compiler_available": BOOL, "limits": OBJ, "recent_refusals": OBJ, "principal": OBJ}),
    "Group": obj({"id": STR, "name": STR, "created_ms": INT}, {"limits": null(OBJ)}),
    "Key": obj(_KEY),
    "KeyCreated": obj({**_KEY, "key": STR}, doc="the key's secret is shown once, here"),
    "Agent": obj(_AGENT),
    "Session": obj({"id": STR, "agent_id": STR, "group_id": STR, "created_ms": INT}, {"title": STR}),
    "Loop": obj({"id": STR, "group_id": STR, "agent_id": STR, "session_id": STR, "name": STR, "state": STR},
                {"pause_reason": null(STR), "failure": ANY, "exit_code": null(INT), "incarnation": INT,
                 "node": null(STR), "node_id": null(STR), "artifact": null(STR), "artifact_sha256": null(STR),
                 "creator": null(STR), "config": ANY, "capabilities": ANY, "pending_count": INT,
                 "webhook_enabled": BOOL, "runtime": ANY, "wakes": ANY, "reloads": ANY, "created_ms": INT,
                 "updated_ms": INT}, doc="the harness's Loop view plus id, node, artifact (sha256:…)"),
    "Node": obj({"id": STR, "name": STR, "state": STR},
                {"host": STR, "pid": INT, "version": STR, "alive": BOOL, "started_ms": INT, "heartbeat_ms": INT,
                 "heartbeat_age_ms": INT, "objects": INT, "capacity": INT, "leases_held": INT}),
}

COMPONENTS["LogLine"] = obj({"seq": INT, "at_ms": INT, "source": STR, "text": STR}, {"incarnation": INT})
COMPONENTS["Transition"] = obj({"seq": INT, "at_ms": INT, "to_state": STR},
                               {"from_state": null(STR), "from_reason": null(STR), "to_reason": null(STR),
                                "incarnation": null(INT), "actor": null(STR), "detail": ANY})
COMPONENTS["Event"] = obj({"event_id": STR}, {"topic": null(STR), "status": STR, "received_ms": INT, "payload": ANY},
                          doc="a stored event (harness.md §10); payload only with ?payloads=true")

_VIEW = obj({}, doc="the harness's view (interfaces.md §2.2); fields as the spec names them")

# operationId -> the schema of its success answer
SUCCESS: dict[str, dict[str, Any]] = {
    "meta_healthz": ref("Health"),
    "meta_info": ref("Info"),
    "admin_create_group": ref("Group"),
    "admin_list_groups": page(ref("Group")),
    "admin_create_key": ref("KeyCreated"),
    "admin_list_keys": page(ref("Key")),
    "agents_create": ref("Agent"),
    "agents_list": page(ref("Agent")),
    "agents_get": ref("Agent"),
    "agents_archive": obj({"agent": ref("Agent")}, {"paused_loops": arr(STR)}),
    "agents_unarchive": obj({"agent": ref("Agent")}, {"resumed": arr(STR), "quota_paused": arr(STR)}),
    "agents_create_session": ref("Session"),
    "agents_list_sessions": page(ref("Session")),
    "agents_list_messages": page(OBJ),
    "agents_mark_handled": obj({"handled": arr(ANY)}),
    "loops_create": ref("Loop"),
    "loops_list": page(ref("Loop")),
    "loops_get": ref("Loop"),
    "loops_pause": ref("Loop"),
    "loops_resume": ref("Loop"),
    "loops_list_events": obj({"items": arr(ref("Event")), "next_cursor": null(STR)},
                             {"pending_count": null(INT)}),
    "loops_list_logs": obj({"items": arr(ref("LogLine"))}, {"next_after_seq": null(INT)},
                           doc="pass next_after_seq as after_seq for the next lines"),
    "loops_list_transitions": obj({"items": arr(ref("Transition"))}),
    "loops_retry_pending": obj({}, {"loop": ref("Loop")}, doc="the harness's retry answer; loop as GET gives it"),
    "nodes_list": page(ref("Node")),
    "control_list_goals": page(OBJ),
    "control_create_goal": obj({"goal": OBJ}),
}


def success_schema(op_id: str) -> dict[str, Any]:
    """The documented answer of an operation: its own schema, else an object with the view's description."""
    return SUCCESS.get(op_id, _VIEW)
