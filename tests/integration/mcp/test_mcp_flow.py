"""interfaces.md §3.3 end to end with the ``mcp`` package's client (issue 7 "Must show"): loop.sdk → write a
Loop → loop.build → loop.create → an event posted over HTTP (real uvicorn) → the Loop calls decide (a real
loopback OpenAI-compatible provider) and agent.notify → the wake arrives in the session exactly once.

Over streamable HTTP at /mcp, over stdio as a thin client of the running server, and over stdio embedded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from support.mcp_flow import (
    LOOP_AND_SCRIPT_TOOLS,
    LOOP_SOURCE,
    Live,
    Tenant,
    fake_provider,
    live_node,
    mcp_http,
    mcp_stdio,
    structured,
    tenant,
    until,
)

from wakeful.harness.store import Store, sessions

pytestmark = pytest.mark.integration

IMPORTANT = {"from": "ops", "text": "Production database is down"}
NOISE = {"from": "newsletter", "text": "Our weekly digest"}


async def _setup_watch(client: Any, names: str = "dotted") -> str:
    """§3.3 steps 1–4 through MCP; returns the Loop id."""
    dot = (lambda n: n) if names == "dotted" else (lambda n: n.replace(".", "_"))
    listed = [tool.name for tool in (await client.list_tools()).tools]
    assert [n for n in listed if n.startswith(("loop", "session", "script"))] == [dot(n) for n in LOOP_AND_SCRIPT_TOOLS]
    sdk = structured(await client.call_tool(dot("loop.sdk"), {}))
    assert "agent.notify" in sdk["guide"] and "sf_event_next" in sdk["header"] and sdk["sdk_version"] == 1
    failed_build = await client.call_tool(dot("loop.build"), {"source": "int main(void) { return nope; }"})
    assert failed_build.is_error  # a failed build is a tool error carrying the whole report (issue 18)
    failed = failed_build.structured_content
    assert failed["state"] == "failed" and "nope" in failed["diagnostics"]
    built = structured(await client.call_tool(dot("loop.build"), {"source": LOOP_SOURCE}))
    assert built["state"] == "succeeded" and built["artifact"].startswith("sha256:"), built
    loop = structured(await client.call_tool(dot("loop.create"), {"name": "important-mail", "config": {}}))
    assert loop["state"] == "active" and loop["name"] == "important-mail"
    return str(loop["id"])


async def _post_events(live: Live, t: Tenant, loop_id: str) -> None:
    """The sender: events over HTTP (intake route 1 with the agent key) — important, noise, a repeat."""
    url = f"{live.url}/v1/agent-groups/{t.group_id}/loops/{loop_id}/events"
    headers = {"Authorization": f"Bearer {t.agent_key}"}
    async with httpx.AsyncClient(trust_env=False) as http:
        for (event_id, payload), duplicate in zip(((("evt-1", IMPORTANT), ("evt-2", NOISE), ("evt-1", IMPORTANT))),
                                                  (False, False, True)):
            r = await http.post(url, headers=headers, json={"event_id": event_id, "topic": "message",
                                                            "payload": payload})
            assert r.status_code == 202, r.text
            assert r.json()["duplicate"] is duplicate


async def _both_acked(client: Any, loop_id: str, names: str = "dotted") -> None:
    tool = "loop.get" if names == "dotted" else "loop_get"

    async def settled() -> bool:
        view = structured(await client.call_tool(tool, {"loop_id": loop_id}))
        assert view["state"] == "active", view
        return bool(view["pending_count"] == 0)

    await until(settled)


async def _one_wake(h: Any, session_id: str, loop_id: str) -> None:
    messages = await h.messages(session_id, kinds=["loop"])
    assert [(m.loop_id, m.content, m.dedup_key) for m in messages] == [
        (loop_id, IMPORTANT["text"], "important:evt-1")]


async def test_the_watch_flow_over_mcp_http(store_url: str, tmp_path: Path) -> None:
    """On SQLite and on PostgreSQL (the store fixture's fresh schema)."""
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings, store_url=store_url) as live:
            t = await tenant(live.harness)
            async with mcp_http(f"{live.url}/mcp/", t.agent_key, t.session_id) as client:
                loop_id = await _setup_watch(client)
                await _post_events(live, t, loop_id)
                await _both_acked(client, loop_id)
                await live.harness.settle()
                await _one_wake(live.harness, t.session_id, loop_id)
                assert len(live.wakes) == 1  # the wake handler saw it once
                assert len(provider.requests) == 2  # one decide per distinct event, never for the repeat
                events = structured(await client.call_tool("loop.events", {"loop_id": loop_id}))
                assert sorted(e["event_id"] for e in events["events"]) == ["evt-1", "evt-2"]
                detail = structured(await client.call_tool("loop.get", {
                    "loop_id": loop_id, "include": ["checkpoint", "logs", "pending"]}))
                assert detail["pending"] == [] and "checkpoint" in detail and isinstance(detail["logs"], list)
                ran = structured(await client.call_tool("script.run", {"source": SCRIPT}))
                assert ran["state"] == "succeeded" and ran["result"] == {"loops": 1}, ran
                # the Loop belongs to this agent only: another agent's key does not see it
                other = await tenant(live.harness, "b1")
                async with mcp_http(f"{live.url}/mcp/", other.agent_key) as stranger:
                    refused = await stranger.call_tool("loop.get", {"loop_id": loop_id})
                    assert refused.is_error and refused.structured_content["error"] == "not_found"


