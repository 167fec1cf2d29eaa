"""Every Loop tool of interfaces.md §3.2 on both MCP backends — in-process (``/mcp`` and ``--embedded``) and the
thin client's HTTP API (``wakeful mcp --server``) — against one live node: the same answers with the same fields,
Loop objects with ``wakes``/``reloads``/``runtime`` (the wake budget loop.get promises), an idempotent delete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.mcp_flow import LOOP_SOURCE, fake_provider, live_node, tenant

from wakeful.errors import WakefulError
from wakeful.mcp.server import build_table
from wakeful.mcp.stdio import ApiClient
from wakeful.mcp.table import McpContext, ToolRefusal, ToolTable, check_arguments

pytestmark = pytest.mark.integration

VERIFIER = {"scheme": "github", "secret": "a-github-webhook-secret", "fields": ["action"]}
LOOP_OBJECT = {"id", "loop_id", "state", "pause_reason", "node", "artifact", "wakes", "reloads", "runtime",
               "pending_count", "incarnation", "webhook_enabled"}


async def call(table: ToolTable, ctx: McpContext, name: str, args: dict[str, Any]) -> Any:
    """As the MCP server runs a tool: argument checks, the handler, refusals as ``{error, …}``."""
    tool = table.get(name)
    assert tool is not None, name
    try:
        return await tool.handler(check_arguments(tool.input_schema, args), ctx)
    except ToolRefusal as refusal:
        return refusal.face_body()
    except WakefulError as exc:
        return {"error": exc.code, "message": exc.message}


async def walk(table: ToolTable, ctx: McpContext) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    seen["build"] = await call(table, ctx, "loop.build", {"source": LOOP_SOURCE})
    seen["create"] = created = await call(table, ctx, "loop.create", {"name": "inbox-watch", "config": {}})
    loop_id = created["id"]
    seen["list"] = await call(table, ctx, "loop.list", {})
    seen["get"] = await call(table, ctx, "loop.get", {"loop_id": loop_id, "include": ["checkpoint", "logs"]})
    event = {"loop_id": loop_id, "topic": "message", "payload": {"from": "x", "text": "hello"}, "event_id": "e1"}
    seen["send"] = await call(table, ctx, "loop.send", event)
    seen["send again"] = await call(table, ctx, "loop.send", event)
    seen["events"] = await call(table, ctx, "loop.events", {"loop_id": loop_id, "include_payloads": True})
    seen["enable"] = await call(table, ctx, "loop.webhook", {"loop_id": loop_id, "action": "enable"})
    seen["verify"] = await call(table, ctx, "loop.webhook", {"loop_id": loop_id, "action": "set_verifier",
                                                             "verifier": VERIFIER})
    seen["verifier"] = await call(table, ctx, "loop.webhook", {"loop_id": loop_id, "action": "get_verifier"})
    seen["unverify"] = await call(table, ctx, "loop.webhook", {"loop_id": loop_id, "action": "clear_verifier"})
    seen["revoke"] = await call(table, ctx, "loop.webhook", {"loop_id": loop_id, "action": "revoke"})
    seen["pause"] = await call(table, ctx, "loop.pause", {"loop_id": loop_id})
    seen["discard"] = await call(table, ctx, "loop.events", {"loop_id": loop_id, "action": "discard",
                                                              "event_ids": ["never-sent"]})
    seen["resume"] = await call(table, ctx, "loop.resume", {"loop_id": loop_id})
    seen["retry"] = await call(table, ctx, "loop.events", {"loop_id": loop_id, "action": "retry"})
    seen["delete"] = await call(table, ctx, "loop.delete", {"loop_id": loop_id})
    seen["get deleted"] = await call(table, ctx, "loop.get", {"loop_id": loop_id})
    seen["delete again"] = await call(table, ctx, "loop.delete", {"loop_id": loop_id})
    seen["no such field"] = await call(table, ctx, "loop.get", {"loop_id": loop_id, "extra": 1})
    return seen


async def test_both_backends_answer_every_loop_tool_alike(harness_runner: Any, tmp_path: Path) -> None:
    with fake_provider() as provider:
        async with live_node(tmp_path / "data", provider.settings) as live:
            local, remote = await tenant(live.harness, "local"), await tenant(live.harness, "remote")
            in_process = McpContext(agent_id=local.agent_id, group_id=local.group_id,
                                    principal=f"agent:{local.agent_id}", session_id=local.session_id,
                                    mcp_session="t", harness=live.harness)
            api = ApiClient(live.url, remote.agent_key)
            try:
                thin = McpContext(agent_id=remote.agent_id, group_id=remote.group_id,
                                  principal=f"agent:{remote.agent_id}", session_id=remote.session_id,
                                  mcp_session="t", api=api)
                answers = {"in-process": await walk(build_table(live.harness), in_process),
                           "thin client": await walk(build_table(None), thin)}
            finally:
                await api.close()
    for backend, seen in answers.items():
        assert seen["build"]["state"] == "succeeded", (backend, seen["build"])
        for step in ("create", "get", "pause", "resume"):
            assert set(seen[step]) >= LOOP_OBJECT, (backend, step, LOOP_OBJECT - set(seen[step]))
            assert seen[step]["wakes"]["window_limit"] == 6 and seen[step]["reloads"]["count"] == 0
        assert seen["create"]["state"] == "active" and seen["create"]["name"] == "inbox-watch"
        assert [loop["id"] for loop in seen["list"]["loops"]] == [seen["create"]["id"]]
        assert set(seen["list"]["loops"][0]) >= LOOP_OBJECT and seen["list"]["next_cursor"] is None
        assert "checkpoint" in seen["get"] and isinstance(seen["get"]["logs"], list)
        assert seen["send"]["status"] == "accepted" and seen["send"]["duplicate"] is False
        assert seen["send again"]["duplicate"] is True and seen["send again"]["event_id"] == "e1"
        assert [e["event_id"] for e in seen["events"]["events"]] == ["e1"]
        assert isinstance(seen["events"]["pending_count"], int)
        assert seen["enable"]["enabled"] is True and "/v1/loop-webhooks/" in seen["enable"]["url"]
        assert seen["revoke"]["enabled"] is False
        # issue 19 via MCP: the webhook's verifier is set, shown (never its secret) and cleared like over HTTP
        for step in ("verify", "verifier"):
            assert seen[step]["enabled"] is True and seen[step]["verifier"]["scheme"] == "github", seen[step]
            assert VERIFIER["secret"] not in str(seen[step]) and seen[step]["verifier"]["fields"] == ["action"]
        assert seen["unverify"] == {"loop_id": seen["create"]["id"], "verifier": None, "enabled": True}
        assert seen["pause"]["state"] == "paused" and seen["resume"]["state"] == "active"
        assert set(seen["discard"]) == {"discarded"}
        assert seen["delete"]["deleted"] is True and seen["delete"]["existed"] is True
        assert seen["get deleted"]["error"] == "not_found"
        assert seen["delete again"] == {"loop_id": seen["create"]["id"], "deleted": True, "existed": False}
        assert seen["no such field"]["error"] == "invalid_request" and seen["no such field"]["field"] == "extra"
    local_answers, thin_answers = answers["in-process"], answers["thin client"]
    for step in local_answers:  # the same fields whichever way the agent is connected
        mine, theirs = local_answers[step], thin_answers[step]
        assert set(mine) == set(theirs), (step, set(mine) ^ set(theirs))
    for answer in (local_answers["retry"], thin_answers["retry"]):
        assert set(answer["loop"]) >= LOOP_OBJECT and answer["loop"]["state"] == "active", answer
