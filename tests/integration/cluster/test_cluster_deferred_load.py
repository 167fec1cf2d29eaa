"""issue 16: a load the store deferred (here: the Loop's row is locked past the lock timeout while this node
adopts its agent) is retried by the next placement tick, not left to the reconcile (60 s, here 600 s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cluster_nodes import LIMITS, set_up
from support.harness_fixtures import pg_url_with_schema

from wakeful.harness.config import Config, Placement
from wakeful.harness.embed import Harness
from wakeful.harness.store import loops
from wakeful.harness.store.core import Store

pytestmark = pytest.mark.integration

SLOW_RECONCILE = Placement(lease_ttl_s=30, renew_s=10, tick_s=1, reconcile_s=600)


async def test_a_deferred_adoption_is_retried_on_the_next_placement_tick(
    harness_runner: Any, pg_schema: str, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    tenant = await set_up(url, tmp_path / "setup", compile_c, agents=1, loops_per_agent=1)
    (loop_id,) = tenant.loops
    blocker = await Store.open(url, migrate=False)
    h = Harness(Config(data_dir=tmp_path / "n", store_url=url, placement=SLOW_RECONCILE, limits=LIMITS),
                sweeps=False)
    try:
        async with blocker.tx() as tx:  # another session holds the Loop's row lock through the first tick
            await loops.get_loop(tx, loop_id, for_update=True)
            await h.start()  # one placement tick: claims the agent; the load waits out the lock timeout
        placement = h.node.placement
        assert placement is not None
        # CI at 257ea4b (load 12) once found the lease not held here, with no deferred-load warning: say why next time
        assert placement.holds(tenant.agent_of[loop_id]), (
            placement.state, placement.book.snapshot(), placement.book.removals, placement.fenced_loops,
            placement.renewer.renewed_ns, placement.mono(), h.node.deferred_loads())
        assert h.node.resident(loop_id) is None and loop_id in h.node.deferred_loads()

        await placement.tick()  # the lock is gone: the next tick loads it
        assert h.node.resident(loop_id) is not None and not h.node.deferred_loads()
        async with h.store.tx(readonly=True) as tx:
            row = await loops.get_loop(tx, loop_id)
        assert (row.node_id, row.object_id) == (h.node.node_id, h.node.resident(loop_id).object_id)
    finally:
        await h.stop()
        await blocker.close()
