"""``script.sdk``, ``script.run`` and the embedder's registered tools as MCP tools (interfaces.md §3.2)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from wakeful.harness import Tool, ToolContext
from wakeful.harness.errors import HarnessError
from wakeful.mcp.contracts import OPEN_OBJECT, Hints, contract
from wakeful.mcp.table import Failed, McpContext, McpTool, ToolRefusal, ToolTable

__all__ = ["register", "register_embedder_tools"]

log = logging.getLogger("wakeful.mcp")


async def script_sdk(args: dict[str, Any], ctx: McpContext) -> Any:
    if ctx.harness is not None:
        return ctx.harness.script_sdk()
    from wakeful.harness.ops import local

    return local.script_sdk()


async def script_run(args: dict[str, Any], ctx: McpContext) -> Any:
    request: dict[str, Any] = {k: args[k] for k in ("source", "files", "entry") if k in args}
    if ctx.harness is None:
        if ctx.api is None:
            raise ToolRefusal("unavailable", "no harness and no API connection")
        outcome = await ctx.api.request("POST", ctx.group_path + "/scripts/run",
                                        json={**request, **({"env": args["env"]} if "env" in args else {})})
    else:
        outcome = await ctx.harness.run_script(ctx.agent_id, request, env=args.get("env"))
    # a script that did not succeed is a tool error (isError: true) carrying the whole outcome
    return Failed(outcome) if isinstance(outcome, dict) and outcome.get("state") == "failed" else outcome


def register(table: ToolTable) -> None:
    table.add(McpTool(
        name="script.sdk", handler=script_sdk, **_contract("script.sdk"),
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        description="Read once before writing a script: the script guide, wakeful.h and the limits. A script is "
                    "a C program that runs once while you wait, batching many tool calls (tool.call) into one "
                    "deterministic run and returning one result (script.result).",
    ))
    table.add(McpTool(
        name="script.run", handler=script_run, **_contract("script.run"),
        input_schema={"type": "object", "properties": {
            "source": {"type": "string", "description": "the C program (becomes main.c)"},
            "files": {"type": "object", "additionalProperties": {"type": "string"},
                      "description": "a bundle path → text (with entry), or extra headers next to source"},
            "entry": {"type": "string", "description": "the file to compile when files is the whole bundle"},
            "env": {"type": "object", "additionalProperties": {"type": "string"},
                    "description": "strings the script reads from sf_config().env (≤ 15 KiB)"}},
            "additionalProperties": False},
        description="Compile and run a script once (5 s of guest time, 60 s in all, 256 tool calls). Returns "
                    "{state: succeeded, result, console, tool_calls, …} or {state: failed, error: {kind, message}} "
                    "with kinds build_failed (read diagnostics), invalid_bundle, exit_nonzero, fault, "
                    "guest_time_exceeded, wall_time_exceeded, console_budget_exhausted, busy. Effects of tool "
                    "calls already made are not undone.",
    ))


def register_embedder_tools(table: ToolTable, tools: list[Tool]) -> None:
    """Publish the embedder's registered tools (read and write) under their own names."""
    for tool in tools:
        if table.get(tool.name) is not None:
            log.warning("embedder tool %s collides with an MCP tool; not published", tool.name)
            continue
        table.add(McpTool(name=tool.name, description=tool.description, input_schema=_schema_of(tool),
                          handler=_embedder_handler(tool), meta={"safety": tool.safety}, output_schema=OPEN_OBJECT,
                          annotations=Hints.READ if tool.safety == "read" else Hints.OUTSIDE))


def _contract(name: str) -> dict[str, Any]:
    output_schema, annotations = contract(name)
    return {"output_schema": output_schema, "annotations": annotations}


def _schema_of(tool: Tool) -> dict[str, Any]:
    schema_fn = getattr(tool.input_model, "model_json_schema", None)
    if schema_fn is not None:
        try:
            schema = dict(schema_fn())
            if schema.get("type") == "object":
                return schema
        except Exception:  # an odd model: publish the open schema and validate at call time
            log.warning("tool %s: input_model has no usable JSON schema", tool.name)
    return {"type": "object", "additionalProperties": True}


def _embedder_handler(tool: Tool) -> Any:
    async def handler(args: dict[str, Any], ctx: McpContext) -> Any:
        validate = getattr(tool.input_model, "model_validate", None)
        if validate is not None:
            try:
                validate(args)
            except Exception as exc:
                raise ToolRefusal("invalid_arguments", f"{tool.name}: {exc}"[:512]) from None
        tctx = ToolContext(principal=ctx.principal, loop_id=None, agent_id=ctx.agent_id, session_id=ctx.session_id,
                           group_id=ctx.group_id, incarnation=None, deadline_unix_ms=None)
        try:
            value = tool.fn(args, tctx)
            if inspect.isawaitable(value):
                value = await asyncio.wait_for(value, tool.timeout_s)
        except TimeoutError:
            raise ToolRefusal("deadline_exceeded", f"{tool.name} ran past {tool.timeout_s} s") from None
        except (ToolRefusal, HarnessError):
            raise
        except Exception as exc:
            raise ToolRefusal("tool_failed", f"{tool.name}: {type(exc).__name__}: {exc}"[:512]) from None
        return value

    return handler
