"""The Loop tools of interfaces.md §3.2 (``loop.sdk`` … ``loop.send``), in-process or through the HTTP API.

Every tool acts for the connection's agent only: another agent's Loop is ``not_found``.
"""

from __future__ import annotations

from typing import Any

from wakeful.harness.errors import HarnessError
from wakeful.mcp.contracts import ANY_JSON, contract
from wakeful.mcp.table import Failed, McpContext, McpTool, ToolRefusal, ToolTable

__all__ = ["register"]

DEFAULT_PATH = "/loops/main.elf"
ID = {"type": "string", "minLength": 1, "maxLength": 40}
VERIFIER = {  # the body of PUT G/loops/{id}/webhook/verifier (issue 19)
    "scheme": {"type": "string", "enum": ["github", "stripe", "slack", "standard-webhooks", "hmac-sha256"],
               "description": "the provider's signing scheme"},
    "secret": {"type": "string", "description": "the provider's signing secret; stored, never shown again"},
    "tolerance_s": {"type": "integer", "description": "stripe, slack, standard-webhooks: seconds of clock skew "
                                                      "accepted (default 300)"},
    "fields": {"type": "array", "items": {"type": "string"}, "description": "dotted paths to keep of each payload"},
    "header": {"type": "string", "description": "hmac-sha256: the signature header"},
    "encoding": {"type": "string", "enum": ["hex", "base64"], "description": "hmac-sha256 (default hex)"},
    "prefix": {"type": "string", "description": "hmac-sha256: text before the signature, e.g. sha256="},
    "id_header": {"type": "string", "description": "hmac-sha256: header holding the delivery id"},
    "topic_header": {"type": "string", "description": "hmac-sha256: header holding the event type"},
}
LOOP_ID = {**ID, "description": "the Loop's id (lp_…)"}


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


# ---------------------------------------------------------------------- loop.sdk / loop.build


async def loop_sdk(args: dict[str, Any], ctx: McpContext) -> Any:
    if ctx.harness is None and ctx.api is None:  # no node behind this server: the SDK's own texts and limits
        from wakeful.harness.ops.builds import sdk_view

        return sdk_view()
    return await ctx.backend.call("sdk.get", group_id=ctx.group_id)  # the node's tools and limits


async def loop_build(args: dict[str, Any], ctx: McpContext) -> Any:
    report = await ctx.backend.call("builds.create", group_id=ctx.group_id, source=args["source"],
                                    files=dict(args.get("files") or {}) or None, path=args.get("path", DEFAULT_PATH))
    # a failed build is a tool error (isError: true) with the whole report
    return Failed(report) if isinstance(report, dict) and report.get("state") == "failed" else report


# ---------------------------------------------------------------------- loop.create / list / get
# one code path: ``ctx.backend`` runs the harness operation in process or over the HTTP API (issue 15)


async def loop_create(args: dict[str, Any], ctx: McpContext) -> Any:
    session_id = args.get("session_id") or ctx.session_id
    if session_id is None:
        raise ToolRefusal("invalid_request", "no session_id given and this connection has no default session",
                          field="session_id")
    given = {k: args[k] for k in ("name", "config", "capabilities") if k in args}
    return await ctx.backend.call("loops.create", group_id=ctx.group_id, agent_id=ctx.agent_id,
                                  session_id=session_id, artifact=args.get("artifact", DEFAULT_PATH), **given)


async def loop_list(args: dict[str, Any], ctx: McpContext) -> Any:
    limit = args.get("limit", 50)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 200:
        raise ToolRefusal("invalid_request", "limit must be 1..200", field="limit")
    page = await ctx.backend.call("loops.list", group_id=ctx.group_id, agent_id=ctx.agent_id, limit=limit,
                                  state=args.get("state"), cursor=args.get("cursor"))
    return {"loops": page.get("items", []), "next_cursor": page.get("next_cursor")}


async def loop_get(args: dict[str, Any], ctx: McpContext) -> Any:
    include = ",".join(args.get("include") or []) or None
    return await ctx.backend.call("loops.get", group_id=ctx.group_id, loop_id=args["loop_id"], include=include)


# ---------------------------------------------------------------------- pause / resume / delete


async def loop_pause(args: dict[str, Any], ctx: McpContext) -> Any:
    return await ctx.backend.call("loops.pause", group_id=ctx.group_id, loop_id=args["loop_id"])


async def loop_resume(args: dict[str, Any], ctx: McpContext) -> Any:
    return await ctx.backend.call("loops.resume", group_id=ctx.group_id, loop_id=args["loop_id"])