async def test_mcp_http_refuses_without_an_agent_key(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings) as live:
            t = await tenant(live.harness)
            _, group_key = await live.harness.create_key("group", group_id=t.group_id)
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            async with httpx.AsyncClient(trust_env=False) as http:
                for headers, status in (({}, 401), ({"Authorization": "Bearer wk_nope"}, 401),
                                        ({"Authorization": f"Bearer {group_key}"}, 403),
                                        ({"Authorization": f"Bearer {group_key}", "X-Wakeful-Agent": "agt_x"}, 404)):
                    r = await http.post(f"{live.url}/mcp/", json=body, headers={
                        **headers, "Accept": "application/json, text/event-stream"})
                    assert r.status_code == status, (headers, r.text)
                    assert "error" in r.json()
                # hostile bodies with a valid key: refused, never a 500, and the node keeps answering
                agent = {"Authorization": f"Bearer {t.agent_key}", "Accept": "application/json, text/event-stream",
                         "Content-Type": "application/json"}
                for raw in (b"{not json", b"[" * 5000, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
                            b'"params": {"name": "loop.get", "arguments": [1]}}', b"x" * 70_000):
                    r = await http.post(f"{live.url}/mcp/", content=raw, headers=agent)
                    assert r.status_code < 500, (raw[:40], r.status_code, r.text[:200])
            # a group key acting as one of its agents (X-Wakeful-Agent) is an agent principal
            async with mcp_http(f"{live.url}/mcp/", group_key, agent_id=t.agent_id) as client:
                listed = structured(await client.call_tool("loop.list", {}))
                assert listed == {"loops": [], "next_cursor": None}
                refused = await client.call_tool("loop.create", {})  # no session given and no default
                assert refused.is_error and refused.structured_content["field"] == "session_id"
                for capability in ("script.run", "loop.create", "no.such.tool"):  # harness.md §21 capabilities
                    refused = await client.call_tool("loop.create", {
                        "session_id": t.session_id, "capabilities": [{"name": capability}]})
                    assert refused.is_error
                    assert refused.structured_content["error"] == "capability_not_allowed", refused
                other = await tenant(live.harness, "b1")
                refused = await client.call_tool("loop.create", {"session_id": other.session_id})
                assert refused.structured_content["error"] == "session_not_found"  # not this agent's inbox
                assert structured(await client.call_tool("loop.list", {}))["loops"] == []  # nothing stored


