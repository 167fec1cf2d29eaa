"""``POST G/decide`` on a real uvicorn server (interfaces.md §2.2): 200 with exactly what a guest receives —
answers, invalid requests and provider failures alike — group auth, and the group's buckets."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from decide_provider_server import serving

from wakeful.api.server import make_server
from wakeful.harness.config import Config
from wakeful.harness.decide import DecideSettings
from wakeful.harness.embed import Harness

QUESTION = {"type": "noul", "instructions": "Is it urgent?"}


async def test_decide_route(harness_runner: Any, tmp_path: Path) -> None:
    with serving("openai") as fake:
        settings = DecideSettings(provider="openai", endpoint=fake.url, model="small-1", api_key_env="NOPE",
                                  timeout_ms=8000, per_minute=4, per_second=100)  # 1 token per 15 s
        h = Harness(Config(data_dir=tmp_path, store_url=f"sqlite:///{tmp_path / 'w.db'}", decide=settings),
                    sweeps=False)
        await h.start()
        server = make_server(h, "127.0.0.1", 0, access_log=False)
        task = asyncio.ensure_future(server.serve())
        try:
            while not server.started:
                await asyncio.sleep(0.01)
            port = server.servers[0].sockets[0].getsockname()[1]
            group = await h.create_group("g")
            other = await h.create_group("o")
            agent = await h.create_agent(group.id, "a")
            _, gkey = await h.create_key("group", group_id=group.id)
            _, okey = await h.create_key("group", group_id=other.id)
            _, akey = await h.create_key("agent", group_id=group.id, agent_id=agent.id)
            url = f"http://127.0.0.1:{port}/v1/agent-groups/{group.id}/decide"
            auth = {"Authorization": f"Bearer {gkey}"}
            async with httpx.AsyncClient(timeout=10) as c:
                ok = await c.post(url, headers=auth, json={"state": "disk 99% full", "questions": {"urgent": QUESTION}})
                assert ok.status_code == 200
                assert ok.json() == {"model": "small-1", "answers": {"urgent": {"type": "noul", "probability_bp": 8300}}}
                bad = await c.post(url, headers=auth, json={"state": "x", "questions": {"no spaces": QUESTION}})
                assert bad.status_code == 200 and bad.json()["error"]["code"] == "invalid_request"
                assert bad.json()["error"]["field"] == "questions.no spaces"
                odd = await c.post(url, headers=auth, json=[1, 2])
                assert odd.status_code == 200 and odd.json()["error"]["code"] == "invalid_request"
                assert (await c.post(url, json={"state": "x", "questions": {"u": QUESTION}})).status_code == 401
                assert (await c.post(url, headers={"Authorization": f"Bearer {akey}"},
                                     json={"state": "x", "questions": {"u": QUESTION}})).status_code == 403
                assert (await c.post(url, headers={"Authorization": f"Bearer {okey}"},
                                     json={"state": "x", "questions": {"u": QUESTION}})).status_code == 404
                fake.status, fake.body = 500, b"{}"
                failed = await c.post(url, headers=auth, json={"state": "x", "questions": {"u": QUESTION}})
                assert failed.status_code == 200 and failed.json()["error"]["code"] == "provider_error"
                fake.status, fake.body = 200, None
                codes = []
                for _ in range(3):  # 2 of the group's 4 tokens are used; the bucket answers rate_limited as data
                    r = await c.post(url, headers=auth, json={"state": "x", "questions": {"u": QUESTION}})
                    assert r.status_code == 200
                    codes.append(r.json().get("error", {}).get("code"))
                assert codes == [None, None, "rate_limited"]
            assert len(fake.seen) == 4
        finally:
            server.should_exit = True
            await task
            await h.stop()
