"""What a node keeps per resident Loop (issue 16, benchmarks.md §2.2 memory per durable waiter), in object terms:
Loops of one artifact and configuration share the program and the capability policy, and an idle resident Loop
holds no lock and no task of its own."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

from support.loops_harness import driver, send, started, tenant

from wakeful.harness.embed import Harness

LOOPS = 3


async def _loops(h: Harness, compile_c: Any, n: int = LOOPS) -> list[str]:
    _, agent, session = await tenant(h)
    art = await driver(h, agent, compile_c)
    return [str((await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]) for _ in range(n)]


def _objects(h: Harness, loop_ids: list[str]) -> list[Any]:
    runtime = h.node.runtime
    out = []
    for loop_id in loop_ids:
        res = h.node.resident(loop_id)
        assert res is not None
        out.append(runtime._find(res.object_id))
    return out


async def test_loops_of_one_artifact_share_the_program_and_the_capability_policy(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        objects = _objects(h, await _loops(h, compile_c))
        assert len({id(o.program) for o in objects}) == 1
        # the capability index (a dict and a list per capability name) was built again for every Loop
        assert len({id(o.ctx.policy) for o in objects}) == 1
    finally:
        await h.stop()


async def test_an_idle_resident_loop_holds_no_lock_and_no_task(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        await _loops(h, compile_c, 1)
        tasks_with_one = len(asyncio.all_tasks())
        loop_ids = await _loops(h, compile_c)
        await h.tick()  # a reconcile looks at every active Loop
        await h.settle()
        assert all(h.node.resident(i) is not None for i in loop_ids)
        # the node kept one asyncio.Lock per Loop it ever loaded or reconciled, for ever
        assert not h.node._locks
        assert not any(h.node.is_locked(i) for i in loop_ids)
        assert len(asyncio.all_tasks()) <= tasks_with_one  # more Loops, no more tasks
    finally:
        await h.stop()


async def test_a_load_waiting_for_the_lock_keeps_it_until_it_is_done(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    # the lock leaves the map only when nobody holds it or waits for it: a second load waits for the first
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        (loop_id,) = await _loops(h, compile_c, 1)
        before = h.node.resident(loop_id)
        assert before is not None
        first = asyncio.create_task(h.node.load(loop_id))
        second = asyncio.create_task(h.node.load(loop_id))
        await asyncio.sleep(0)
        assert h.node.is_locked(loop_id)
        a, b = await asyncio.gather(first, second)
        assert a is not None and b is not None
        assert (a.incarnation, b.incarnation) == (before.incarnation + 1, before.incarnation + 2)
        assert h.node.resident(loop_id) is b
        assert not h.node._locks
    finally:
        await h.stop()


async def test_an_idle_resident_loop_keeps_one_empty_map_of_deliveries(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    # §11/§12 need the ids delivered to the object and when: a set beside a dict of the same ids held two
    # containers (0.28 KB empty) per Loop; one map keeps both
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        (loop_id,) = await _loops(h, compile_c, 1)
        res = h.node.resident(loop_id)
        assert res is not None
        containers = [x for x in gc.get_referents(res) if isinstance(x, set | dict | list)]
        assert containers == [{}]
        await send(h, loop_id, "e1", "noop", {})
        assert "e1" in res.delivered and isinstance(res.delivered["e1"], int)
    finally:
        await h.stop()
