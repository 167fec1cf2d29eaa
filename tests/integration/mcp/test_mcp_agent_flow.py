"""Issue 18, MCP: an agent that only has MCP — loop.sdk → loop.build → loop.test → loop.create → an event →
session.messages reads the wake → marks it handled; and every tool's schemas, annotations and full text over /mcp
and over stdio with the ``mcp`` client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.mcp_contracts import check_full_text, check_listed_tool
from support.mcp_flow import (
    LOOP_SOURCE,
    fake_provider,
    live_node,
    mcp_http,
    mcp_stdio,
    structured,
    tenant,
    until,
)

from wakeful.sdk import example, guide_text

pytestmark = pytest.mark.integration

IMPORTANT = {"from": "ops", "text": "Production database is down"}
NOISE = {"from": "newsletter", "text": "Our weekly digest"}
EXITS_7 = "#include <wakeful.h>\nSF_MAIN sf_i64 main(void) { sf_log(\"bye\"); return 7; }\n"
FAULTS = ("#include <wakeful.h>\nSF_MAIN sf_i64 main(void) {\n"
          "    sf_handle h = sf_json_parse((const char *)0, 15);\n    return h < 0 ? 1 : 0;\n}\n")


async def _try_it(client: Any) -> None:
    """loop.test against the example's scripted answers: what the Loop would call, say and log."""
    replies = json.loads(example("classify_decide").replies)
    ran = structured(await client.call_tool("loop.test", {
        "events": [{"topic": "message", "payload": IMPORTANT}, {"topic": "message", "payload": NOISE}],
        "host_replies": replies, "timeout_s": 2}))
    assert [c["capability"] for c in ran["host_calls"]] == ["decide", "agent.notify", "loop.ack", "decide",
                                                            "loop.ack"]
    assert ran["notifications"] == [{"content": IMPORTANT["text"], "dedup_key": "important:e1"}]
    assert ran["host_calls"][1]["reply"] == {"result": replies["agent.notify"][0]["result"]}
    assert "not important" in ran["logs"] and ran["artifact"].startswith("sha256:")
    assert ran["fault"] is None and ran["stopped_by"] in ("timeout", None)


async def _test_outcomes(client: Any) -> None:
    """An exit code and a fault come back as results; a refused ELF, a bad reply script and a time bound over
    30 s are refusals (isError)."""
    assert structured(await client.call_tool("loop.build", {"source": EXITS_7, "path": "/loops/seven.elf"}))
    seven = structured(await client.call_tool("loop.test", {"artifact": "/loops/seven.elf", "engine": "interp"}))
    assert (seven["state"], seven["exit_code"], seven["logs"], seven["host_calls"]) == ("exited", 7, ["bye"], [])
    structured(await client.call_tool("loop.build", {"source": FAULTS, "path": "/loops/fault.elf"}))
    fault = structured(await client.call_tool("loop.test", {"artifact": "/loops/fault.elf"}))
    assert fault["state"] == "failed" and "invalid pointer" in str(fault["fault"]), fault
    assert str(fault["fault"]).startswith("main.c:3: "), fault  # issue 18: the build's line table names the line
    for args, code in (({"artifact": "/loops/none.elf"}, "artifact_not_found"),
                       ({"timeout_s": 31}, "invalid_request"),
                       ({"host_replies": {"decide": [{"answer": 1}]}}, "invalid_request"),
                       ({"events": [{"payload": 1}]}, "invalid_request")):
        refused = await client.call_tool("loop.test", args)
        assert refused.is_error and refused.structured_content["error"] == code, (args, refused.structured_content)


async def _read_and_handle_the_wake(client: Any, loop_id: str) -> None:
    async def woke() -> bool:
        page = structured(await client.call_tool("session.messages", {"unhandled": True}))
        return any(m["kind"] == "loop" for m in page["messages"])

    await until(woke)
    page = structured(await client.call_tool("session.messages", {"unhandled": True}))
    wakes = [m for m in page["messages"] if m["kind"] == "loop"]
    assert [(m["loop_id"], m["content"], m["dedup_key"], m["handled"]) for m in wakes] == [
        (loop_id, IMPORTANT["text"], "important:evt-1", False)]
    marked = structured(await client.call_tool("session.messages", {
        "action": "handled", "message_ids": [m["id"] for m in page["messages"]]}))
    assert sorted(marked["handled"]) == sorted(m["id"] for m in page["messages"])
    again = structured(await client.call_tool("session.messages", {
        "action": "handled", "message_ids": [wakes[0]["id"]]}))
    assert again["handled"] == []  # marking twice changes nothing
    assert structured(await client.call_tool("session.messages", {"unhandled": True}))["messages"] == []
    everything = structured(await client.call_tool("session.messages", {"limit": 200}))
    handled = [m for m in everything["messages"] if m["id"] == wakes[0]["id"]]
    assert handled[0]["handled"] is True and handled[0]["handled_by"].startswith(("agent:", "operator"))


