"""``session.messages`` (read your wakes, mark them handled) and ``loop.test`` (try a built Loop against scripted
events and host answers before creating it). docs/decisions-mcp.md records the choices.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any

from wakeful.errors import InvalidParams, WakefulError
from wakeful.mcp.contracts import ANY_JSON, contract
from wakeful.mcp.table import McpContext, McpTool, ToolRefusal, ToolTable

if TYPE_CHECKING:
    from wakeful.build.lines import LineTable

__all__ = ["register"]

DEFAULT_ARTIFACT = "/loops/main.elf"
TEST_TIMEOUT_S = 5.0
MAX_TEST_TIMEOUT_S = 30.0
MAX_TEST_EVENTS = 32  # harness.md §20 pending events
TEST_RUNS_PER_NODE = 2  # loop.test runs a guest in this process: at most two at once per harness
_runs: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()
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
    from wakeful.runtime.scripted import INJECTED_CONFIG, Recorder, parse_replies, run_scripted

    if ctx.harness is None:
        raise ToolRefusal("unavailable", "loop.test runs the guest in the server's process: use /mcp on wakeful "
                          "serve or wakeful mcp --embedded (or `wakeful run` on the command line)")
    timeout_s = float(args.get("timeout_s", TEST_TIMEOUT_S))
    if not 0 < timeout_s <= MAX_TEST_TIMEOUT_S:
        raise ToolRefusal("invalid_request", f"timeout_s must be in (0, {MAX_TEST_TIMEOUT_S:g}]", field="timeout_s")
    config = args.get("config") or {}
    events = [_event(i, e) for i, e in enumerate(args.get("events") or [], start=1)]
    try:
        replies = parse_replies(args.get("host_replies") or {}, source="host_replies")
    except InvalidParams as exc:
        raise ToolRefusal("invalid_request", exc.message, field="host_replies") from None
    artifact, elf, lines = await _artifact_bytes(ctx, args.get("artifact", DEFAULT_ARTIFACT))
    recorder = Recorder()
    async with _runs.setdefault(ctx.harness, asyncio.Semaphore(TEST_RUNS_PER_NODE)):
        try:
            final = await run_scripted(elf, config={**INJECTED_CONFIG, **config}, events=events, replies=replies,
                                       engine=args.get("engine", "translate"), timeout_s=timeout_s,
                                       observer=recorder, lines=lines)
        except WakefulError as exc:  # a refused load or event: the runtime's typed reason
            rule = getattr(exc, "rule", None)
            raise ToolRefusal("test_refused", exc.message, reason=exc.code,
                              **({"rule": rule} if isinstance(rule, str) else {})) from None
    return {"artifact": artifact, **recorder.report(final)}


def _event(index: int, event: Any) -> tuple[str, Any]:
    topic = event.get("topic") if isinstance(event, dict) else None
    valid = isinstance(topic, str) and 1 <= len(topic.encode()) <= 128 and set(event) <= {"topic", "payload"}
    if not valid:
        raise ToolRefusal("invalid_request", f"events[{index - 1}] must be {{topic (1..128 bytes), payload?}}",
                          field="events")
    return event["topic"], event.get("payload")


async def _artifact_bytes(ctx: McpContext, ref: Any) -> tuple[str, bytes, LineTable | None]:
    """The artifact's reference, bytes and (for a build) line table, so faults name the source (issue 18)."""
    from wakeful.harness.source_lines import stored_table
    from wakeful.harness.store import artifacts

    assert ctx.harness is not None
    async with ctx.harness.store.tx(readonly=True) as tx:
        found = await artifacts.resolve_artifact(tx, group_id=ctx.group_id, agent_id=ctx.agent_id, ref=ref)
        lines = await stored_table(tx, ctx.group_id, found.sha256)
    assert found.elf is not None
    return f"sha256:{found.sha256}", found.elf, lines


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
