"""harness.md §19.5 with real processes: three ``wakeful serve`` nodes on one PostgreSQL, 300 Loops across 60
agents; one node is killed with SIGKILL while events keep arriving on every node. Every Loop runs again on a
live node, no admitted event is lost and no wake is delivered twice. How soon (lease TTL + one sweep, §19.5) is
a figure of ``wakeful bench harness`` and, with an injected clock, of tests/unit/cluster/test_cluster_takeover.py:
wall-clock bounds here only fail on a loaded machine.
"""

from __future__ import annotations

import asyncio
import collections
import signal
from pathlib import Path
from typing import Any

import pytest
from cluster_nodes import PLACEMENT, Probe, Sender, ServeNode, set_up, until
from support.harness_fixtures import pg_url_with_schema

pytestmark = pytest.mark.integration

LOAD_BOUND_S = 30.0  # smoke bound for loading ~100 Loops on a shared 2-core machine once claimed


async def test_kill_9_of_one_node_loses_nothing_and_everything_runs_again(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    t0 = asyncio.get_running_loop().time()
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=60, loops_per_agent=5)
    assert len(tenant.loops) == 300
    nodes = [ServeNode(f"n{i}", url, tmp_path / f"n{i}") for i in range(3)]
    probe = await Probe.open(url)
    stop = asyncio.Event()
    sender = Sender(tenant, nodes)
    try:
        t1 = asyncio.get_running_loop().time()
        await asyncio.gather(*(n.start() for n in nodes))
        t2 = asyncio.get_running_loop().time()
        ids = await probe.node_ids()
        for n in nodes:
            n.node_id = ids[n.name]

        async def all_running(on: set[str]) -> bool:
            rows = await probe.placement()
            return all(node in on and obj is not None for node, obj, _ in rows.values())

        await until(lambda: all_running({n.node_id for n in nodes}), timeout=60)
        before = await probe.placement()
        print(f"\nsetup {t1 - t0:.1f} s, serve start {t2 - t1:.1f} s, placed {asyncio.get_running_loop().time() - t2:.1f} s")
        share = collections.Counter(node for node, _, _ in before.values())
        assert sum(share.values()) == 300 and set(share) <= {n.node_id for n in nodes}

        send_task = asyncio.get_running_loop().create_task(sender.run(stop))

        async def admitted_at_least(n: int) -> bool:
            return len(sender.admitted) >= n

        # counted, not timed: on a loaded machine 2 s of sending may admit only a handful of events
        await until(lambda: admitted_at_least(20), timeout=120)
        victim = max(nodes, key=lambda n: share[n.node_id])  # the node with the most Loops
        survivors = [n for n in nodes if n is not victim]
        moved = {loop for loop, (node, _, _) in before.items() if node == victim.node_id}
        assert moved
        loop = asyncio.get_running_loop()
        victim.signal(signal.SIGKILL)
        killed_at = loop.time()
        sender.skip.add(victim.name)

        async def recovered() -> bool:
            rows = await probe.placement()
            return all(
                node in {n.node_id for n in survivors} and obj is not None
                and (loop_id not in moved or inc > before[loop_id][2])
                for loop_id, (node, obj, inc) in rows.items()
            )

        async def claimed() -> bool:
            leases = await probe.leases()
            return len(leases) == 60 and all(
                node in {n.node_id for n in survivors} and left > 0 for node, _, left in leases.values())

        claimed_in = await until(claimed, timeout=PLACEMENT.lease_ttl_s + PLACEMENT.tick_s + 30, step=0.05)
        took = claimed_in + await until(recovered, timeout=LOAD_BOUND_S + 30)
        recovered_at = loop.time()

        async def admitted_after_recovery() -> bool:  # events keep arriving after the move, on every survivor
            return len(sender.admitted) >= 40 and all(
                any(t >= recovered_at for t in sender.by_node.get(n.name, [])) for n in survivors)

        await until(admitted_after_recovery, timeout=120)
        stop.set()
        await send_task

        # events were admitted on every surviving node during the outage and after it
        for n in survivors:
            times = sender.by_node.get(n.name, [])
            assert any(killed_at <= t < recovered_at for t in times), (n.name, "during")
            assert any(t >= recovered_at for t in times), (n.name, "after")
        assert not [r for r in sender.refused if r[0] != victim.name], sender.refused[:5]
        assert len(sender.admitted) >= 40

        async def all_acked() -> bool:
            events = await probe.events()
            return all(events.get(key, ("missing",))[0] == "acked" for key in sender.admitted)

        await until(all_acked, timeout=60)
        events = await probe.events()
        wakes = await probe.wakes()
        per_event = collections.Counter((loop_id, key) for loop_id, key, _ in wakes)
        lost = [key for key in sender.admitted if events.get(key, ("missing",))[0] != "acked"]
        twice = [key for key, count in per_event.items() if count > 1]
        missing_wake = [key for key in sender.admitted if per_event[key] != 1]
        assert lost == [] and twice == [] and missing_wake == []
        # one wake per admitted event; any other only of a request to the victim whose answer the kill lost (it may
        # have committed before the kill: durable, delivered once — a run under load saw 85 wakes for 84 admitted)
        extra = [key for key in per_event if key not in sender.admitted]
        assert all(sender.unanswered.get(key) == victim.name for key in extra), (extra, sender.unanswered)
        assert len(wakes) == len(sender.admitted) + len(extra)
        # the killed node's leases all moved to survivors at a higher epoch
        leases = await probe.leases()
        assert all(node != victim.node_id for node, _, _ in leases.values())
        print(f"\nfailover: leases re-claimed in {claimed_in:.2f} s, {len(moved)} Loops running again after "
              f"{took:.2f} s; admitted {len(sender.admitted)} events "
              f"({dict((k, len(v)) for k, v in sender.by_node.items())}), lost 0, wakes twice 0")
    finally:
        stop.set()
        await asyncio.gather(*(n.close() for n in nodes))
        await probe.close()
