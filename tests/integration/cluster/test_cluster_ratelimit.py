"""harness.md §14, §21 "rate limits: two nodes sharing buckets — the limit holds across nodes": the per-Loop
intake bucket (60 per minute) lives in ``rate_bucket`` on PostgreSQL, so two ``wakeful serve`` nodes together
admit 60 events for one Loop, not 120."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_nodes import ServeNode, set_up
from support.harness_fixtures import pg_url_with_schema

pytestmark = pytest.mark.integration


async def test_the_per_loop_limit_holds_across_two_nodes(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=1, loops_per_agent=1)
    (loop_id,) = tenant.loops
    # the mailbox bound is raised above the 130 events: this test is about the rate bucket, and with the bucket
    # checks inside the admission batch the intake outruns a loaded machine's delivery and acks (a 429
    # mailbox_full after ~60 events is not the limiter's answer)
    default_rate = {"WAKEFUL_LIMITS__INGRESS_PER_LOOP_PER_MIN": "60", "WAKEFUL_LIMITS__PENDING_EVENTS": "200"}
    nodes = [ServeNode(f"r{i}", url, tmp_path / f"r{i}", env=default_rate) for i in range(2)]
    try:
        await asyncio.gather(*(n.start() for n in nodes))
        statuses: list[tuple[int, str | None]] = []
        loop = asyncio.get_running_loop()
        start = loop.time()
        async with httpx.AsyncClient(timeout=10) as client:
            for i in range(130):  # 65 per node: separate buckets would admit 120
                node = nodes[i % 2]
                resp = await client.post(
                    f"{node.url}/v1/agent-groups/{tenant.group_id}/loops/{loop_id}/events",
                    json={"event_id": f"r{i}", "topic": "tick", "payload": {}},
                    headers={"Authorization": f"Bearer {tenant.key}"},
                )
                statuses.append((resp.status_code, resp.headers.get("Retry-After")))
                if resp.status_code == 429:
                    assert resp.json()["error"] == "rate_limited", resp.text
        elapsed = loop.time() - start
        accepted = [s for s, _ in statuses if s == 202]
        limited = [(s, r) for s, r in statuses if s == 429]
        # tokens refill at 1 per second during the run: at most 60 + the seconds it took, from one shared bucket
        assert 60 <= len(accepted) <= 61 + elapsed and len(accepted) + len(limited) == 130, (elapsed, statuses)
        assert limited and all(r is not None and int(r) >= 1 for _, r in limited)
        assert {s for s, _ in statuses[:60]} == {202}  # both nodes drew from the one bucket
    finally:
        await asyncio.gather(*(n.close() for n in nodes))
