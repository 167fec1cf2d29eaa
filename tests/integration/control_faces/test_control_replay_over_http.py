"""Idempotent replay through the HTTP face, on SQLite and PostgreSQL (control-plane.md §2.9, §4.1 step 2,
interfaces.md §2.2 ``POST …/commands``): the same envelope answers the identical original receipt (plus
``replayed: true``) — after the goal was paused, after the acting agent was excluded, and after the node restarted
on the same store — and writes nothing; the same id with another body is ``operation_id_conflict`` (409).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from wakeful.api.server import make_server
from wakeful.control.embed import Harness
from wakeful.harness.config import Config


@asynccontextmanager
async def serving(store_url: str, data_dir: Path) -> AsyncIterator[tuple[Harness, httpx.AsyncClient]]:
    h = Harness(Config(data_dir=data_dir, store_url=store_url), sweeps=False)
    await h.start()
    server = make_server(h, "127.0.0.1", 0, access_log=False, timeout_graceful_shutdown=2)
    task = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield h, http
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        await h.stop()


def without_replayed(body: dict[str, Any]) -> dict[str, Any]:
    assert body.get("replayed") is True, body
    return {k: v for k, v in body.items() if k != "replayed"}


async def test_replay_over_http_survives_pause_exclusion_and_restart(store_url: str, tmp_path: Path) -> None:
    envelope: dict[str, Any] = {}
    async with serving(store_url, tmp_path) as (h, http):
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        _, gkey = await h.create_key("group", group_id=group.id)
        _, akey = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
        person = {"Authorization": f"Bearer {gkey}"}
        me = {"Authorization": f"Bearer {akey}"}
        G = f"/v1/agent-groups/{group.id}"
        created = await http.post(f"{G}/goals", json={"operation_id": "create-1", "title": "p99", "objective": "o"},
                                  headers=person)
        assert created.status_code == 201, created.text
        goal = created.json()["goal"]["id"]
        GOAL = f"{G}/goals/{goal}"
        register = {"operation_id": "reg", "command": {"type": "agent.register", "agent_id": agent.id}}
        assert (await http.post(f"{GOAL}/commands", json=register, headers=person)).status_code == 200
        envelope = {"operation_id": "add-measure", "command": {"type": "work.add", "class": "advancement",
                                                               "title": "measure"}}
        first = await http.post(f"{GOAL}/commands", json=envelope, headers=me)
        assert first.status_code == 200, first.text
        original = first.json()
        assert "replayed" not in original
        commits = (await http.get(f"{GOAL}/commits", headers=person)).json()

        again = await http.post(f"{GOAL}/commands", json=envelope, headers=me)
        assert again.status_code == 200 and without_replayed(again.json()) == original
        stored = (await http.get(f"{GOAL}/receipts/add-measure", headers=me)).json()
        assert {k: v for k, v in stored.items() if k != "replayed"} == original
        other = {**envelope, "command": {**envelope["command"], "title": "something else"}}
        conflict = await http.post(f"{GOAL}/commands", json=other, headers=me)
        assert (conflict.status_code, conflict.json()["error"]) == (409, "operation_id_conflict")
        # another principal presenting the same id is another request, not a replay
        stolen = await http.post(f"{GOAL}/commands", json=envelope, headers=person)
        assert (stolen.status_code, stolen.json()["error"]) == (409, "operation_id_conflict")
        assert (await http.get(f"{GOAL}/commits", headers=person)).json() == commits  # nothing written

        # the goal paused: fresh commands are refused, the replay still answers the original receipt
        pause = {"operation_id": "pause", "command": {"type": "goal.pause"}}
        assert (await http.post(f"{GOAL}/commands", json=pause, headers=person)).status_code == 200
        fresh = {"operation_id": "add-2", "command": {"type": "work.add", "class": "advancement", "title": "x"}}
        refused = await http.post(f"{GOAL}/commands", json=fresh, headers=me)
        assert (refused.status_code, refused.json()["error"]) == (409, "goal_not_active")
        paused_replay = await http.post(f"{GOAL}/commands", json=envelope, headers=me)
        assert paused_replay.status_code == 200 and without_replayed(paused_replay.json()) == original
        resume = {"operation_id": "resume", "command": {"type": "goal.resume"}}
        assert (await http.post(f"{GOAL}/commands", json=resume, headers=person)).status_code == 200

        # the agent excluded: it can do nothing new, but its retry after a lost reply is answered
        exclude = {"operation_id": "exclude", "command": {"type": "agent.exclude", "agent_id": agent.id}}
        assert (await http.post(f"{GOAL}/commands", json=exclude, headers=person)).status_code == 200
        assert (await http.post(f"{GOAL}/commands", json=fresh, headers=me)).json()["error"] == "excluded"
        excluded_replay = await http.post(f"{GOAL}/commands", json=envelope, headers=me)
        assert excluded_replay.status_code == 200 and without_replayed(excluded_replay.json()) == original
        commits = (await http.get(f"{GOAL}/commits", headers=person)).json()

    # a restarted node on the same store answers the same receipt, byte for byte the stored one
    async with serving(store_url, tmp_path) as (h, http):
        restarted = await http.post(f"{GOAL}/commands", json=envelope, headers=me)
        assert restarted.status_code == 200 and without_replayed(restarted.json()) == original
        assert (await http.get(f"{GOAL}/commits", headers=person)).json() == commits
        create_again = await http.post(f"{G}/goals", json={"operation_id": "create-1", "title": "p99",
                                                            "objective": "o"}, headers=person)
        assert create_again.json()["receipt"] == {**created.json()["receipt"], "replayed": True}
