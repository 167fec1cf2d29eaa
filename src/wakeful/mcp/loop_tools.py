"""The Loop tools of interfaces.md §3.2 (``loop.sdk`` … ``loop.send``), in-process or through the HTTP API.

Every tool acts for the connection's agent only: another agent's Loop is ``not_found``.
"""

from __future__ import annotations

from typing import Any

from wakeful.errors import BuildBusy, BuildUnavailable, BundleError
from wakeful.mcp.contracts import ANY_JSON, contract
from wakeful.mcp.table import Failed, McpContext, McpTool, ToolRefusal, ToolTable

__all__ = ["register"]

DEFAULT_PATH = "/loops/main.elf"
SPEC_LIMITS = {  # harness.md §20, as an agent needs them while writing a Loop
    "active_loops_per_agent": 20, "pending_events": 32, "event_envelope_bytes": 16_384, "config_bytes": 16_384,
    "checkpoint_bytes": 16_384, "elf_bytes": 65_536, "wakes_per_10_min": 6, "wake_content_bytes": 8192,
    "dedup_key_bytes": 128, "ack_deadline_s": 900, "host_calls_in_flight": 4, "capabilities": 32,
    "ingress_per_loop_per_min": 60,
}
ID = {"type": "string", "minLength": 1, "maxLength": 40}
LOOP_ID = {**ID, "description": "the Loop's id (lp_…)"}


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _local(ctx: McpContext) -> Any:
    return ctx.harness


def _api(ctx: McpContext) -> Any:
    if ctx.api is None:
        raise ToolRefusal("unavailable", "this MCP server has neither a harness nor an API connection")
    return ctx.api


