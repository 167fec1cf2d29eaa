"""interfaces.md §2.2 control-plane routes on a real uvicorn server (loopback) over a started control Harness, on
SQLite and PostgreSQL: every route answers, and each status of the refusal mapping is produced by a real
condition (201, 200, 400, 401, 403, 404, 409, 503; never 422).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from wakeful.api.server import make_server
from wakeful.control.embed import Harness
from wakeful.harness.config import Config

T = TypeVar("T")


class Live:
    """A control Harness and its HTTP app on a loopback port, in a thread with its own event loop."""

    def __init__(self, store_url: str, data_dir: Path) -> None:
        self.config = Config(data_dir=data_dir, store_url=store_url)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.h: Harness | None = None
        self.server: Any = None
        self.task: Any = None

    def run(self, coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)  # type: ignore[arg-type]

    def __enter__(self) -> Live:
        self.thread.start()
        self.run(self._start())
        return self

    async def _start(self) -> None:
        self.h = Harness(self.config, sweeps=False)
        await self.h.start()
        self.server = make_server(self.h, "127.0.0.1", 0, access_log=False, timeout_graceful_shutdown=2)
        self.task = asyncio.get_running_loop().create_task(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _stop(self) -> None:
        self.server.should_exit = True
        await self.task
        if self.h is not None and self.h._store is not None:
            await self.h.stop()


async def tenant(h: Harness, name: str) -> dict[str, str]:
    group = await h.create_group(name)
    agent = await h.create_agent(group.id, f"{name}-a")
    other = await h.create_agent(group.id, f"{name}-b")
    _, gkey = await h.create_key("group", group_id=group.id)
    _, akey = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
    _, bkey = await h.create_key("agent", group_id=group.id, agent_id=other.id)
    return {"group": group.id, "agent": agent.id, "other": other.id, "gkey": gkey, "akey": akey, "bkey": bkey}


def test_control_routes(store_url: str, tmp_path: Path) -> None:
    with Live(store_url, tmp_path) as live, httpx.Client(base_url=live.url, timeout=30) as http:
        assert live.h is not None
        t = live.run(tenant(live.h, "one"))
        foreign = live.run(tenant(live.h, "two"))
        person = {"Authorization": f"Bearer {t['gkey']}"}
        me = {"Authorization": f"Bearer {t['akey']}"}
        peer = {"Authorization": f"Bearer {t['bkey']}"}
        G = f"/v1/agent-groups/{t['group']}"

        # 201 create, replay returns the original receipt
        body = {"operation_id": "create-1", "title": "p99", "objective": "fast", "subjects": {"repo": "git:a"}}
        created = http.post(f"{G}/goals", json=body, headers=person)
        assert created.status_code == 201, created.text
        goal = created.json()["goal"]["id"]
        again = http.post(f"{G}/goals", json=body, headers=person)
        assert again.json()["receipt"]["replayed"] is True and again.json()["goal"]["id"] == goal
        GOAL = f"{G}/goals/{goal}"

        def command(headers: dict[str, str], cmd: dict[str, Any], **extra: Any) -> httpx.Response:
            return http.post(f"{GOAL}/commands", json={"command": cmd, **extra}, headers=headers)

        assert command(person, {"type": "agent.register", "agent_id": t["agent"]}).status_code == 200
        added = command(me, {"type": "work.add", "class": "advancement", "title": "measure"})
        assert added.status_code == 200, added.text
        item = next(c["id"] for c in added.json()["changed"] if c["entity"] == "item")

        # 400: malformed command / body (never 422); 401: no key
        bad = command(me, {"type": "work.fly"})
        assert (bad.status_code, bad.json()["error"]) == (400, "invalid_command")
        missing = http.post(f"{G}/goals", json={"objective": "no title"}, headers=person)
        assert (missing.status_code, missing.json()["error"]) == (400, "invalid_request")
        assert http.get(f"{GOAL}/status").status_code == 401

        # 403: an agent issuing a person-only command; an unregistered agent
        doc = {"criteria": [{"id": "lat", "text": "p99 < 5 ms", "subject": "repo"}]}
        forbidden = command(me, {"type": "acceptance.set", "document": doc}, expected={"acceptance_revision": 0})
        assert (forbidden.status_code, forbidden.json()["error"]) == (403, "forbidden")
        unregistered = command(peer, {"type": "work.add", "class": "advancement", "title": "x"})
        assert (unregistered.status_code, unregistered.json()["error"]) == (403, "not_registered")

        # 409 with the current revision
        stale = command(me, {"type": "work.block", "item": item, "reason": "r"}, expected={"item_revision": 7})
        assert (stale.status_code, stale.json()["error"], stale.json()["current"]) == (409, "revision_conflict", 1)

        # 404: another group's goal (through either group's path), unknown item/receipt
        other_goal = http.post(f"/v1/agent-groups/{foreign['group']}/goals", json={"title": "t", "objective": "o"},
                               headers={"Authorization": f"Bearer {foreign['gkey']}"}).json()["goal"]["id"]
        assert http.get(f"{G}/goals/{other_goal}", headers=person).status_code == 404
        assert http.get(f"/v1/agent-groups/{foreign['group']}/goals/{other_goal}", headers=person).status_code == 404
        assert http.get(f"{GOAL}/work/w_nope", headers=person).status_code == 404
        assert http.get(f"{GOAL}/receipts/nope", headers=person).status_code == 404

        # an agent creates a goal of its own and is registered on it
        own = http.post(f"{G}/goals", json={"title": "mine", "objective": "o"}, headers=peer)
        assert own.status_code == 201, own.text
        assert [g["id"] for g in http.get(f"{G}/goals", headers=peer).json()["items"]] == [own.json()["goal"]["id"]]

        # reads
        got = http.get(GOAL, headers=person).json()
        assert got["goal"]["id"] == goal and got["status"]["kind"] == "status"
        board = http.get(f"{GOAL}/board", headers=me).json()
        assert [c["id"] for c in board["columns"]["open"]["runnable"]] == [item]
        assert http.get(f"{GOAL}/status", headers=me).json()["counts"]["advancement"]["open"] == 1
        assert [i["id"] for i in http.get(f"{GOAL}/work?status=open&class=advancement", headers=me).json()["items"]] \
            == [item]
        assert http.get(f"{GOAL}/work/{item}", headers=me).json()["id"] == item
        assert goal in [g["id"] for g in http.get(f"{G}/goals", headers=person).json()["items"]]
        assert [g["id"] for g in http.get(f"{G}/goals", headers=me).json()["items"]] == [goal]
        assert http.get(f"{GOAL}/acceptance", headers=me).json()["status"] == "none"
        commits = http.get(f"{GOAL}/commits?after_seq=0&limit=2", headers=me).json()
        assert [c["seq"] for c in commits["items"]] == [1, 2] and commits["next_after_seq"] == 2
        assert http.get(f"{GOAL}/receipts/create-1", headers=me).json()["seq"] == 1

        # next: read-only, then with the claim; an agent key asks only for itself
        decision = http.get(f"{G}/next", params={"goal_id": goal}, headers=me).json()
        assert (decision["decision"], decision["item"]["id"]) == ("deliver", item)
        assert http.get(f"{G}/next", params={"agent_id": t["other"]}, headers=me).status_code == 404
        peek = http.post(f"{G}/next", json={"goal_id": goal, "claim": False}, headers=me)  # the key names the agent
        assert peek.status_code == 200 and peek.json()["item"]["id"] == item, peek.text
        assert http.post(f"{G}/next", json={"agent_id": t["other"], "goal_id": goal}, headers=me).status_code == 404
        assert http.post(f"{G}/next", json={"goal_id": goal}, headers=person).json()["field"] == "agent_id"
        claimed = http.post(f"{G}/next", json={"agent_id": t["agent"], "goal_id": goal}, headers=me)
        assert claimed.status_code == 200, claimed.text
        assert claimed.json()["claim"]["claim"]["holder"] == t["agent"]
        held = http.get(f"{G}/next", params={"agent_id": t["agent"]}, headers=person).json()
        assert held["action"] == "continue"
        ev = command(me, {"type": "evidence.add", "item": item, "kind": "test", "verdict": "observed"})
        assert ev.status_code == 200
        assert len(http.get(f"{GOAL}/evidence?item={item}", headers=me).json()["items"]) == 1
        assert http.get(f"{GOAL}/effects", headers=me).json()["items"] == []

        # hostile input: typed 4xx answers, never a 500 or a 422, and the node keeps serving
        hostile = [
            ("POST", f"{GOAL}/commands", {"json": [1, 2]}),
            ("POST", f"{GOAL}/commands", {"json": {"command": "work.add"}}),
            ("POST", f"{GOAL}/commands", {"json": {"command": {"type": "work.add", "class": "advancement",
                                                                "title": "x" * 5000}}}),
            ("POST", f"{GOAL}/commands", {"json": {"command": {"type": "work.add", "class": ["advancement"],
                                                                "title": "x"}}}),
            ("POST", f"{GOAL}/commands", {"json": {"operation_id": "bad id with spaces", "command": {"type": "goal.pause"}}}),
            ("POST", f"{GOAL}/commands", {"json": {"goal_id": "goal_other", "command": {"type": "goal.pause"}}}),
            ("POST", f"{GOAL}/commands", {"json": {"command": {"type": "work.block", "item": item, "reason": "r"},
                                                   "expected": {"item_revision": "one"}}}),
            ("POST", f"{GOAL}/commands", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}),
            ("GET", f"{G}/goals/{'g' * 3000}", {}),
            ("GET", f"{GOAL}/work/{'w' * 500}", {}),
            ("GET", f"{GOAL}/receipts/{'r' * 400}", {}),
            ("GET", f"{GOAL}/acceptance?revision=99", {}),
            ("GET", f"{GOAL}/acceptance?revision=-1", {}),
            ("GET", f"{GOAL}/commits?limit=5000", {}),
            ("GET", f"{GOAL}/evidence?cursor=%%%", {}),
            ("GET", f"{G}/next?goal_id=goal_nope", {}),
            ("POST", f"{G}/next", {"json": {"agent_id": t["agent"], "ttl_s": 5}}),
            ("POST", f"{G}/goals", {"json": {"title": "t", "objective": "o", "subjects": {"BAD NAME": "x"}}}),
            ("POST", f"{G}/goals", {"json": {"title": "t", "objective": "o", "claim_mode": "medium"}}),
        ]
        for method, path, extra in hostile:
            headers = {**me, **extra.pop("headers", {})}
            got = http.request(method, path, headers=headers, **extra)
            assert 400 <= got.status_code < 500 and got.status_code != 422, (path, got.status_code, got.text)
            assert "error" in got.json(), got.text
        assert http.get(f"{GOAL}/status", headers=me).status_code == 200

        # 503 while the node is not running
        live.run(live.h.stop())
        down = http.get(f"{GOAL}/status", headers=person)
        assert (down.status_code, down.json()["error"]) == (503, "unavailable")
