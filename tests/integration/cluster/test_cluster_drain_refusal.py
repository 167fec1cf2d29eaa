"""A draining cluster node refuses intake: ``/healthz`` and both intake routes answer ``503 unavailable`` from
the moment the drain starts (harness.md §19.4, interfaces.md §2.1 "node draining", §2.2 ``/healthz``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.harness_fixtures import pg_url_with_schema

from wakeful.api.app import create_app
from wakeful.harness.config import Config
from wakeful.harness.embed import Harness

pytestmark = pytest.mark.integration

EVENTS = "/v1/agent-groups/g_x/loops/l_x/events"
WEBHOOK = "/v1/loop-webhooks/" + "a" * 43


async def test_a_draining_node_answers_503_on_healthz_and_intake(
    harness_runner: Any, pg_schema: str, tmp_path: Path,
) -> None:
    h = Harness(Config(data_dir=tmp_path, store_url=pg_url_with_schema(pg_schema), node_name="d-1"), sweeps=False)
    await h.start()
    try:
        placement = h.node.placement
        assert placement is not None and placement.accepting
        transport = httpx.ASGITransport(app=create_app(h, node_name="d-1"))
        async with httpx.AsyncClient(transport=transport, base_url="http://node") as client:
            ok = await client.get("/healthz")
            assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text
            # alive: the routes run their own checks (no key → 401, unknown secret → 404)
            assert (await client.post(EVENTS, json={"topic": "t"})).status_code == 401
            assert (await client.post(WEBHOOK, json={})).status_code == 404

            async def refused() -> None:
                health = await client.get("/healthz")
                assert health.status_code == 503, health.text
                assert health.json()["status"] == "draining" and health.json()["error"] == "unavailable"
                for path in (EVENTS, WEBHOOK):
                    r = await client.post(path, json={"topic": "t"})
                    assert r.status_code == 503 and r.json()["error"] == "unavailable", (path, r.text)

            await placement._tick_lock.acquire()  # hold the drain in its first step: the node is "draining"
            drain = asyncio.ensure_future(placement.drain())
            try:
                for _ in range(100):
                    if placement.state == "draining":
                        break
                    await asyncio.sleep(0.01)
                assert placement.state == "draining" and not placement.accepting
                await refused()
            finally:
                placement._tick_lock.release()
                await drain
            assert placement.state == "gone"
            await refused()
    finally:
        await h.stop()
