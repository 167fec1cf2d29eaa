"""The reconcile follows ``placement.reconcile_s`` (harness.md §11, §19.3: every 60 s) while the node ticks every
``placement.tick_s`` (10 s): a Loop paused behind the node's back (another process on the store) stays loaded
through the ticks between two reconciles and is unloaded by the next reconcile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.harness_fixtures import TestClock
from support.loops_harness import driver_loop

from wakeful.harness import lifecycle as lc
from wakeful.harness.config import Config, Placement
from wakeful.harness.embed import Harness
from wakeful.harness.store import loops


def test_the_default_reconcile_runs_on_every_sixth_tick(tmp_path: Path) -> None:
    h = Harness(Config(data_dir=tmp_path, store_url=f"sqlite:///{tmp_path / 'w.db'}"), sweeps=False)
    assert (h.tick_s, h.reconcile_s) == (10.0, 60.0)  # §19.3 defaults
    forced = Harness(Config(data_dir=tmp_path, store_url=f"sqlite:///{tmp_path / 'w.db'}"), tick_s=0.5)
    assert forced.reconcile_s == 0.5  # a tick period forced by an embedder (tests) drives the reconcile too


async def test_a_loop_paused_elsewhere_is_unloaded_at_the_next_reconcile_not_the_next_tick(
    harness_runner: Any, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    cfg = Config(data_dir=tmp_path, store_url=f"sqlite:///{tmp_path / 'w.db'}",
                 placement=Placement(tick_s=10, reconcile_s=30))
    h = Harness(cfg, clock=store_clock, sweeps=False)
    await h.start()
    try:
        _, _, loop_id = await driver_loop(h, compile_c)
        await h._sweep_tick()  # tick 0 reconciles: nothing to change
        assert h.node.resident(loop_id) is not None
        async with h.store.tx() as tx:  # another process pauses it (no signal reaches this node on SQLite)
            assert await loops.update_loop(tx, loop_id, state=lc.PAUSED, pause_reason="user",
                                          where_state=lc.ACTIVE)
        for _ in range(2):  # ticks 1 and 2: reloads and capacity waits only
            await h._sweep_tick()
            assert h.node.resident(loop_id) is not None
        await h._sweep_tick()  # tick 3 = 30 s: the reconcile unloads it
        assert h.node.resident(loop_id) is None
    finally:
        await h.stop()
