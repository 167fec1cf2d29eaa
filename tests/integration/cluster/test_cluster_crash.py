"""harness.md §19.5, §21 "node crash (b) after delivery before ack, (c) after notify before ack" with real
processes: the holder is killed with SIGKILL at that point; the other node adopts, the event is processed again,
acked exactly once, and the agent gets exactly one wake (the replay's notify is a duplicate of the same key)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_nodes import PLACEMENT, Probe, Sender, ServeNode, set_up, until
from support.harness_fixtures import pg_url_with_schema

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("moment", ["after_delivery", "after_notify"])
async def test_a_killed_holder_loses_no_event_and_wakes_no_one_twice(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any, moment: str,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=1, loops_per_agent=1)
    (loop_id,) = tenant.loops
    doomed, spare = ServeNode("doomed", url, tmp_path / "d"), ServeNode("spare", url, tmp_path / "s")
    probe = await Probe.open(url)
    try:
        await probe.start(doomed)

        await until(lambda: probe.placed_on(doomed, [loop_id]), timeout=30)
        await probe.start(spare)
        before = await probe.loop(loop_id)

        payload = {"sleep_ms": 8000} if moment == "after_delivery" else {"ack_after_ms": 8000}
        sender = Sender(tenant, [spare])
        async with httpx.AsyncClient(timeout=10) as client:  # admitted on the spare, delivered on the holder
            assert await sender.send_one(client, spare, loop_id, asyncio.get_running_loop(), payload) == 202
        ((_, event_id),) = sender.admitted

        async def reached() -> bool:
            if moment == "after_delivery":
                row = await probe.event(loop_id, event_id)
                return row is not None and row.first_delivered_ms is not None
            return any(w[1] == event_id for w in await probe.wakes())

        await until(reached, timeout=20, step=0.02)
        doomed.signal(signal.SIGKILL)

        async def acked() -> bool:
            row = await probe.event(loop_id, event_id)
            return row.status == "acked"

        await until(acked, timeout=PLACEMENT.lease_ttl_s + PLACEMENT.tick_s + 40)
        row = await probe.loop(loop_id)
        event = await probe.event(loop_id, event_id)
        assert row.node_id == spare.node_id and row.incarnation > before.incarnation
        assert event.acked_incarnation == row.incarnation  # acked once, by the new object
        wakes = [w for w in await probe.wakes() if w[0] == loop_id]
        assert [w[1] for w in wakes] == [event_id]  # exactly one wake for the event
        expected_inc = row.incarnation if moment == "after_delivery" else before.incarnation
        assert wakes[0][2] == expected_inc  # (c): the wake the killed node committed is the one that stays
    finally:
        await asyncio.gather(doomed.close(), spare.close())
        await probe.close()
