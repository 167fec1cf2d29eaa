"""The MCP server over a tool table: ``tools/list`` and ``tools/call`` on the ``mcp`` package's low-level
``Server``, with dotted or underscore names (interfaces.md §3.1, config ``mcp.tool_names``).

Results are structured JSON plus a short text rendering; refusals are tool errors (``isError: true``) whose
content is ``{error, message, …}`` (interfaces.md §3.1).
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server

from wakeful.errors import WakefulError
from wakeful.mcp.table import McpContext, ToolRefusal, ToolTable, check_arguments

if TYPE_CHECKING:
    from wakeful.harness.embed import Harness

__all__ = ["NAME_STYLES", "build_table", "make_server", "published_name"]

log = logging.getLogger("wakeful.mcp")

NAME_STYLES = ("dotted", "underscore")
TEXT_CHARS = 600  # the short text rendering next to the structured result
INSTRUCTIONS = (
    "wakeful runs Loops: tiny C programs that watch for you and wake you only when something matters. "
    "Call loop.sdk once, write the program, loop.build it, loop.create it; wakes arrive in your session. "
    "script.run runs a C program once to batch many tool calls."
)

Resolver = Callable[[Any], Awaitable[McpContext]]


def published_name(name: str, style: str) -> str:
    """``loop.sdk`` → ``loop_sdk`` for clients that reject dots (``--tool-names underscore``)."""
    return name.replace(".", "_") if style == "underscore" else name


def build_table(harness: Harness | None = None) -> ToolTable:
    """Loop tools, script tools, the control tools (when that module exists) and the embedder's tools."""
    from wakeful.mcp import loop_tools, script_tools

    table = ToolTable()
    loop_tools.register(table)
    script_tools.register(table)
    control_tools = _optional("wakeful.mcp.control_tools")  # the goal/work tools (docs/decisions-mcp.md)
    if control_tools is not None:
        control_tools.register(table)
    if harness is not None:
        script_tools.register_embedder_tools(table, harness.registry.tools())
    return table


def make_server(table: ToolTable, resolve: Resolver, *, tool_names: str = "dotted") -> Server[Any]:
    """A low-level MCP server publishing ``table``; ``resolve(request_context)`` gives the caller's context."""
    if tool_names not in NAME_STYLES:
        raise ValueError(f"tool_names must be one of {NAME_STYLES}")
    by_published = {published_name(tool.name, tool_names): tool for tool in table}
    if len(by_published) != len(table):
        raise ValueError("two tools publish the same underscore name")
    listing = [types.Tool(name=name, description=tool.description, input_schema=tool.input_schema)
               for name, tool in by_published.items()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_published.get(params.name)
        if tool is None:
            return _refusal(ToolRefusal("unknown_tool", f"no tool {params.name!r}"))
        try:
            caller = await resolve(ctx)
            args = check_arguments(tool.input_schema, params.arguments)
            value = await tool.handler(args, caller)
        except ToolRefusal as refusal:
            return _refusal(refusal)
        except WakefulError as exc:
            return _refusal(ToolRefusal(exc.code, exc.message, **getattr(exc, "details", {})))
        except Exception as exc:
            log.exception("MCP tool %s failed", tool.name)
            return _refusal(ToolRefusal("internal", f"{type(exc).__name__}: the tool failed; see the server log"))
        return _result(value)

    return Server("wakeful", version=_version(), instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool)


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def _result(value: Any) -> types.CallToolResult:
    try:  # only JSON leaves the server (a tool may answer a set or an object by mistake)
        value = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _refusal(ToolRefusal("invalid_result", "the tool did not answer a JSON value"))
    structured = value if isinstance(value, dict) else {"result": value}
    return types.CallToolResult(content=[types.TextContent(type="text", text=_short(value))],
                                structured_content=structured, is_error=False)


def _refusal(refusal: ToolRefusal) -> types.CallToolResult:
    body = refusal.to_dict()
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(body, default=str))],
                                structured_content=body, is_error=True)


# a short text rendering: the state and ids an agent reads first, then the JSON, cut
def _short(value: Any) -> str:
    text = json.dumps(value, default=str, separators=(",", ":"))
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def _version() -> str:
    from wakeful import __version__

    return __version__
