"""The MCP tool table and server (interfaces.md §3.1–3.2): the listing in both name styles, argument checks,
refusals as tool errors with {error, message, …}, results as structured JSON plus text, embedder tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import BaseModel
from support.mcp_flow import LOOP_AND_SCRIPT_TOOLS

from wakeful.cli.mcp_cmd import tool_names_setting
from wakeful.cli.output import UsageError
from wakeful.harness.errors import InvalidRequest, QuotaExceeded
from wakeful.harness.registry import Tool, ToolRegistry
from wakeful.mcp.script_tools import register_embedder_tools
from wakeful.mcp.server import build_table, make_server, published_name
from wakeful.mcp.table import McpContext, McpTool, ToolRefusal, ToolTable, check_arguments

CTX = McpContext(agent_id="agt_1", group_id="grp_1", principal="agent:agt_1", session_id="ses_1")


async def _fixed(_: Any) -> McpContext:
    return CTX


def _listing(names: str) -> list[str]:
    async def go() -> list[str]:
        async with Client(make_server(build_table(None), _fixed, tool_names=names)) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    return asyncio.run(go())


def test_listing_matches_the_spec_in_both_name_styles() -> None:
    dotted = _listing("dotted")
    assert [n for n in dotted if n.startswith(("loop.", "session.", "script."))] == LOOP_AND_SCRIPT_TOOLS
    underscore = _listing("underscore")
    assert underscore == [n.replace(".", "_") for n in dotted]
    assert all("." not in n for n in underscore)


# interfaces.md §3.2, in the spec's order, plus the proposal tools of issue 20 (rows from mcp/control_tools.py)
CONTROL_TOOLS = [
    "goal.create", "goal.list", "goal.join", "subject.set", "budget.spend", "goal.status", "goal.board", "work.add",
    "work.list", "work.next", "work.claim", "work.renew", "work.release", "work.update", "work.complete",
    "work.supersede", "acceptance.propose", "goal.propose", "criterion.validate", "gate.ask", "evidence.add", "effect.intend", "effect.settle", "effect.watch", "effect.readback",
]
PERSON_ONLY = {"acceptance.set", "gate.resolve", "agent.exclude", "work.cancel", "goal.close"}


def test_the_full_listing_is_the_spec_table() -> None:
    import importlib.util

    dotted = _listing("dotted")
    has_control = importlib.util.find_spec("wakeful.mcp.control_tools") is not None
    assert dotted == LOOP_AND_SCRIPT_TOOLS + (CONTROL_TOOLS if has_control else [])
    assert not PERSON_ONLY & set(dotted)  # interfaces.md §3.1: never offered to agents


def test_every_tool_has_an_actionable_description_and_an_object_schema() -> None:
    for tool in build_table(None):
        assert len(tool.description) >= 20, tool.name
        assert tool.input_schema["type"] == "object"
        if tool.name.startswith(("loop.", "session.", "script.")):
            assert len(tool.description) >= 60, tool.name
            assert tool.input_schema["additionalProperties"] is False, tool.name
    with pytest.raises(ValueError):
        make_server(build_table(None), _fixed, tool_names="camel")


def test_argument_checks() -> None:
    schema = {"type": "object", "properties": {"loop_id": {"type": "string"}, "limit": {"type": "integer"}},
              "required": ["loop_id"], "additionalProperties": False}
    assert check_arguments(schema, {"loop_id": "lp_1", "limit": 3}) == {"loop_id": "lp_1", "limit": 3}
    cases = [({}, "loop_id"), ({"loop_id": 5}, "loop_id"), ({"loop_id": "x", "limit": True}, "limit"),
             ({"loop_id": "x", "limit": 1.5}, "limit"), ({"loop_id": "x", "extra": 1}, "extra")]
    for args, field in cases:
        with pytest.raises(ToolRefusal) as refused:
            check_arguments(schema, args)
        assert refused.value.code == "invalid_request" and refused.value.details["field"] == field
    with pytest.raises(ToolRefusal):
        check_arguments(schema, ["not", "an", "object"])
    bounded = {"type": "object", "properties": {
        "action": {"type": "string", "enum": ["list", "retry"]}, "id": {"type": "string", "maxLength": 3},
        "limit": {"type": "integer", "minimum": 1, "maximum": 200}}}
    assert check_arguments(bounded, {"action": "retry", "id": "abc", "limit": 200})
    for args, field in (({"action": "drop"}, "action"), ({"id": "abcd"}, "id"), ({"limit": 0}, "limit"),
                        ({"limit": 201}, "limit")):
        with pytest.raises(ToolRefusal) as refused:
            check_arguments(bounded, args)
        assert refused.value.details["field"] == field
    assert check_arguments({"type": "object"}, None) == {}


def _call(table: ToolTable, name: str, args: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with Client(make_server(table, _fixed)) as client:
            return await client.call_tool(name, args)

    return asyncio.run(go())


def test_results_and_refusals() -> None:
    async def ok(args: dict[str, Any], ctx: McpContext) -> Any:
        return {"agent": ctx.agent_id, "echo": args.get("x")}

    async def listy(args: dict[str, Any], ctx: McpContext) -> Any:
        return [1, 2]

    async def refuses(args: dict[str, Any], ctx: McpContext) -> Any:
        raise QuotaExceeded("agent", 20)

    async def crashes(args: dict[str, Any], ctx: McpContext) -> Any:
        raise RuntimeError("secret internals")

    async def odd(args: dict[str, Any], ctx: McpContext) -> Any:
        return {"nan": float("nan"), "set": {1}}

    table = ToolTable()
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    for name, fn in (("t.ok", ok), ("t.list", listy), ("t.refuse", refuses), ("t.crash", crashes), ("t.odd", odd)):
        table.add(McpTool(name=name, description="d", input_schema=schema, handler=fn))
    result = _call(table, "t.ok", {"x": "hi"})
    assert not result.is_error and result.structured_content == {"agent": "agt_1", "echo": "hi"}
    assert '"echo":"hi"' in result.content[0].text
    assert _call(table, "t.list", {}).structured_content == {"result": [1, 2]}
    refused = _call(table, "t.refuse", {})
    assert refused.is_error
    assert refused.structured_content == {"error": "quota_exceeded", "message": refused.structured_content["message"],
                                          "scope": "agent", "limit": 20}
    crashed = _call(table, "t.crash", {})
    assert crashed.is_error and crashed.structured_content["error"] == "internal"
    assert "secret internals" not in crashed.structured_content["message"]
    bad = _call(table, "t.ok", {"x": 3})
    assert bad.is_error and bad.structured_content["error"] == "invalid_request"
    odd_result = _call(table, "t.odd", {})
    assert odd_result.is_error and odd_result.structured_content["error"] == "invalid_result"
    unknown = _call(table, "t.nope", {})
    assert unknown.is_error and unknown.structured_content["error"] == "unknown_tool"


def test_table_rules() -> None:
    table = ToolTable()
    noop = McpTool(name="a.b", description="d", input_schema={"type": "object"}, handler=_fixed)  # type: ignore[arg-type]
    table.add(noop)
    with pytest.raises(ValueError):
        table.add(noop)
    with pytest.raises(ValueError):
        table.add(McpTool(name="a.c", description="d", input_schema={"type": "array"}, handler=_fixed))  # type: ignore[arg-type]
    assert published_name("loop.events", "underscore") == "loop_events"
    assert published_name("loop.events", "dotted") == "loop.events"


class SquareIn(BaseModel):
    n: int


def test_embedder_tools_are_published_with_their_schema_and_run_as_the_agent() -> None:
    seen: list[Any] = []

    def square(args: Any, ctx: Any) -> Any:
        seen.append(ctx)
        return {"sq": args["n"] ** 2}

    registry = ToolRegistry()
    registry.register(Tool("math.square", square, "Square an integer n.", "write", 5, SquareIn))
    registry.register(Tool("plain.echo", lambda a, c: a, "Echo.", "read", 5))
    table = build_table(None)
    register_embedder_tools(table, registry.tools())
    published = {t.name: t for t in table}
    assert published["math.square"].input_schema["properties"]["n"]["type"] == "integer"
    assert published["plain.echo"].input_schema == {"type": "object", "additionalProperties": True}
    assert _call(table, "math.square", {"n": 7}).structured_content == {"sq": 49}
    assert seen[0].principal == "agent:agt_1" and seen[0].loop_id is None and seen[0].group_id == "grp_1"
    bad = _call(table, "math.square", {"n": "seven"})
    assert bad.is_error and bad.structured_content["error"] in ("invalid_request", "invalid_arguments")
    # a registered tool whose name is already an MCP tool is not published twice
    clash = ToolRegistry()
    clash.register(Tool("loop.get", lambda a, c: a, "shadow", "read", 5))
    before = len(table)
    register_embedder_tools(table, clash.tools())
    assert len(table) == before


def test_tool_names_setting_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAKEFUL_MCP__TOOL_NAMES", raising=False)
    monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path))
    monkeypatch.delenv("WAKEFUL_CONFIG", raising=False)
    assert tool_names_setting(None) == "dotted"
    (tmp_path / "wakeful.toml").write_text('[mcp]\ntool_names = "underscore"\n')
    assert tool_names_setting(None) == "underscore"
    monkeypatch.setenv("WAKEFUL_MCP__TOOL_NAMES", "dotted")
    assert tool_names_setting(None) == "dotted"
    assert tool_names_setting("underscore") == "underscore"
    with pytest.raises(UsageError):
        tool_names_setting("camel")
    (tmp_path / "wakeful.toml").write_text('[mcp]\ntool_name = "underscore"\n')
    monkeypatch.delenv("WAKEFUL_MCP__TOOL_NAMES")
    with pytest.raises(InvalidRequest, match="mcp.tool_name"):  # the config's typed error names the key
        tool_names_setting(None)