async def _mcp_only_flow(client: Any) -> str:
    sdk = structured(await client.call_tool("loop.sdk", {}))
    assert sdk["guide"] == guide_text()
    broken = await client.call_tool("loop.build", {"source": "int main(void) { return nope; }"})
    assert broken.is_error and broken.structured_content["state"] == "failed"
    assert "nope" in json.loads(broken.content[0].text)["diagnostics"]
    built = structured(await client.call_tool("loop.build", {"source": LOOP_SOURCE}))
    await _try_it(client)
    loop = structured(await client.call_tool("loop.create", {"name": "important-mail"}))
    assert loop["artifact"] == built["artifact"]
    for event_id, payload in (("evt-1", IMPORTANT), ("evt-2", NOISE)):
        sent = structured(await client.call_tool("loop.send", {"loop_id": loop["id"], "topic": "message",
                                                              "payload": payload, "event_id": event_id}))
        assert sent["status"] == "accepted"
    await _read_and_handle_the_wake(client, loop["id"])
    return str(loop["id"])


async def test_the_mcp_only_flow_over_mcp_http(store_url: str, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings, store_url=store_url, on_wake=False) as live:
            t = await tenant(live.harness)
            async with mcp_http(f"{live.url}/mcp/", t.agent_key, t.session_id) as client:
                await _mcp_only_flow(client)
                await _test_outcomes(client)
                other = await tenant(live.harness, "b1")  # another agent's inbox is not found
                refused = await client.call_tool("session.messages", {"session_id": other.session_id})
                assert refused.is_error and refused.structured_content["error"] == "session_not_found"
                refused = await client.call_tool("session.messages", {"action": "handled"})
                assert refused.is_error and refused.structured_content["error"] == "invalid_request"


# ---------------------------------------------------------------- every tool, over /mcp and over stdio


def _junk(name: str, spec: dict[str, Any], session_id: str) -> Any:
    """A value of the declared type (usually pointing at nothing, so most tools refuse: the text still counts)."""
    if name == "session_id":
        return session_id
    if "enum" in spec:
        return spec["enum"][0]
    kind = spec.get("type", "string")
    return {"string": "nope", "integer": max(1, spec.get("minimum", 1)), "number": 1, "boolean": False,
            "object": {}, "array": []}[kind]


async def _every_tool(client: Any, session_id: str, underscore: bool = False) -> int:
    tools = (await client.list_tools()).tools
    for tool in tools:
        check_listed_tool(tool)
    calls = 0
    for tool in tools:
        schema = tool.input_schema
        args = {k: _junk(k, schema["properties"][k], session_id) for k in schema.get("required", [])}
        if tool.name in ("loop.build", "loop_build", "script.run", "script_run"):
            args = {"source": EXITS_7}
        result = await client.call_tool(tool.name, args)
        check_full_text(result, tool.output_schema)
        calls += 1
    sdk = await client.call_tool("loop_sdk" if underscore else "loop.sdk", {})
    assert guide_text() in json.loads(sdk.content[0].text)["guide"]  # the whole 20+ KB guide as text
    return calls


async def test_every_tool_over_mcp_http_and_stdio(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings) as live:
            t = await tenant(live.harness)
            async with mcp_http(f"{live.url}/mcp/", t.agent_key, t.session_id) as client:
                over_http = await _every_tool(client, t.session_id)
            env = {"WAKEFUL_API_KEY": t.agent_key, "WAKEFUL_HOME": str(tmp_path / "client-home")}
            async with mcp_stdio(["--server", live.url, "--session", t.session_id, "--tool-names", "underscore"],
                                 env) as client:
                over_stdio = await _every_tool(client, t.session_id, underscore=True)
                ran = structured(await client.call_tool("loop_test", {}))  # the node runs it (POST G/loops/test)
                assert ran["state"] == "exited" and ran["exit_code"] == 7 and "bye" in json.dumps(ran["logs"])
                failed = await client.call_tool("loop_build", {"source": "int main(void) { return nope; }"})
                assert failed.is_error and "nope" in failed.content[0].text
                page = structured(await client.call_tool("session_messages", {}))
                assert page["session_id"] == t.session_id and isinstance(page["messages"], list)
    assert over_http == over_stdio and over_http >= 40