async def loop_delete(args: dict[str, Any], ctx: McpContext) -> Any:
    """Idempotent: a Loop that is gone (or not yours) did not exist."""
    try:
        await ctx.backend.call("loops.delete", group_id=ctx.group_id, loop_id=args["loop_id"])
    except (ToolRefusal, HarnessError) as refusal:
        if refusal.code != "not_found":
            raise
        return {"loop_id": args["loop_id"], "deleted": True, "existed": False}
    return {"loop_id": args["loop_id"], "deleted": True, "existed": True}


# ---------------------------------------------------------------------- webhook / events / send


WEBHOOK_ACTIONS = ("enable", "rotate", "revoke", "set_verifier", "get_verifier", "clear_verifier")


async def loop_webhook(args: dict[str, Any], ctx: McpContext) -> Any:
    """The URL (enable / rotate / revoke) or its signature verifier (set / get / clear), as the HTTP routes."""
    loop_id, action = args["loop_id"], args["action"]
    scope = {"group_id": ctx.group_id, "loop_id": loop_id}
    if action in ("enable", "rotate", "revoke"):
        if "verifier" in args:
            raise ToolRefusal("invalid_request", "verifier goes with action set_verifier", field="verifier")
        return await ctx.backend.call("webhooks.webhook", action=action, **scope)
    if action not in WEBHOOK_ACTIONS:
        raise ToolRefusal("invalid_request", f"action must be one of {', '.join(WEBHOOK_ACTIONS)}", field="action")
    spec = args.get("verifier")
    if action == "set_verifier":
        if not isinstance(spec, dict):
            raise ToolRefusal("invalid_request", "set_verifier needs verifier: {scheme, secret, …}",
                              field="verifier")
        answer = await ctx.backend.call("webhooks.set_verifier", **spec, **scope)
    elif action == "get_verifier":
        answer = await ctx.backend.call("webhooks.get_verifier", **scope)
    else:
        await ctx.backend.call("webhooks.clear_verifier", **scope)
        answer = {"loop_id": loop_id, "verifier": None}
    loop = await ctx.backend.call("loops.get", **scope)
    return {**answer, "enabled": bool(loop.get("webhook_enabled"))}


async def loop_events(args: dict[str, Any], ctx: McpContext) -> Any:
    loop_id, action = args["loop_id"], args.get("action", "list")
    if action == "list":
        page = await ctx.backend.call("events.list", group_id=ctx.group_id, loop_id=loop_id,
                                      payloads=True if args.get("include_payloads") else None)
        return {"loop_id": loop_id, "events": page.get("items", []), "next_cursor": page.get("next_cursor"),
                "pending_count": page.get("pending_count")}
    if action not in ("retry", "discard"):
        raise ToolRefusal("invalid_request", "action must be one of list, retry, discard", field="action")
    return await ctx.backend.call(f"events.{action}", group_id=ctx.group_id, loop_id=loop_id,
                                  event_ids=args.get("event_ids"))


async def loop_send(args: dict[str, Any], ctx: McpContext) -> Any:
    return await ctx.backend.call("events.send", group_id=ctx.group_id, loop_id=args["loop_id"],
                                  **{k: args[k] for k in ("topic", "payload", "event_id") if k in args})


# ---------------------------------------------------------------------- the table rows