async def test_the_watch_flow_over_stdio_thin_client(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings) as live:
            t = await tenant(live.harness)
            env = {"WAKEFUL_API_KEY": t.agent_key, "WAKEFUL_HOME": str(tmp_path / "client-home")}
            async with mcp_stdio(["--server", live.url, "--session", t.session_id, "--tool-names", "underscore"],
                                 env) as client:
                loop_id = await _setup_watch(client, "underscore")
                await _post_events(live, t, loop_id)
                await _both_acked(client, loop_id, "underscore")
                await live.harness.settle()
                await _one_wake(live.harness, t.session_id, loop_id)
                ran = structured(await client.call_tool("script_run", {"source": SCRIPT}))
                assert ran["state"] == "succeeded" and ran["result"] == {"loops": 1}, ran
            assert len(live.wakes) == 1


async def test_the_watch_flow_over_stdio_embedded(harness_runner: Any, tmp_path: Path) -> None:
    from wakeful.harness.config import Config
    from wakeful.harness.embed import Harness

    data = tmp_path / "data"
    async with Harness(Config(data_dir=data), sweeps=False) as h:  # tenant rows, then the node lock is free
        t = await tenant(h)
    with fake_provider() as provider:
        env = {"WAKEFUL_HOME": str(data), **provider.env()}
        async with mcp_stdio(["--embedded", "--agent", t.agent_id, "--session", t.session_id], env) as client:
            loop_id = await _setup_watch(client)
            for event_id, payload in (("evt-1", IMPORTANT), ("evt-2", NOISE), ("evt-1", IMPORTANT)):
                sent = structured(await client.call_tool("loop.send", {
                    "loop_id": loop_id, "topic": "message", "payload": payload, "event_id": event_id}))
                assert sent["status"] == "accepted"
            await _both_acked(client, loop_id)
            page = structured(await client.call_tool("session.messages", {"unhandled": True}))
            wakes = [m for m in page["messages"] if m["kind"] == "loop"]
            assert [m["content"] for m in wakes] == [IMPORTANT["text"]]
            marked = structured(await client.call_tool("session.messages", {
                "action": "handled", "up_to": page["messages"][-1]["cursor"]}))
            assert wakes[0]["id"] in marked["handled"]
        assert len(provider.requests) == 2
    store = await Store.open(f"sqlite:///{data / 'wakeful.db'}")
    try:
        async with store.tx(readonly=True) as tx:
            messages = await sessions.list_messages(tx, session_id=t.session_id, kinds=("loop",), limit=100)
    finally:
        await store.close()
    assert [(m.loop_id, m.content, m.handled_by) for m in messages] == [(loop_id, IMPORTANT["text"], "operator")]


SCRIPT = r"""
#include <wakeful.h>
static const char TOOL[] = "{\"tool\":\"loop.list\",\"args\":{}}";
static const char OUT[] = "{\"value\":{\"loops\":0}}";
SF_MAIN sf_i64 main(void) {
    sf_handle args = sf_json_parse(TOOL, sf_strlen(TOOL));
    sf_handle res = sf_host_call("tool.call", args, 30000);
    sf_drop(args);
    if (res < 0) return 2;
    sf_handle value = sf_json_get(res, "value");
    sf_handle loops = sf_json_get(value, "loops");
    sf_i64 n = 0;
    while (sf_json_at(loops, n) > 0) n++;
    sf_handle out = sf_json_parse(OUT, sf_strlen(OUT));
    sf_handle inner = sf_json_get(out, "value");
    sf_handle count = sf_json_number(n);
    sf_json_set(inner, "loops", count);
    sf_json_set(out, "value", inner);
    sf_handle r = sf_host_call("script.result", out, 10000);
    return r < 0 ? 3 : 0;
}
"""
