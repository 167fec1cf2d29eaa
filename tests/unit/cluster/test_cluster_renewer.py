"""harness.md §19.2: renewals come from a thread with its own connection, so guest or tool work that holds the
node's event loop longer than the self-fence period neither starves them nor makes the node fence itself."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from support.harness_fixtures import TestClock, pg_url_with_schema
from support.loops_harness import call, driver

from wakeful.harness.config import Config, Placement
from wakeful.harness.embed import Harness

# TTL 5 s, renew 1 s: the fence period (TTL − renew) is 4 s and the node's statement timeout 2 s — with TTL 3 s it
# was 1 s, and CI at 4a72fbd saw a one-row session read of the create below cancelled by it
SHORT = Placement(lease_ttl_s=5, renew_s=1, heartbeat_s=1, dead_after_s=3, tick_s=1, reconcile_s=2)


async def test_renewals_continue_while_the_event_loop_is_blocked_past_the_fence_period(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    h = Harness(Config(data_dir=tmp_path, store_url=pg_url_with_schema(pg_schema), placement=SHORT),
                clock=store_clock, sweeps=False)
    blocked: list[tuple[int, int]] = []

    def hog(args: Any, ctx: Any) -> dict[str, Any]:
        placement = h.node.placement
        assert placement is not None
        before = placement.renewer.renewals
        time.sleep(4.5)  # holds the event loop (and the GIL between bytecodes) longer than TTL − renew = 4 s
        blocked.append((before, placement.renewer.renewals))
        return {"ok": True}

    h.register_tool("slow.read", hog, description="blocks the event loop")
    await h.start()
    try:
        group = await h.create_group("g")
        agent = await h.create_agent(group.id, "a")
        session = await h.create_session(agent.id, "inbox")
        art = await driver(h, agent.id, compile_c)
        loop_id = (await h.create_loop(agent_id=agent.id, session_id=session.id, artifact=art))["id"]
        placement = h.node.placement
        assert placement is not None and placement.holds(agent.id)
        assert await call(h, loop_id, "e1", "slow.read", {}) == "call slow.read -> 1"
        ((before, after),) = blocked
        assert after - before >= 3  # the thread renewed about once a second while the loop was blocked
        assert placement.holds(agent.id) and placement.fenced_loops == 0 and h.node.resident(loop_id) is not None
        # and the same call right after still counts as this node's: the lease was proven throughout
        assert await call(h, loop_id, "e2", "loop.state.put", {"state": {"n": 1}}) == "call loop.state.put -> 1"
    finally:
        await h.stop()
