"""harness.md §5, §19.2, §21 with real processes: a node that cannot prove its lease any more never acts again.

- A SIGSTOPped node that wakes after its lease expired (and another node adopted the Loop) cannot complete a host
  call or an ack: the checkpoint, the wake and the ack all come from the new incarnation.
- A node partitioned from PostgreSQL (its connections cut by a proxy) fences itself before the other node can
  claim its agents, and does not act for them after the partition heals.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_nodes import PLACEMENT, Probe, Sender, ServeNode, set_up, until
from support.harness_fixtures import PgProxy, pg_url_with_schema

pytestmark = pytest.mark.integration


async def test_a_paused_node_that_wakes_after_its_lease_expired_cannot_complete_a_host_call_or_an_ack(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=1, loops_per_agent=1)
    (loop_id,) = tenant.loops
    old, new = ServeNode("old", url, tmp_path / "old"), ServeNode("new", url, tmp_path / "new")
    probe = await Probe.open(url)
    try:
        await probe.start(old)
        await until(lambda: probe.placed_on(old, [loop_id]), timeout=30)
        await probe.start(new)
        first = await probe.loop(loop_id)

        sender = Sender(tenant, [old, new])
        async with httpx.AsyncClient(timeout=10) as client:  # admitted on the other node, delivered on the holder
            status = await sender.send_one(client, new, loop_id, asyncio.get_running_loop(), {"sleep_ms": 6000})
        assert status == 202
        ((_, event_id),) = sender.admitted

        async def delivered() -> bool:
            row = await probe.event(loop_id, event_id)
            return row is not None and row.first_delivered_ms is not None

        await until(delivered, timeout=20, step=0.02)
        old.signal(signal.SIGSTOP)  # the old object is asleep inside its 6 s before put/notify/ack

        async def adopted() -> bool:
            row = await probe.loop(loop_id)
            return row.node_id == new.node_id and row.object_id is not None and row.incarnation > first.incarnation

        await until(adopted, timeout=PLACEMENT.lease_ttl_s + PLACEMENT.tick_s + 30)
        adopted_row = await probe.loop(loop_id)
        old.signal(signal.SIGCONT)  # wakes with a stale lease; its guest's sleep ends and it tries to act

        async def acked() -> bool:
            row = await probe.event(loop_id, event_id)
            return row.status == "acked"

        await until(acked, timeout=40)
        await asyncio.sleep(1.0)  # anything the old node still had in flight has had time to arrive
        event = await probe.event(loop_id, event_id)
        assert event.acked_incarnation == adopted_row.incarnation
        wakes = [w for w in await probe.wakes() if w[0] == loop_id]
        assert wakes == [(loop_id, event_id, adopted_row.incarnation)]
        row = await probe.loop(loop_id)
        assert json.loads(row.checkpoint) == {"inc": adopted_row.incarnation, "last": event_id}
        assert row.incarnation == adopted_row.incarnation and row.node_id == new.node_id
        assert old.proc is not None and old.proc.returncode is None  # the paused node kept running…
        log = old.log_text()
        assert "self-fenced" in log or "leases lost" in log  # …and fenced itself
        nodes = await probe.node_rows()

        async def old_empty() -> bool:
            return int((await probe.node_rows())["old"].objects) == 0

        await until(old_empty, timeout=10)  # its heartbeat reports no objects any more
        assert nodes["new"].state == "alive"
    finally:
        await asyncio.gather(old.close(), new.close())
        await probe.close()


def _times(log: str, pattern: str) -> list[datetime]:
    return [datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
            for m in re.finditer(rf"^(\S+ \S+) .*{pattern}", log, re.M)]


async def test_a_node_partitioned_from_postgresql_fences_itself_before_another_claims(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=3, loops_per_agent=2)
    probe = await Probe.open(url)
    async with PgProxy() as proxy:
        cut_off = ServeNode("cut", proxy.url(pg_schema), tmp_path / "cut")
        other = ServeNode("other", url, tmp_path / "other")
        try:
            await probe.start(cut_off)
            await until(lambda: probe.placed_on(cut_off, tenant.loops), timeout=30)
            await probe.start(other)
            before = await probe.placement()

            proxy.cut()  # the partition: every connection of the node dropped, new ones refused
            cut_at = datetime.now()

            async def moved() -> bool:
                rows = await probe.placement()
                return all(rows[lp][0] == other.node_id and rows[lp][1] is not None
                           and rows[lp][2] > before[lp][2] for lp in tenant.loops)

            await until(moved, timeout=PLACEMENT.lease_ttl_s + PLACEMENT.tick_s + 30)
            fenced = _times(cut_off.log_text(), "self-fenced")
            claims = [t for t in _times(other.log_text(), "claimed agent") if t > cut_at]
            assert fenced and claims, (cut_off.log_text()[-2000:], other.log_text()[-2000:])
            assert fenced[0] < min(claims)  # §19.2: self-fencing happens before another node may claim

            sender = Sender(tenant, [other])
            async with httpx.AsyncClient(timeout=10) as client:
                for lp in tenant.loops:
                    assert await sender.send_one(client, other, lp, asyncio.get_running_loop()) == 202
            proxy.restore()  # the partition heals: the node must not act for the Loops it lost

            async def all_acked() -> bool:
                events = await probe.events()
                return all(events.get(key, ("missing",))[0] == "acked" for key in sender.admitted)

            await until(all_acked, timeout=30)
            await asyncio.sleep(PLACEMENT.tick_s * 2)
            after = await probe.placement()
            events = await probe.events()
            assert all(after[lp][0] == other.node_id for lp in tenant.loops)
            assert all(events[key][1] == after[key[0]][2] for key in sender.admitted)  # acked by the new objects
            assert cut_off.proc is not None and cut_off.proc.returncode is None
            leases = await probe.leases()
            assert all(node == other.node_id for node, _, _ in leases.values())
        finally:
            await asyncio.gather(cut_off.close(), other.close())
            await probe.close()