def register(table: ToolTable) -> None:
    """Add the Loop tools of interfaces.md §3.2 to ``table``."""
    loop_only = _schema({"loop_id": LOOP_ID}, ("loop_id",))
    rows = [
        ("loop.sdk", loop_sdk, _schema({}),
         "Read this once before writing a Loop. Returns the programming guide (the wait/check/wake shape, "
         "limits, dedup keys, ack, checkpoints, examples) and wakeful.h. A Loop is a small C program that waits "
         "for timers or events, checks a condition and rarely wakes you with agent.notify."),
        ("loop.build", loop_build, _schema({
            "source": {"type": "string", "description": "the C program (becomes main.c)"},
            "files": {"type": "object", "additionalProperties": {"type": "string"},
                      "description": "extra headers: path → text"},
            "path": {"type": "string", "description": "artifact name, default /loops/main.elf"}}, ("source",)),
         "Compile C source to a verified Loop artifact stored under `path` (default /loops/main.elf). "
         "Returns a build report: state succeeded with `artifact` (sha256:…), or state failed with `diagnostics`"
         " (a tool error, isError: true) — read the one-line `wakeful:` explanations, fix the source and build "
         "again. Then try it with loop.test."),
        ("loop.create", loop_create, _schema({
            "artifact": {"type": "string", "description": "a path you built to, or sha256:…; default /loops/main.elf"},
            "name": {"type": "string", "description": "a name for the Loop (≤ 80 characters)"},
            "config": {"type": "object", "description": "what the program reads from sf_config() (≤ 16 KiB)"},
            "capabilities": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "description": "a capability (tool) name"},
                "arguments": {"type": "object", "description": "exact arguments the Loop may pass"}}},
                             "description": "[{name, arguments?}] to narrow what the Loop may call; omitted = all"},
            "session_id": {**ID, "description": "where wakes go; default: this connection's session"}}),
         "Start a Loop from a built artifact. It runs until paused, exited or failed and wakes the session with "
         "agent.notify messages. Refusals: quota_exceeded (20 active Loops per agent), capability_not_allowed, "
         "config_too_large, artifact_not_found, invalid_artifact. Returns the Loop object (id, state, …)."),
        ("loop.list", loop_list, _schema({
            "state": {"type": "string", "enum": ["active", "paused", "failed"],
                      "description": "only Loops in this state; default all"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "page size, default 50"},
            "cursor": {"type": "string", "description": "next_cursor of the previous page"}}),
         "List your Loops (state, pause_reason, pending_count, wakes, runtime); page with next_cursor."),
        ("loop.get", loop_get, _schema({"loop_id": LOOP_ID, "include": {
            "type": "array", "items": {"type": "string", "enum": ["checkpoint", "logs", "pending"]},
            "description": "extra parts: checkpoint, the newest 50 logs lines, pending events"}}, ("loop_id",)),
         "One Loop in detail: state, failure text, exit code, incarnation, wake budget; with include: its "
         "checkpoint, newest log lines and pending events. Use it when a Loop looks stuck or paused."),
        ("loop.pause", loop_pause, loop_only,
         "Pause an active Loop (its program stops; pending events and checkpoint are kept). Idempotent."),
        ("loop.resume", loop_resume, loop_only,
         "Resume a paused or failed Loop from its last checkpoint at a new incarnation; pending events get fresh "
         "deadlines. Refusals: already_active, quota_exceeded, agent_archived, artifact_invalid."),
        ("loop.delete", loop_delete, loop_only,
         "Delete a Loop and everything it holds (events, webhook, logs). Cannot be undone; idempotent."),
        ("loop.webhook", loop_webhook, _schema({"loop_id": LOOP_ID, "action": {
            "type": "string", "enum": list(WEBHOOK_ACTIONS),
            "description": "enable (shows the URL once), rotate (a new URL), revoke (no URL); set_verifier, "
                           "get_verifier, clear_verifier: the signature check of requests to the URL"},
            "verifier": {"type": "object", "required": ["scheme", "secret"], "properties": VERIFIER,
                         "additionalProperties": False,
                         "description": "set_verifier only: how requests to the URL are signed"}},
            ("loop_id", "action")),
         "Give a Loop a secret webhook URL outside systems can POST JSON to. enable shows the URL once (later "
         "calls give only a hint); rotate replaces it; revoke removes it. set_verifier makes the URL refuse "
         "requests not signed the provider's way (github, stripe, slack, standard-webhooks, or hmac-sha256 with "
         "header and encoding); the secret is stored and never shown again."),
        ("loop.events", loop_events, _schema({
            "loop_id": LOOP_ID, "action": {"type": "string", "enum": ["list", "retry", "discard"],
                                           "description": "default list"},
            "event_ids": {"type": "array", "items": {"type": "string"},
                          "description": "retry/discard only these events; default all pending"},
            "include_payloads": {"type": "boolean", "description": "list: include each event's payload"}},
            ("loop_id",)),
         "A Loop's events: list (pending and recently settled), retry (reload the Loop so a fresh incarnation "
         "gets the named or all pending events with new 15-minute deadlines) or discard (drop them)."),
        ("loop.send", loop_send, _schema({
            "loop_id": LOOP_ID, "topic": {"type": "string", "minLength": 1, "maxLength": 128,
                                          "description": "the event's topic, as the program's sf_event_topic sees it"},
            "payload": {**ANY_JSON, "description": "any JSON value (≤ 16 KiB envelope)"},
            "event_id": {"type": "string", "description": "idempotency id; default: hash of the payload"}},
            ("loop_id", "topic")),
         "Send one event to your Loop yourself (as the webhook or API would). Returns {status: accepted, "
         "event_id, duplicate}; a repeated event_id is a duplicate, never delivered twice."),
    ]
    for name, handler, schema, description in rows:
        output_schema, annotations = contract(name)
        table.add(McpTool(name=name, description=description, input_schema=schema, handler=handler,
                          output_schema=output_schema, annotations=annotations))
