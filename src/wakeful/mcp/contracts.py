"""What each built-in MCP tool answers and does: its ``outputSchema`` (a JSON Schema of the successful
``structuredContent``) and its annotations (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
``openWorldHint``). docs/decisions-mcp.md says how the hints were chosen.

The schemas name the keys an agent relies on and their types; they leave other keys open, so a field added
later does not break a client that validates.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ANY_JSON", "CONTRACTS", "Hints", "OPEN_OBJECT", "contract"]

# any JSON value, as a schema with one type per branch (an array ``type`` is not accepted by every client)
ANY_JSON: dict[str, Any] = {"anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean",
                                                              "null")]}

OPEN_OBJECT: dict[str, Any] = {"type": "object"}
STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
OPT_STR = {"anyOf": [{"type": "string"}, {"type": "null"}]}
OPT_INT = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
ARRAY_OF_OBJECTS = {"type": "array", "items": {"type": "object"}}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object schema: ``required`` keys must be present with these types, ``optional`` ones may be."""
    return {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required)}


LOOP = obj({"id": STR, "loop_id": STR, "state": STR,
            "agent_id": STR, "session_id": STR},
           {"artifact": OPT_STR, "pending_count": INT, "pause_reason": OPT_STR, "incarnation": INT,
            "webhook_enabled": BOOL})
RECEIPT = obj({"operation_id": STR, "goal_id": STR, "result": STR},
              {"seq": INT, "command_type": STR, "changed": ARRAY_OF_OBJECTS})
MESSAGE = obj({"id": STR, "cursor": STR, "session_id": STR, "kind": STR, "content": {}, "created_ms": INT,
               "handled": BOOL}, {"loop_id": OPT_STR, "dedup_key": OPT_STR, "handled_ms": OPT_INT})
HOST_CALL = obj({"capability": STR, "arguments": {}, "reply": {"type": "object"}})

SCHEMAS: dict[str, dict[str, Any]] = {
    "loop.sdk": obj({"sdk_version": INT, "guide": STR, "header": STR, "limits": {"type": "object"}}),
    "loop.build": obj({"state": {"const": "succeeded"}, "artifact": STR, "path": STR,
                       "diagnostics": STR, "diagnostics_truncated": BOOL}, {"elf_bytes": INT, "toolchain": {}}),
    "loop.test": obj({"state": {"type": "string", "enum": ["exited", "failed", "stopped"]}, "exit_code": OPT_INT,
                      "fault": {}, "stopped_by": OPT_STR, "host_calls": {"type": "array", "items": HOST_CALL},
                      "notifications": {"type": "array"}, "logs": {"type": "array", "items": STR},
                      "states": ARRAY_OF_OBJECTS, "artifact": STR}),
    "loop.create": LOOP,
    "loop.list": obj({"loops": {"type": "array", "items": LOOP}, "next_cursor": OPT_STR}),
    "loop.get": LOOP,
    "loop.pause": LOOP,
    "loop.resume": LOOP,
    "loop.delete": obj({"loop_id": STR, "deleted": {"const": True}, "existed": BOOL}),
    "loop.webhook": obj({"loop_id": STR, "enabled": BOOL}, {"url": OPT_STR, "hint": OPT_STR,
                                                           "verifier": {"anyOf": [{"type": "object"},
                                                                                  {"type": "null"}]}}),
    "loop.events": obj({"loop_id": STR}, {"events": ARRAY_OF_OBJECTS, "retried": {}, "discarded": {}}),
    "loop.send": obj({"status": {"const": "accepted"}, "event_id": STR, "duplicate": BOOL}),
    "session.messages": obj({"session_id": STR}, {"messages": {"type": "array", "items": MESSAGE},
                                                   "next_cursor": OPT_STR, "handled": {"type": "array",
                                                                                       "items": STR}}),
    "script.sdk": obj({"guide": STR, "header": STR, "limits": {"type": "object"}}),
    "script.run": obj({"state": {"const": "succeeded"}}, {"result": {}, "console": {}, "tool_calls": {}}),
    "goal.create": obj({"goal": {"type": "object"}, "receipt": RECEIPT}),
    "goal.list": obj({"goals": ARRAY_OF_OBJECTS}),
    "goal.status": OPEN_OBJECT,
    "goal.board": OPEN_OBJECT,
    "work.add": obj({"item": {"type": "object"}, "receipt": RECEIPT}),
    "work.list": obj({"items": ARRAY_OF_OBJECTS}),
    "work.next": obj({"decision": STR}, {"goal_id": OPT_STR}),
    "criterion.validate": obj({"request_key": STR}, {"attempt": INT, "evidence": {}, "verdict": {}, "reused": BOOL}),
}


class Hints:
    """Annotation sets (readOnly, destructive, idempotent, openWorld)."""

    READ = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    ADD = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
    ADD_ONCE = {**ADD, "idempotentHint": True}  # a repeat with the same arguments changes nothing more
    CHANGE = {**ADD, "destructiveHint": True}  # overwrites or removes something
    CHANGE_ONCE = {**CHANGE, "idempotentHint": True}
    OUTSIDE = {**CHANGE, "openWorldHint": True}  # runs code whose tool calls reach other systems


HINTS: dict[str, dict[str, bool]] = {
    "loop.sdk": Hints.READ, "loop.list": Hints.READ, "loop.get": Hints.READ, "script.sdk": Hints.READ,
    "goal.list": Hints.READ, "goal.status": Hints.READ, "goal.board": Hints.READ, "work.list": Hints.READ,
    "loop.test": Hints.READ,  # a sandboxed run against scripted answers: nothing outside it changes
    "loop.build": Hints.ADD_ONCE,  # stores an artifact; the same source builds the same artifact
    "loop.create": Hints.ADD,
    "loop.pause": Hints.ADD_ONCE,
    "loop.resume": Hints.ADD,  # a second call is refused (already_active)
    "loop.delete": Hints.CHANGE_ONCE,
    "loop.webhook": Hints.CHANGE,  # rotate and revoke end the old URL
    "loop.events": Hints.CHANGE,  # discard drops events; list only reads
    "loop.send": Hints.ADD_ONCE,  # the event_id (default: the payload's hash) makes a repeat a duplicate
    "session.messages": Hints.ADD_ONCE,  # list reads; handled marks, and marking twice changes nothing
    "script.run": Hints.OUTSIDE,
    "goal.join": Hints.ADD_ONCE,
    "work.next": Hints.ADD,  # claim: true acquires a claim
    "work.update": Hints.CHANGE, "work.supersede": Hints.CHANGE, "work.release": Hints.CHANGE,
    "subject.set": Hints.CHANGE,  # evidence about older revisions stops counting
    "criterion.validate": {**Hints.ADD_ONCE, "openWorldHint": True},  # reuses the run made for this revision
}


def contract(name: str) -> tuple[dict[str, Any], dict[str, bool]]:
    """The output schema and the annotations of a built-in tool (control writes default to a receipt, additive)."""
    return SCHEMAS.get(name, RECEIPT), HINTS.get(name, Hints.ADD)


CONTRACTS = (SCHEMAS, HINTS)
