"""interfaces.md §3.2 control tools through the ``mcp`` package's client: listed (dotted and underscore styles
are the server's; person-only commands absent) and callable over streamable HTTP at ``/mcp`` (in-process
control) and over stdio as a thin client of the running server (through the HTTP routes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from support.mcp_flow import mcp_http, mcp_stdio, structured

from wakeful.control import Actor
from wakeful.control.embed import Harness
from wakeful.harness.config import Config
from wakeful.mcp.control_tools import TOOL_NAMES

PERSON_ONLY = ("acceptance.set", "gate.resolve", "agent.exclude", "work.cancel", "goal.close")
SPEC_TOOLS = ["goal.create", "goal.list", "goal.join", "subject.set", "budget.spend", "goal.status", "goal.board",
              "work.add", "work.list", "work.next", "work.claim", "work.renew", "work.release", "work.update",
              "work.complete", "work.supersede", "acceptance.propose", "goal.propose", "criterion.validate",
              "gate.ask", "evidence.add", "effect.intend", "effect.settle",
              "effect.watch", "effect.readback"]


@asynccontextmanager
async def node(data_dir: Path) -> AsyncIterator[tuple[Harness, str]]:
    from wakeful.api.server import make_server
    from wakeful.cli.mcp_cmd import mount_mcp

    h = Harness(Config(data_dir=data_dir, store_url=f"sqlite:///{data_dir / 'w.db'}"), sweeps=False)
    await h.start()
    server = make_server(h, "127.0.0.1", 0, access_log=False)
    mcp_app = mount_mcp(server.config.app, h)
    task = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield h, f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        await mcp_app.close()
        await h.stop()


def refused(result: Any) -> str:
    assert result.is_error, result.structured_content
    return str(result.structured_content["error"])


async def test_control_tools_over_mcp(harness_runner: Any, tmp_path: Path) -> None:
    assert TOOL_NAMES == SPEC_TOOLS
    async with node(tmp_path) as (h, url):
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        session = await h.create_session(agent.id, "inbox")
        _, key = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
        async with mcp_http(url + "/mcp", key, session.id) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            assert [n for n in listed if n in SPEC_TOOLS] == SPEC_TOOLS
            assert not set(PERSON_ONLY) & set(listed)
            assert not {"goal.close", "goal.pause", "goal.resume", "work.cancel"} & set(listed)
            for person_only in PERSON_ONLY:  # not callable by name either
                assert refused(await client.call_tool(person_only, {"goal_id": "goal_x"})) == "unknown_tool"

            async def tool(tool_name: str, /, **args: Any) -> Any:
                return structured(await client.call_tool(tool_name, args))

            person = Actor("person", "key_person", group.id)
            goal = (await h.control.submit(person, {"operation_id": "g", "command": {
                "type": "goal.create", "title": "p99", "objective": "fast", "subjects": {"repo": "git:a"}}}))["goal_id"]
            assert (await tool("goal.list"))["goals"] == []  # not registered yet
            assert (await tool("goal.join", goal_id=goal))["command_type"] == "agent.register"
            assert [g["id"] for g in (await tool("goal.list"))["goals"]] == [goal]
            added = await tool("work.add", goal_id=goal, **{"class": "advancement"}, title="measure",
                               operation_id="mcp-add-1")
            item = added["item"]
            assert item["revision"] == 1
            # a retry after a lost reply, with the same operation_id: the original receipt, no second item
            retried = await tool("work.add", goal_id=goal, **{"class": "advancement"}, title="measure",
                                 operation_id="mcp-add-1")
            assert retried["receipt"] == {**added["receipt"], "replayed": True}
            assert retried["item"]["id"] == item["id"]
            assert refused(await client.call_tool("work.add", {"goal_id": goal, "class": "advancement",
                                                               "title": "other", "operation_id": "mcp-add-1"})) \
                == "operation_id_conflict"
            decision = await tool("work.next", goal_id=goal, claim=True)
            assert (decision["action"], decision["claim"]["claim"]["holder"]) == ("start", agent.id)
            await tool("work.renew", goal_id=goal, item_id=item["id"])  # presents the current claim itself
            await tool("evidence.add", goal_id=goal, item_id=item["id"], kind="test", verdict="observed",
                       summary="ran it")
            conflict = await client.call_tool("work.complete", {"goal_id": goal, "item_id": item["id"],
                                                                "expected_revision": 9, "continuation": "no_followup"})
            assert refused(conflict) == "revision_conflict"
            await tool("work.complete", goal_id=goal, item_id=item["id"], expected_revision=1,
                       continuation="no_followup")
            assert (await tool("goal.status", goal_id=goal))["counts"]["advancement"]["done"] == 1

            # a gate asked once; block/reopen; supersede with a new item; effects needing a readback
            ship = (await tool("work.add", goal_id=goal, **{"class": "advancement"}, title="ship",
                               required_scopes=["production:action:ship"]))["item"]["id"]
            gate = (await tool("work.add", goal_id=goal, **{"class": "user_gate"}, title="ship?",
                               scope="production:goal:ship", targets=[ship], question="Ship?"))["item"]["id"]
            assert (await tool("work.next", goal_id=goal))["decision"] == "ask_person"
            await tool("gate.ask", goal_id=goal, item_id=gate)
            assert (await tool("work.next", goal_id=goal))["wake_when"] == [f"gate_resolved:{gate}"]
            other = (await tool("work.add", goal_id=goal, **{"class": "advancement"}, title="other"))["item"]["id"]
            await tool("work.update", goal_id=goal, item_id=other, expected_revision=1, action="block", reason="r")
            await tool("work.update", goal_id=goal, item_id=other, expected_revision=2, action="reopen")
            await tool("work.update", goal_id=goal, item_id=other, expected_revision=3, action="edit", title="other2")
            await tool("work.supersede", goal_id=goal, item_id=other, expected_revision=4,
                       replacement={"class": "advancement", "title": "better"})
            await tool("effect.intend", goal_id=goal, request_key="pr-1", kind="github.pr.create", target="repo",
                       payload_digest="d")
            await tool("effect.settle", goal_id=goal, request_key="pr-1", attempt=1, state="unknown")
            assert (await tool("work.next", goal_id=goal))["action"] == "readback_effect"
            await tool("effect.readback", goal_id=goal, request_key="pr-1", attempt=1, observed="present")
            await tool("subject.set", goal_id=goal, name="repo", revision="git:b")
            assert refused(await client.call_tool("budget.spend", {"goal_id": goal, "units": 1,
                                                                   "reason": "tokens"})) != "internal"
            board = await tool("goal.board", goal_id=goal)
            assert [c["title"] for c in board["columns"]["open"]["runnable"]] == ["better"]
            # the gate is a person's (§7.2), and "ship" waits on it
            assert sorted(c["title"] for c in board["columns"]["open"]["gated"]) == ["ship", "ship?"]
            assert {i["id"] for i in (await tool("work.list", goal_id=goal, status="done"))["items"]} >= {
                item["id"], other}
            # an unknown goal and a bad argument are tool errors, never internal ones
            assert refused(await client.call_tool("goal.status", {"goal_id": "goal_nope"})) == "not_found"
            assert refused(await client.call_tool("work.add", {"goal_id": goal, "class": "epic",
                                                               "title": "x"})) == "invalid_request"

            # hostile arguments: typed tool errors, never internal ones
            for name, args in (
                ("evidence.add", {"goal_id": goal, "kind": "test", "verdict": "pass", "summary": "s",
                                  "criterion_ids": [1, {"x": 2}]}),
                ("work.add", {"goal_id": goal, "class": "user_gate", "title": "g", "targets": ["not an id"]}),
                ("work.update", {"goal_id": goal, "item_id": "w_" + "z" * 38, "expected_revision": 1,
                                 "action": "defer"}),
                ("work.claim", {"goal_id": goal, "item_id": item["id"], "key": "has spaces"}),
                ("effect.settle", {"goal_id": goal, "request_key": "nope", "attempt": 1, "state": "succeeded"}),
                ("goal.status", {"goal_id": "x" * 40}),
                ("work.next", {"goal_id": "goal_" + "0" * 26}),
            ):
                code = refused(await client.call_tool(name, args))
                assert code not in ("internal", "unknown_tool"), (name, code)

        # stdio thin client: the same tools through the HTTP routes
        env = {"WAKEFUL_API_KEY": key, "WAKEFUL_HOME": str(tmp_path / "client")}
        async with mcp_stdio(["--server", url, "--session", session.id], env) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert set(SPEC_TOOLS) <= set(names)
            assert not set(PERSON_ONLY) & set(names)  # the thin client offers no person-only command either
            for person_only in PERSON_ONLY:
                assert refused(await client.call_tool(person_only, {"goal_id": goal})) == "unknown_tool"
            assert [g["id"] for g in structured(await client.call_tool("goal.list", {}))["goals"]] == [goal]
            nxt = structured(await client.call_tool("work.next", {"goal_id": goal, "claim": True}))
            assert nxt["claim"]["claim"]["holder"] == agent.id
            assert structured(await client.call_tool("goal.status", {"goal_id": goal}))["goal"]["id"] == goal
            released = structured(await client.call_tool("work.release", {"goal_id": goal,
                                                                          "item_id": nxt["item"]["id"]}))
            assert released["command_type"] == "claim.release"
            assert refused(await client.call_tool("goal.status", {"goal_id": "goal_nope"})) == "not_found"


async def test_goal_create_by_an_agent_over_mcp(harness_runner: Any, tmp_path: Path) -> None:
    async with node(tmp_path) as (h, url):
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        _, key = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
        async with mcp_http(url + "/mcp", key) as client:
            made = structured(await client.call_tool("goal.create", {"title": "t", "objective": "o"}))
            assert [g["id"] for g in structured(await client.call_tool("goal.list", {}))["goals"]] == [
                made["goal"]["id"]]
