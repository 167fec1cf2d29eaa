"""Validators through the faces (issue 20): ``POST …/criteria/{id}/validate`` on a live node, the MCP tool
``criterion.validate`` over ``/mcp`` and ``wakeful goal validate`` in remote mode all run the plane's validator
once and reuse it after; local mode refuses (validators run in a node's sandbox)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from support.control_cli import Cli, built_once  # noqa: F401 (an autouse fixture)
from support.mcp_flow import mcp_http, structured
from test_control_mcp_tools import node  # the control node with /mcp mounted

from wakeful.control import Actor

SCRIPT = (Path(__file__).parents[2] / "support" / "guests" / "validator_mixed.c").read_text()


async def test_validate_over_http_mcp_and_the_cli(harness_runner: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    async with node(tmp_path) as (h, url):
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        session = await h.create_session(agent.id, "inbox")
        _, akey = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
        _, gkey = await h.create_key("group", group_id=group.id)
        person = Actor("person", "key_person", group.id)

        async def submit(command: dict[str, Any], goal: str | None = None, **extra: Any) -> dict[str, Any]:
            env: dict[str, Any] = {"operation_id": f"op-{len(command)}-{command['type']}-{goal}", "command": command,
                                   **extra}
            if goal:
                env["goal_id"] = goal
            return await h.control.submit(person, env)

        goal = (await submit({"type": "goal.create", "title": "p", "objective": "o", "subjects": {"repo": "git:a"}}))[
            "goal_id"]
        await submit({"type": "agent.register", "agent_id": agent.id}, goal)
        crit = {"id": "mixed", "text": "mixed-load p99", "subject": "repo", "evidence_from": "validator",
                "workload": {"kind": "suite", "ref": "bench/mixed"}, "validator": {"source": SCRIPT}}
        await submit({"type": "acceptance.set", "document": {"criteria": [crit]}}, goal,
                     expected={"acceptance_revision": 0})
        path = f"/v1/agent-groups/{group.id}/goals/{goal}/criteria/mixed/validate"
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:
            first = await http.post(path, headers={"Authorization": f"Bearer {akey}"})
            assert first.status_code == 200, first.text
            assert (first.json()["verdict"], first.json()["reused"]) == ("pass", False)
            nope = await http.post(path.replace("/mixed/", "/nope/"), headers={"Authorization": f"Bearer {gkey}"})
            assert (nope.status_code, nope.json()["error"]) == (404, "not_found")
        async with mcp_http(url + "/mcp", akey, session.id) as client:
            again = structured(await client.call_tool("criterion.validate", {"goal_id": goal, "criterion_id": "mixed"}))
            assert (again["reused"], again["evidence"]) == (True, first.json()["evidence"])
        monkeypatch.setenv("WAKEFUL_HOME", str(tmp_path / "cli"))
        cli = Cli(capsys)
        cli("goal", "validate", goal, "mixed", code=2)  # local mode: no sandbox here
        monkeypatch.setenv("WAKEFUL_SERVER", url)
        monkeypatch.setenv("WAKEFUL_API_KEY", gkey)
        import asyncio

        ran = await asyncio.to_thread(cli, "goal", "validate", goal, "mixed")
        assert (ran["reused"], ran["verdict"]) == (True, "pass")
        assert (await h.control.acceptance(goal))["status"] == "accepted"
