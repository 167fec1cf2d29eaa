"""harness.md §19.4 with real processes: SIGTERM drains a node — it ends its incarnations, releases its leases
and marks itself gone — and the other node adopts everything at once, with no pending event left waiting for a
reconcile: both nodes run with a reconcile period far beyond the test (``NO_RECONCILE``), so every event that is
delivered was delivered by a signal or by the adoption itself (scheduler terms, not a wall-clock bound).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from cluster_nodes import Probe, Sender, ServeNode, set_up, until
from support.harness_fixtures import pg_url_with_schema

pytestmark = pytest.mark.integration

DRAIN_BOUND_S = 25  # §19.4
NO_RECONCILE = {"WAKEFUL_PLACEMENT__RECONCILE_S": "3600"}  # no reconcile pass happens while the test runs


async def test_a_drained_node_hands_every_loop_over_with_no_event_left_waiting(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=10, loops_per_agent=3)
    leaving = ServeNode("leaving", url, tmp_path / "a", env=dict(NO_RECONCILE))
    staying = ServeNode("staying", url, tmp_path / "b", env=dict(NO_RECONCILE))
    probe = await Probe.open(url)
    stop = asyncio.Event()
    sender = Sender(tenant, [staying])
    try:
        await probe.start(leaving)

        await until(lambda: probe.placed_on(leaving, tenant.loops), timeout=30)  # alone, it takes every agent
        await probe.start(staying)
        before = await probe.placement()
        send_task = asyncio.get_running_loop().create_task(sender.run(stop, workers=1, per_s=10))
        await asyncio.sleep(1.0)

        loop = asyncio.get_running_loop()
        leaving.signal(signal.SIGTERM)
        exit_code = await leaving.wait(timeout=DRAIN_BOUND_S + 10)
        drained_in = loop.time()

        async def handed_over() -> bool:
            rows = await probe.placement()
            return all(rows[lp][0] == staying.node_id and rows[lp][1] is not None
                       and rows[lp][2] > before[lp][2] for lp in tenant.loops)

        took = await until(handed_over, timeout=30, step=0.05)
        await asyncio.sleep(1.0)  # events keep arriving at the adopted Loops for a while
        stop.set()
        await send_task
        ages = [await probe.oldest_pending_age_ms()]

        assert exit_code == 0
        rows = await probe.node_rows()
        assert rows["leaving"].state == "gone" and rows["staying"].state == "alive"
        leases = await probe.leases()
        assert leases and all(node == staying.node_id for node, _, _ in leases.values())
        assert not sender.refused, sender.refused[:5]

        async def all_acked() -> bool:
            events = await probe.events()
            return all(events.get(key, ("missing",))[0] == "acked" for key in sender.admitted)

        await until(all_acked, timeout=120)  # far below the reconcile period: no event waited for one
        assert "drain incomplete" not in leaving.log_text()
        print(f"\ndrain: node exited, {len(tenant.loops)} Loops adopted {took:.2f} s later; oldest pending "
              f"when sending stopped {max(ages)} ms; {len(sender.admitted)} events, all acked")
        _ = drained_in
    finally:
        stop.set()
        await asyncio.gather(leaving.close(), staying.close())
        await probe.close()
