"""The MCP server over a tool table: ``tools/list`` and ``tools/call`` on the ``mcp`` package's low-level
``Server``, with dotted or underscore names (interfaces.md §3.1, config ``mcp.tool_names``).

Results are structured JSON (checked by clients against each tool's ``outputSchema``) and the same JSON, whole, as
text; refusals and failed builds are tool errors (``isError: true``) whose content is ``{error, message, …}`` or the
failed report (interfaces.md §3.1); the MCP column of ``wakeful.errors.ERROR_CODES`` says which codes are bugs (logged,
answered ``internal``). The SDK texts are resources and the watch set-up is a prompt (mcp/resources.py).
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server

from wakeful.errors import WakefulError, mcp_treatment
from wakeful.mcp import resources
from wakeful.mcp.table import Failed, McpContext, McpTool, ToolRefusal, ToolTable, check_arguments

if TYPE_CHECKING:
    from wakeful.harness import Harness

__all__ = ["NAME_STYLES", "build_table", "make_server", "published_name"]

log = logging.getLogger("wakeful.mcp")

NAME_STYLES = ("dotted", "underscore")
INSTRUCTIONS = (
    "wakeful runs Loops: tiny C programs that watch for you and wake you only when something matters. "
    "Call loop.sdk once, write the program, loop.build it, loop.test it, loop.create it; wakes arrive in your "
    "session (session.messages reads them). The prompt watch.setup walks through it. "
    "script.run runs a C program once to batch many tool calls."
)

Resolver = Callable[[Any], Awaitable[McpContext]]


def published_name(name: str, style: str) -> str:
    """``loop.sdk`` → ``loop_sdk`` for clients that reject dots (``--tool-names underscore``)."""
    return name.replace(".", "_") if style == "underscore" else name


def build_table(harness: Harness | None = None) -> ToolTable:
    """Loop tools, script tools, the control tools (when that module exists) and the embedder's tools."""
    from wakeful.mcp import agent_tools, loop_tools, script_tools

    table = ToolTable()
    loop_tools.register(table)
    agent_tools.register(table)
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
    listing = [_listed(name, tool) for name, tool in by_published.items()]

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
        except WakefulError as exc:
            if not isinstance(exc, ToolRefusal) and mcp_treatment(exc.code) == "internal":  # a bug, as on HTTP
                return _internal(tool.name, exc)
            return _refusal(exc)
        except Exception as exc:
            return _internal(tool.name, exc)
        return _result(value)

    async def node_guide(ctx: Any) -> str | None:
        """The guide ``loop.sdk`` answers this caller (with the node's configured tools), if there is a node."""
        sdk = table.get("loop.sdk")
        if sdk is None:
            return None
        try:
            answer = await sdk.handler({}, await resolve(ctx))
        except WakefulError as exc:  # the SDK's own text rather than no guide at all
            log.warning("the node's guide is unavailable (%s): serving the SDK guide", exc.message)
            return None
        return answer.get("guide") if isinstance(answer, dict) else None

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return resources.list_resources(await node_guide(ctx))

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        guide = await node_guide(ctx) if str(params.uri) == resources.GUIDE_URI else None
        return resources.read_resource(str(params.uri), guide)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return resources.list_prompts()

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return resources.get_prompt(params.name, params.arguments, lambda name: published_name(name, tool_names))

    return Server("wakeful", version=_version(), instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources, on_read_resource=read_resource,
                  on_list_prompts=list_prompts, on_get_prompt=get_prompt)


def _listed(name: str, tool: McpTool) -> types.Tool:
    hints = tool.annotations
    annotations = types.ToolAnnotations(
        read_only_hint=hints.get("readOnlyHint"), destructive_hint=hints.get("destructiveHint"),
        idempotent_hint=hints.get("idempotentHint"), open_world_hint=hints.get("openWorldHint")) if hints else None
    return types.Tool(name=name, description=tool.description, input_schema=tool.input_schema,
                      output_schema=tool.output_schema, annotations=annotations)


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def _result(value: Any) -> types.CallToolResult:
    failed = isinstance(value, Failed)
    if failed:
        value = value.value
    try:  # only JSON leaves the server (a tool may answer a set or an object by mistake)
        value = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _refusal(ToolRefusal("invalid_result", "the tool did not answer a JSON value"))
    structured = value if isinstance(value, dict) else {"result": value}
    return _answer(structured, is_error=failed)


def _refusal(refusal: WakefulError) -> types.CallToolResult:
    return _answer(json.loads(json.dumps(refusal.face_body(), default=str)), is_error=True)


def _internal(name: str, exc: Exception) -> types.CallToolResult:
    log.error("MCP tool %s failed", name, exc_info=(type(exc), exc, exc.__traceback__))
    return _refusal(ToolRefusal("internal", f"{type(exc).__name__}: the tool failed; see the server log"))


# the text is the whole structured JSON (no cut): a client that shows only text reads every diagnostic and the guide
def _answer(structured: dict[str, Any], *, is_error: bool) -> types.CallToolResult:
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured,
                                is_error=is_error)


def _version() -> str:
    from wakeful import __version__

    return __version__