# interfaces.md §2.2 Loop objects, as the HTTP API answers them (so /mcp, --embedded and the thin client agree):
# built once in the harness (``wakeful.harness.views.loop_objects``), since the faces may not import each other
async def _loop_objects(ctx: McpContext, views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from wakeful.harness.views import loop_objects

    h = ctx.harness
    assert h is not None
    return await loop_objects(h, views)


async def _loop_object_of(ctx: McpContext, view: dict[str, Any]) -> dict[str, Any]:
    return (await _loop_objects(ctx, [view]))[0]


# ---------------------------------------------------------------------- loop.sdk / loop.build


async def loop_sdk(args: dict[str, Any], ctx: McpContext) -> Any:
    from wakeful.sdk import SDK_ABI, guide_text, header_text

    limits = dict(SPEC_LIMITS)
    if ctx.harness is not None:
        lim = ctx.harness.config.limits
        limits.update(active_loops_per_agent=lim.loops_per_agent, pending_events=lim.pending_events,
                      wakes_per_10_min=lim.notify_per_window, ack_deadline_s=lim.ack_deadline_s)
    tools = ctx.harness.registry.guide_entries() if ctx.harness is not None else ()  # the node's read tools
    return {"sdk_version": SDK_ABI, "guide": guide_text(tools), "header": header_text(), "limits": limits}


async def loop_build(args: dict[str, Any], ctx: McpContext) -> Any:
    path = args.get("path", DEFAULT_PATH)
    files = dict(args.get("files") or {})
    if ctx.harness is None:
        report = await _api(ctx).request("POST", ctx.group_path + "/builds",
                                         json={"source": args["source"], "files": files or None, "path": path})
        return Failed(report) if isinstance(report, dict) and report.get("state") == "failed" else report
    from wakeful.harness.store import artifacts

    h = ctx.harness
    path = artifacts.check_path(path)
    bundle = {"sdk_version": 1, "entry": "main.c", "files": {**files, "main.c": args["source"]}}
    try:
        result = await h.loops.builder.compile(bundle)
    except BundleError as exc:
        raise ToolRefusal("invalid_bundle", exc.message, rule=exc.rule, path=exc.path) from None
    except BuildUnavailable as exc:
        raise ToolRefusal("compiler_unavailable", exc.message) from None
    except BuildBusy as exc:
        raise ToolRefusal("busy", f"the build queue is full: {exc.message}") from None
    if result.state != "succeeded" or result.elf is None:  # a tool error (isError: true) with the whole report
        return Failed({"state": "failed", "kind": "build_failed", "failure": result.failure, "error": result.error,
                "diagnostics": result.diagnostics, "diagnostics_truncated": result.diagnostics_truncated})
    stored = await h.loops.upload(agent_id=ctx.agent_id, elf=result.elf, path=path, creator=ctx.principal,
                                  origin="build", toolchain=result.toolchain, diagnostics=result.diagnostics,
                                  lines=result.lines)
    return {"state": "succeeded", "artifact": stored["artifact"], "path": path, "elf_bytes": len(result.elf),
            "diagnostics": result.diagnostics, "diagnostics_truncated": result.diagnostics_truncated,
            "sdk_version": 1, "toolchain": result.toolchain, "cached": result.cached,
            "report": result.report.to_json() if result.report is not None else None}


# ---------------------------------------------------------------------- loop.create / list / get


async def loop_create(args: dict[str, Any], ctx: McpContext) -> Any:
    session_id = args.get("session_id") or ctx.session_id
    if session_id is None:
        raise ToolRefusal("invalid_request", "no session_id given and this connection has no default session",
                          field="session_id")
    artifact = args.get("artifact", DEFAULT_PATH)
    if ctx.harness is None:
        body: dict[str, Any] = {"agent_id": ctx.agent_id, "session_id": session_id, "artifact": artifact}
        body.update({k: args[k] for k in ("name", "config", "capabilities") if k in args})
        return await _api(ctx).request("POST", ctx.group_path + "/loops", json=body)
    await _own_session(ctx, session_id)
    return await _loop_object_of(ctx, await ctx.harness.loops.create(
        agent_id=ctx.agent_id, session_id=session_id, artifact=artifact, config=args.get("config"),
        capabilities=args.get("capabilities"), name=args.get("name"), creator=ctx.principal,
    ))


async def _own_session(ctx: McpContext, session_id: str) -> None:
    from wakeful.harness.store import sessions

    assert ctx.harness is not None
    if not isinstance(session_id, str) or not 1 <= len(session_id) <= 40:
        raise ToolRefusal("invalid_request", "session_id must be an id string", field="session_id")
    async with ctx.harness.store.tx(readonly=True) as tx:
        found = await sessions.get_session(tx, session_id)
    if found.agent_id != ctx.agent_id:
        raise ToolRefusal("session_not_found", f"session {session_id} not found")


async def loop_list(args: dict[str, Any], ctx: McpContext) -> Any:
    limit = int(args.get("limit", 50))
    if not 1 <= limit <= 200:
        raise ToolRefusal("invalid_request", "limit must be 1..200", field="limit")
    if ctx.harness is None:
        params = {"agent_id": ctx.agent_id, "limit": limit,
                  **{k: args[k] for k in ("state", "cursor") if args.get(k) is not None}}
        page = await _api(ctx).request("GET", ctx.group_path + "/loops", params=params)
        return {"loops": page.get("items", []), "next_cursor": page.get("next_cursor")}
    rows = await ctx.harness.loops.list(agent_id=ctx.agent_id, state=args.get("state"))
    rows.sort(key=lambda row: row["id"])
    cursor = args.get("cursor")
    if cursor is not None:
        rows = [row for row in rows if row["id"] > cursor]
    page = rows[:limit]
    return {"loops": await _loop_objects(ctx, page), "next_cursor": page[-1]["id"] if len(rows) > limit else None}


async def loop_get(args: dict[str, Any], ctx: McpContext) -> Any:
    include = args.get("include") or []
    if ctx.harness is None:
        params = {"include": ",".join(include)} if include else None
        return await _api(ctx).request("GET", f"{ctx.group_path}/loops/{args['loop_id']}", params=params)
    view = await _loop_object_of(ctx, await ctx.harness.loops.get(args["loop_id"], agent_id=ctx.agent_id))
    if include:
        view = {**view, **await _detail(ctx, args["loop_id"], include)}
    return view


async def _detail(ctx: McpContext, loop_id: str, include: list[str]) -> dict[str, Any]:
    from wakeful.harness.store import loops

    assert ctx.harness is not None
    out: dict[str, Any] = {}
    async with ctx.harness.store.tx(readonly=True) as tx:
        row = await loops.get_loop(tx, loop_id)
        if "checkpoint" in include:
            out["checkpoint"] = row.checkpoint
        if "logs" in include:
            lines = await loops.list_logs(tx, loop_id)
            out["logs"] = [{"seq": ln.seq, "at_ms": ln.at_ms, "incarnation": ln.incarnation, "source": ln.source,
                            "text": ln.text} for ln in lines[-50:]]
    if "pending" in include:
        page = await ctx.harness.events(loop_id, "list", status="pending", agent_id=ctx.agent_id)
        out["pending"] = page.get("events", [])
    return out


# ---------------------------------------------------------------------- pause / resume / delete


async def loop_pause(args: dict[str, Any], ctx: McpContext) -> Any:
    if ctx.harness is None:
        return await _api(ctx).request("POST", f"{ctx.group_path}/loops/{args['loop_id']}/pause")
    return await _loop_object_of(ctx, await ctx.harness.loops.pause(args["loop_id"], agent_id=ctx.agent_id,
                                                                     actor=ctx.principal))


async def loop_resume(args: dict[str, Any], ctx: McpContext) -> Any:
    if ctx.harness is None:
        return await _api(ctx).request("POST", f"{ctx.group_path}/loops/{args['loop_id']}/resume")
    return await _loop_object_of(ctx, await ctx.harness.loops.resume(args["loop_id"], agent_id=ctx.agent_id,
                                                                      actor=ctx.principal))


async def loop_delete(args: dict[str, Any], ctx: McpContext) -> Any:
    if ctx.harness is None:  # idempotent as in-process: a Loop that is gone (or not yours) did not exist
        try:
            await _api(ctx).request("DELETE", f"{ctx.group_path}/loops/{args['loop_id']}")
        except ToolRefusal as refusal:
            if refusal.code != "not_found":
                raise
            return {"loop_id": args["loop_id"], "deleted": True, "existed": False}
        return {"loop_id": args["loop_id"], "deleted": True, "existed": True}
    out = await ctx.harness.loops.delete(args["loop_id"], agent_id=ctx.agent_id, actor=ctx.principal)
    return {"loop_id": args["loop_id"], "deleted": True, "existed": bool(out.get("deleted"))}


# ---------------------------------------------------------------------- webhook / events / send


async def loop_webhook(args: dict[str, Any], ctx: McpContext) -> Any:
    if ctx.harness is None:
        return await _api(ctx).request("POST", f"{ctx.group_path}/loops/{args['loop_id']}/webhook",
                                       json={"action": args["action"]})
    return await ctx.harness.webhook(args["loop_id"], args["action"], agent_id=ctx.agent_id)


async def loop_events(args: dict[str, Any], ctx: McpContext) -> Any:
    loop_id, action = args["loop_id"], args.get("action", "list")
    ids = args.get("event_ids")
    if ctx.harness is None:
        api = _api(ctx)
        base = f"{ctx.group_path}/loops/{loop_id}"
        if action == "list":
            params = {"payloads": "true"} if args.get("include_payloads") else None
            page = await api.request("GET", base + "/events", params=params)
            return {"loop_id": loop_id, "events": page.get("items", []), "next_cursor": page.get("next_cursor"),
                    "pending_count": page.get("pending_count")}
        return await api.request("POST", f"{base}/pending/{action}", json={"event_ids": ids})
    out = await ctx.harness.events(loop_id, action, event_ids=ids,
                                   include_payloads=bool(args.get("include_payloads")), agent_id=ctx.agent_id)
    if isinstance(out.get("loop"), dict):  # retry answers the reloaded Loop
        out["loop"] = await _loop_object_of(ctx, out["loop"])
    return out


async def loop_send(args: dict[str, Any], ctx: McpContext) -> Any:
    if ctx.harness is None:
        body = {k: args[k] for k in ("topic", "payload", "event_id") if k in args}
        return await _api(ctx).request("POST", f"{ctx.group_path}/loops/{args['loop_id']}/events", json=body)
    return await ctx.harness.send_event(args["loop_id"], args["topic"], args.get("payload"), args.get("event_id"),
                                        agent_id=ctx.agent_id, source="send")


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
            "type": "string", "enum": ["enable", "rotate", "revoke"],
            "description": "enable (shows the URL once), rotate (a new URL) or revoke (no URL)"}},
            ("loop_id", "action")),
         "Give a Loop a secret webhook URL outside systems can POST JSON to. enable shows the URL once (later "
         "calls give only a hint); rotate replaces it; revoke removes it."),
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
