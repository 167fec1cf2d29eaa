"""harness.md §19.4 with real processes: SIGTERM drains a node — it ends its incarnations, releases its leases
and marks itself gone — and the other node adopts everything at once, with no pending event left waiting longer
than one reconcile period.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from cluster_nodes import PLACEMENT, Probe, Sender, ServeNode, set_up, until
from support.harness_fixtures import pg_url_with_schema

pytestmark = pytest.mark.integration

DRAIN_BOUND_S = 25  # §19.4


async def test_a_drained_node_hands_every_loop_over_with_no_event_left_waiting(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=10, loops_per_agent=3)
    leaving, staying = ServeNode("leaving", url, tmp_path / "a"), ServeNode("staying", url, tmp_path / "b")
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
        ages = []
        for _ in range(20):  # events keep arriving: none waits longer than one reconcile period
            ages.append(await probe.oldest_pending_age_ms())
            await asyncio.sleep(0.15)
        stop.set()
        await send_task

        assert exit_code == 0
        rows = await probe.node_rows()
        assert rows["leaving"].state == "gone" and rows["staying"].state == "alive"
        leases = await probe.leases()
        assert leases and all(node == staying.node_id for node, _, _ in leases.values())
        # released, not expired: the other node adopted within about one placement tick of the exit
        assert took <= PLACEMENT.tick_s + 10, took
        assert max(ages) <= PLACEMENT.reconcile_s * 1000, ages
        assert not sender.refused, sender.refused[:5]

        async def all_acked() -> bool:
            events = await probe.events()
            return all(events.get(key, ("missing",))[0] == "acked" for key in sender.admitted)

        await until(all_acked, timeout=30)
        assert "drain incomplete" not in leaving.log_text()
        print(f"\ndrain: node exited, {len(tenant.loops)} Loops adopted {took:.2f} s later; oldest pending "
              f"after handover {max(ages)} ms; {len(sender.admitted)} events, all acked")
        _ = drained_in
    finally:
        stop.set()
        await asyncio.gather(leaving.close(), staying.close())
        await probe.close()
