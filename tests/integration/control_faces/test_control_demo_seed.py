"""``seed_demo_goal`` (interfaces.md §8, ``wakeful serve --demo``): a goal whose monitor is backed by the demo's
Loop; seeding again changes nothing; the Loop's wake resumes the follow-up item.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.loops_harness import call, driver_loop, loop_row

from wakeful.control.demo import seed_demo_goal
from wakeful.control.embed import Harness
from wakeful.harness.config import Config


async def test_seed_demo_goal(harness_runner: Any, tmp_path: Path, store_clock: Any, compile_c: Any) -> None:
    h = Harness(Config(data_dir=tmp_path, store_url=f"sqlite:///{tmp_path / 'w.db'}"), clock=store_clock,
                sweeps=False)
    await h.start()
    try:
        agent, _, loop_id = await driver_loop(h, compile_c)
        group = (await loop_row(h, loop_id)).group_id
        seeded = await seed_demo_goal(h, group, agent, loop_id)
        assert await seed_demo_goal(h, group, agent, loop_id) == seeded  # a restart replays, nothing new
        monitor = await h.control.item(seeded["goal_id"], seeded["monitor"])
        assert (monitor["class"], monitor["loop_id"]) == ("monitor", loop_id)
        assert monitor["watch_state"]["state"] == "active"  # recorded at once, not at the next sweep
        assert (await h.control.item(seeded["goal_id"], seeded["follow_up"]))["status"] == "deferred"
        first = await h.control.next(agent, seeded["goal_id"])
        assert (first["decision"], first["ask"]["gate_id"]) == ("ask_person", seeded["gate"])
        await call(h, loop_id, "e1", "agent.notify", {"content": "event arrived", "dedup_key": "e1"})
        await h.settle()
        await h._bridge.settle()  # type: ignore[union-attr]
        assert (await h.control.item(seeded["goal_id"], seeded["follow_up"]))["status"] == "open"
        board = await h.control.board(seeded["goal_id"])
        assert seeded["follow_up"] in [c["id"] for c in board["columns"]["open"]["runnable"]]
        assert (await h.control.next(agent, seeded["goal_id"]))["item"]["id"] == seeded["follow_up"]
    finally:
        await h.stop()
