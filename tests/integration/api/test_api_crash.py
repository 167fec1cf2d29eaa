"""Crash safety of ``wakeful serve`` (issue 6 "Must show"): a real server process, POST → 202, ``kill -9``
before the Loop acks, restart: the event is delivered again, acked once, and the session got exactly one wake.
Also: SIGTERM stops the server gracefully (exit 0)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from live_api import GUESTS, ServeProcess, auth, make_loop, wait_for

from wakeful import Harness
from wakeful.harness.config import Config

pytestmark = pytest.mark.integration
HELD_C = (GUESTS / "held_ack.c").read_text()
FAST_PLACEMENT = {  # PostgreSQL: a dead node's leases are taken over within seconds, not half a minute
    "WAKEFUL_PLACEMENT__LEASE_TTL_S": "3", "WAKEFUL_PLACEMENT__RENEW_S": "1",
    "WAKEFUL_PLACEMENT__HEARTBEAT_S": "1", "WAKEFUL_PLACEMENT__DEAD_AFTER_S": "2", "WAKEFUL_PLACEMENT__TICK_S": "1",
}


async def _tenant(url: str, data_dir: Path) -> dict[str, str]:
    async with Harness(Config(data_dir=data_dir, store_url=url), sweeps=False) as h:
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a1")
        session = await h.create_session(agent.id, "inbox")
        _, gkey = await h.create_key("group", group_id=group.id)
        _, akey = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
    return {"group": group.id, "agent": agent.id, "session": session.id, "gkey": gkey, "akey": akey}


def test_kill9_before_ack_redelivers_once(store_url: str, tmp_path: Path, compile_c: Any) -> None:
    data = tmp_path / "data"
    t = asyncio.run(_tenant(store_url, data))
    serve = ServeProcess(data, store_url)
    serve.env = dict(FAST_PLACEMENT) if store_url.startswith("postgresql") else {}
    serve.start()
    try:
        loop_id = make_loop(serve, t, compile_c, name="held_ack", source=HELD_C)
        g = f"{serve.url}/v1/agent-groups/{t['group']}"
        c = serve.client

        def messages() -> list[dict[str, Any]]:
            r = c.get(f"{g}/sessions/{t['session']}/messages", headers=auth(t["akey"]))
            assert r.status_code == 200, r.text
            return list(r.json()["items"])

        def checkpoint() -> dict[str, Any]:
            r = c.get(f"{g}/loops/{loop_id}", params={"include": "checkpoint"}, headers=auth(t["akey"]))
            assert r.status_code == 200, r.text
            return dict(r.json().get("checkpoint") or {})

        r = c.post(f"{g}/loops/{loop_id}/events", headers=auth(t["gkey"]), json={"topic": "work", "event_id": "w1"})
        assert r.status_code == 202 and r.json()["duplicate"] is False
        wait_for(lambda: len(messages()) == 1 and checkpoint().get("got") == ["w1"])
        serve.kill9()  # the guest woke the agent but never acked

        serve.start()
        wait_for(lambda: checkpoint().get("got") == ["w1", "w1"], timeout=40)  # delivered again
        pending = c.get(f"{g}/loops/{loop_id}/events", params={"status": "pending"}, headers=auth(t["akey"])).json()
        assert [e["event_id"] for e in pending["items"]] == ["w1"]
        r = c.post(f"{g}/loops/{loop_id}/events", headers=auth(t["gkey"]),
                   json={"topic": "release", "event_id": "r1", "payload": {"event_id": "w1"}})
        assert r.status_code == 202
        wait_for(lambda: checkpoint().get("acked") == ["w1"])
        listed = c.get(f"{g}/loops/{loop_id}/events", headers=auth(t["akey"])).json()["items"]
        assert {e["event_id"]: e["status"] for e in listed} == {"w1": "acked", "r1": "acked"}
        assert checkpoint() == {"got": ["w1", "w1", "r1"], "acked": ["w1"]}  # acked once
        wakes = messages()
        assert len(wakes) == 1 and wakes[0]["dedup_key"] == "work:w1"  # exactly one wake
        assert serve.terminate() == 0  # SIGTERM: graceful stop
        assert "Traceback" not in serve.log.read_text()
    finally:
        serve.close()
