"""``session.messages`` (read your wakes, mark them handled) and ``loop.test`` (try a built Loop against scripted
events and host answers before creating it). docs/decisions-mcp.md records the choices.
"""

from __future__ import annotations

from typing import Any

from wakeful.harness.ops.builds import MAX_TEST_EVENTS, MAX_TEST_TIMEOUT_S, TEST_TIMEOUT_S
from wakeful.mcp.contracts import ANY_JSON, contract
from wakeful.mcp.table import McpContext, McpTool, ToolRefusal, ToolTable

__all__ = ["register"]

ID = {"type": "string", "minLength": 1, "maxLength": 40}


# ---------------------------------------------------------------------- session.messages


async def session_messages(args: dict[str, Any], ctx: McpContext) -> Any:
    """One path in process and over the API: the ``messages.list`` / ``messages.handled`` operations as this
    agent (another agent's session is ``session_not_found``)."""
    session_id = args.get("session_id") or ctx.session_id
    if session_id is None:
        raise ToolRefusal("invalid_request", "no session_id given and this connection has no default session",
                          field="session_id")
    where = {"group_id": ctx.group_id, "session_id": session_id}
    if args.get("action", "list") == "handled":
        chosen = {"message_ids": args["message_ids"]} if args.get("message_ids") is not None else {
            "up_to": args.get("up_to")}
        out = await ctx.backend.call("messages.handled", **where, **chosen)
        return {"session_id": session_id, "handled": out.get("handled", [])}
    page = await ctx.backend.call("messages.list", **where, limit=int(args.get("limit", 50)),
                                  unhandled=bool(args.get("unhandled")), after=args.get("after") or None)
    return {"session_id": session_id, "messages": page.get("items", []), "next_cursor": page.get("next_cursor")}


# ---------------------------------------------------------------------- loop.test


async def loop_test(args: dict[str, Any], ctx: McpContext) -> Any:
    """The node runs the scripted host (``builds.test``): in process, or over ``POST G/loops/test``."""
    return await ctx.backend.call("builds.test", group_id=ctx.group_id, **args)


# ---------------------------------------------------------------------- the table rows

REPLY = {"oneOf": [
    {"type": "object", "required": ["result"], "additionalProperties": False,
     "properties": {"result": {**ANY_JSON, "description": "what the host call returns"}}},
    {"type": "object", "required": ["error"], "additionalProperties": False,
     "properties": {"error": {"type": "object", "required": ["code", "message"], "description": "the call fails",
                              "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}}]}


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


ROWS = [
    ("loop.test", loop_test, _schema({
        "artifact": {"type": "string", "description": "a path you built to, or sha256:…; default /loops/main.elf"},
        "config": {"type": "object", "description": "what the program reads from sf_config() (loop_id, "
                   "incarnation and state are filled in as the harness does)"},
        "events": {"type": "array", "maxItems": MAX_TEST_EVENTS, "description": "delivered in order before the "
                   "start, with event ids e1, e2, …", "items": {
                       "type": "object", "required": ["topic"], "additionalProperties": False, "properties": {
                           "topic": {"type": "string", "minLength": 1, "maxLength": 128},
                           "payload": ANY_JSON}}},
        "host_replies": {"type": "object", "additionalProperties": {"type": "array", "minItems": 1, "items": REPLY},
                         "description": "capability → replies, used in order, the last repeats; a capability "
                         "without replies answers the error not_scripted"},
        "engine": {"type": "string", "enum": ["translate", "interp"], "description": "default translate"},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TEST_TIMEOUT_S,
                      "description": f"stop the run after this many seconds (default {TEST_TIMEOUT_S:g})"}}),
     "Try a built Loop before creating it, exactly as `wakeful run` does: the artifact runs in a sandbox with the "
     "given config; events are delivered first; every host call (agent.notify, loop.ack, decide, your tools…) is "
     "answered from host_replies, nothing real is called. Ends when the program ends or at timeout_s. Returns "
     "{state: exited|failed|stopped, exit_code, fault, stopped_by, host_calls: [{capability, arguments, reply}], "
     "notifications (the agent.notify arguments), logs, states}. A load the runtime refuses is test_refused."),
    ("session.messages", session_messages, _schema({
        "session_id": {**ID, "description": "one of your sessions; default: this connection's session"},
        "action": {"type": "string", "enum": ["list", "handled"],
                   "description": "list (default) reads messages; handled marks them handled"},
        "after": {"type": "string", "maxLength": 512, "description": "list: a message cursor to read after"},
        "unhandled": {"type": "boolean", "description": "list: only messages not yet handled"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "list: page size, default 50"},
        "message_ids": {"type": "array", "maxItems": 1000, "items": {"type": "string", "minLength": 1,
                                                                     "maxLength": 200},
                        "description": "handled: these messages"},
        "up_to": {"type": "string", "maxLength": 512,
                  "description": "handled: every unhandled message up to this cursor (inclusive)"}}),
     "Your session's messages (the wakes your Loops sent: kind loop or lifecycle, content, dedup_key, loop_id), "
     "oldest first, and marking them handled once you acted on them. list answers {messages, next_cursor}; "
     "read on with after = next_cursor (or a message's cursor). handled takes message_ids or up_to and answers "
     "{handled: [ids this call marked]}; marking twice changes nothing. Another agent's session is "
     "session_not_found."),
]


def register(table: ToolTable) -> None:
    """Add ``session.messages`` and ``loop.test``."""
    for name, handler, schema, description in ROWS:
        output_schema, annotations = contract(name)
        table.add(McpTool(name=name, description=description, input_schema=schema, handler=handler,
                          output_schema=output_schema, annotations=annotations))
