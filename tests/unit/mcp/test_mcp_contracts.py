"""What the MCP server publishes (issue 18): output schemas and annotations per tool, described parameters, valid
types, the whole payload as text, the SDK texts as resources and the watch set-up as a prompt. In-memory client."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp import Client
from support.mcp_contracts import check_full_text, check_listed_tool

from wakeful.mcp.server import build_table, make_server
from wakeful.mcp.table import Failed, McpContext, McpTool, ToolTable, check_arguments
from wakeful.sdk import guide_text, header_text, script_guide_text

CTX = McpContext(agent_id="agt_1", group_id="grp_1", principal="agent:agt_1", session_id="ses_1")


async def _fixed(_: Any) -> McpContext:
    return CTX


def _with_client(table: ToolTable, go: Any, names: str = "dotted") -> Any:
    async def run() -> Any:
        async with Client(make_server(table, _fixed, tool_names=names)) as client:
            return await go(client)

    return asyncio.run(run())


@pytest.mark.parametrize("names", ["dotted", "underscore"])
def test_every_tool_has_schemas_hints_and_described_parameters(names: str) -> None:
    async def go(client: Any) -> list[Any]:
        return list((await client.list_tools()).tools)

    tools = _with_client(build_table(None), go, names)
    assert {t.name.replace("_", ".", 1) for t in tools} >= {"loop.test", "session.messages"}
    for tool in tools:
        check_listed_tool(tool)
    by_name = {t.name: t for t in tools}
    send = by_name["loop.send" if names == "dotted" else "loop_send"].input_schema["properties"]["payload"]
    assert {b["type"] for b in send["anyOf"]} == {"object", "array", "string", "number", "boolean", "null"}
    replacement = by_name["work.supersede" if names == "dotted" else "work_supersede"].input_schema
    assert [b["type"] for b in replacement["properties"]["replacement"]["oneOf"]] == ["string", "object"]


def test_loop_sdk_text_is_the_whole_guide_and_header() -> None:
    async def go(client: Any) -> Any:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        return await client.call_tool("loop.sdk", {}), listed["loop.sdk"].output_schema

    result, schema = _with_client(build_table(None), go)
    check_full_text(result, schema)
    text = result.content[0].text
    assert len(text) > 600 and guide_text() in json.loads(text)["guide"]
    assert json.loads(text)["header"] == header_text()


def test_long_results_and_failures_are_sent_whole() -> None:
    diagnostics = "\n".join(f"main.c:{i}: error: wakeful: rule {i} explained" for i in range(200))

    async def long(args: dict[str, Any], ctx: McpContext) -> Any:
        return {"blob": "x" * 5000, "tail": "the end"}

    async def failed(args: dict[str, Any], ctx: McpContext) -> Any:
        return Failed({"state": "failed", "diagnostics": diagnostics})

    table = ToolTable()
    for name, fn in (("t.long", long), ("t.failed", failed)):
        table.add(McpTool(name=name, description="d", input_schema={"type": "object"}, handler=fn,
                          output_schema={"type": "object", "required": ["blob"]}))

    async def go(client: Any) -> Any:
        return await client.call_tool("t.long", {}), await client.call_tool("t.failed", {})

    ok, bad = _with_client(table, go)
    assert not ok.is_error and json.loads(ok.content[0].text)["tail"] == "the end"
    assert bad.is_error and bad.structured_content["state"] == "failed"  # isError, yet the whole report
    assert json.loads(bad.content[0].text)["diagnostics"] == diagnostics
    assert "wakeful: rule 199 explained" in bad.content[0].text


def test_any_of_parameters_are_type_checked() -> None:
    schema = {"type": "object", "properties": {"r": {"oneOf": [{"type": "string"}, {"type": "object"}]}}}
    assert check_arguments(schema, {"r": "w_1"}) and check_arguments(schema, {"r": {"class": "x"}})
    from wakeful.mcp.table import ToolRefusal

    with pytest.raises(ToolRefusal) as refused:
        check_arguments(schema, {"r": 5})
    assert refused.value.details["field"] == "r"


def test_sdk_texts_are_resources() -> None:
    async def go(client: Any) -> Any:
        listed = (await client.list_resources()).resources
        read = {str(r.uri): (await client.read_resource(str(r.uri))).contents[0] for r in listed}
        return listed, read

    listed, read = _with_client(build_table(None), go)
    assert {str(r.uri) for r in listed} == {"wakeful://sdk/guide.md", "wakeful://sdk/wakeful.h",
                                            "wakeful://sdk/script-guide.md"}
    assert read["wakeful://sdk/guide.md"].text == guide_text()
    assert read["wakeful://sdk/wakeful.h"].text == header_text()
    assert read["wakeful://sdk/script-guide.md"].text == script_guide_text()
    assert all(r.size and r.size > 1000 for r in listed)


@pytest.mark.parametrize("names", ["dotted", "underscore"])
def test_the_watch_set_up_is_a_prompt(names: str) -> None:
    async def go(client: Any) -> Any:
        prompts = (await client.list_prompts()).prompts
        got = await client.get_prompt("watch.setup", {"goal": "wake me when the build breaks"})
        try:
            await client.get_prompt("watch.setup", {})
        except Exception as exc:  # a missing required argument is a protocol error
            missing = exc
        else:
            missing = None
        return prompts, got, missing

    prompts, got, missing = _with_client(build_table(None), go, names)
    assert [p.name for p in prompts] == ["watch.setup"]
    assert [(a.name, a.required) for a in prompts[0].arguments] == [("goal", True), ("sources", False)]
    text = got.messages[0].content.text
    assert "wake me when the build breaks" in text
    order = ["loop.sdk", "loop.build", "loop.test", "loop.create", "session.messages"]
    spelled = [n if names == "dotted" else n.replace(".", "_") for n in order]
    positions = [text.index(n) for n in spelled]
    assert positions == sorted(positions)
    assert missing is not None and "goal" in str(missing)
