"""/mcp on a live node (interfaces.md §2.1, §3.1–3.2): ``loop.build`` and ``script.run`` carry sources, so their
bodies are bounded at 256 KiB like ``POST G/builds`` and ``G/scripts/run`` (not the 64 KiB of other routes);
and the embedder's registered tools are published and called through a real MCP client as the agent.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict
from support.mcp_flow import LOOP_SOURCE, fake_provider, live_node, mcp_http, structured, tenant

from wakeful.harness.embed import Harness

pytestmark = pytest.mark.integration

SCRIPT = r"""
#include <wakeful.h>
SF_MAIN sf_i64 main(void) {
    sf_handle args = sf_json_object();
    sf_handle v = sf_json_string("big source ran");
    sf_json_set(args, "value", v);
    sf_handle r = sf_host_call("script.result", args, 10000);
    return r < 0 ? 1 : 0;
}
"""


def padded(source: str, total: int) -> str:
    """``source`` plus a trailing comment, ``total`` bytes in all (the bundle allows 131,072)."""
    return source + "\n/*" + "p" * (total - len(source) - 5) + "*/\n"


async def test_builds_and_scripts_over_mcp_take_sources_over_64_kib(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings) as live:
            t = await tenant(live.harness)
            async with mcp_http(f"{live.url}/mcp", t.agent_key, t.session_id) as client:
                big = padded(LOOP_SOURCE, 100_000)  # ~100 KiB of JSON: over 64 KiB, within the 256 KiB bound
                built = structured(await client.call_tool("loop.build", {"source": big, "path": "/loops/big.elf"}))
                assert built["state"] == "succeeded" and built["artifact"].startswith("sha256:"), built
                ran = structured(await client.call_tool("script.run", {"source": padded(SCRIPT, 100_000)}))
                assert ran["state"] == "succeeded" and ran["result"] == "big source ran", ran
            # over 256 KiB: 413 before the body is read in full; the node keeps answering
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "loop.build", "arguments": {"source": "x" * 270_000}}}
            headers = {"Authorization": f"Bearer {t.agent_key}", "Content-Type": "application/json",
                       "Accept": "application/json, text/event-stream"}
            async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
                r = await http.post(f"{live.url}/mcp", content=json.dumps(call).encode(), headers=headers)
                assert r.status_code == 413, r.text[:200]
                assert await _declared_huge(live.url, t.agent_key) == 413  # Content-Length checked first
                other = f"{live.url}/v1/agent-groups/{t.group_id}/loops"  # other routes keep 64 KiB
                r = await http.post(other, headers=headers, content=json.dumps({"name": "y" * 70_000}).encode())
                assert r.status_code == 413, r.text[:200]
            async with mcp_http(f"{live.url}/mcp", t.agent_key, t.session_id) as client:
                assert structured(await client.call_tool("loop.list", {}))["loops"] == []


async def _declared_huge(base: str, key: str) -> int:
    """POST /mcp declaring Content-Length 10^9 with a tiny body (httpx will not send that lie)."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write((f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
                      "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                      f"Content-Length: {10**9}\r\n\r\n{{}}").encode())
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        return int(status_line.split()[1])
    finally:
        writer.close()


class Lookup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ticket: int


def _register(h: Harness) -> None:
    h.register_tool("tickets.lookup", lambda a, ctx: {"ticket": a["ticket"], "principal": ctx.principal,
                                                     "agent": ctx.agent_id, "loop": ctx.loop_id},
                    description="Look a ticket up by number.", input_model=Lookup)
    h.register_tool("tickets.close", _close, description="Close a ticket.", safety="write")


def _close(args: Any, ctx: Any) -> Any:
    raise RuntimeError("the ticket system is down")


async def test_embedder_tools_over_mcp_run_as_the_agent(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings, setup=_register) as live:
            t = await tenant(live.harness)
            async with mcp_http(f"{live.url}/mcp", t.agent_key, t.session_id) as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                lookup = tools["tickets.lookup"]
                assert lookup.description == "Look a ticket up by number."
                assert lookup.input_schema["properties"]["ticket"]["type"] == "integer"
                assert lookup.input_schema["required"] == ["ticket"]
                assert "tickets.close" in tools  # write tools are offered to agents (not to Loops)
                got = structured(await client.call_tool("tickets.lookup", {"ticket": 42}))
                assert got == {"ticket": 42, "principal": f"agent:{t.agent_id}", "agent": t.agent_id, "loop": None}
                refused = await client.call_tool("tickets.lookup", {"ticket": "forty-two"})
                assert refused.is_error and refused.structured_content["error"] in ("invalid_request",
                                                                                    "invalid_arguments")
                failed = await client.call_tool("tickets.close", {"ticket": 1})
                assert failed.is_error and failed.structured_content["error"] == "tool_failed"
                assert "ticket system is down" in failed.structured_content["message"]
                assert structured(await client.call_tool("loop.list", {}))["loops"] == []  # still serving
