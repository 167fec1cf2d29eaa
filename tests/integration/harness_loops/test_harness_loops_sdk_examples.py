"""SDK examples as durable Loops: `heartbeat.c` built by `loop.build` (the real confined Builder) keeps
counting from its checkpoint across a restart (harness.md §6, §8; sdk.md examples)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from support.loops_harness import loop_row, started, tenant, until

from wakeful.harness.embed import Harness
from wakeful.runtime.scheduler import WAIT_TIMER


async def _beat(h: Harness, clock: Any, loop_id: str, first: int, last: int) -> None:
    """Advance the injected clock one interval at a time, let the scheduler run the due sleeper, and wait
    for each beat's checkpoint."""
    for beat in range(first, last + 1):
        await until(lambda: _sleeping(h, loop_id))  # its sleep began before the clock moves past it
        clock.advance(s=1)
        h.node.runtime.run_batch()

        async def stored(n: int = beat) -> bool:
            return (await loop_row(h, loop_id)).checkpoint == {"beats": n}

        await until(stored)


async def _sleeping(h: Harness, loop_id: str) -> bool:
    """The Loop's guest waits on its timer (its start, or its last checkpoint's answer, has been handled)."""
    resident = h.node.resident(loop_id)
    run = None if resident is None else h.node.runtime.run_of(resident.object_id)
    return run is not None and run.wait == WAIT_TIMER


async def test_heartbeat_built_by_loop_build_continues_from_its_checkpoint(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path,
) -> None:
    source = resources.files("wakeful.sdk").joinpath("examples/heartbeat.c").read_text()
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        built = await h.build(agent, {"sdk_version": 1, "entry": "heartbeat.c", "files": {"heartbeat.c": source}},
                              path="/loops/heartbeat.elf")
        assert built["state"] == "succeeded", built
        loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact="/loops/heartbeat.elf",
                                       config={"interval_ms": 1000}))["id"]
        await _beat(h, store_clock, loop_id, 1, 3)
        assert (await loop_row(h, loop_id)).checkpoint == {"beats": 3}
    finally:
        await h.stop()
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        await _beat(h, store_clock, loop_id, 4, 5)
        row = await loop_row(h, loop_id)
        assert row.incarnation == 2 and row.checkpoint == {"beats": 5}
        assert row.artifact_sha256 == built["sha256"] and row.artifact_path == "/loops/heartbeat.elf"
    finally:
        await h.stop()
