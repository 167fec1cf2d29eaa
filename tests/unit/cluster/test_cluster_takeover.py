"""Two embedded nodes on one PostgreSQL with an injected store clock (harness.md §19.2, §5): a lease moves only
when it has expired on the store clock, the new holder adopts at a new incarnation, the old object is refused,
and the old node unloads as soon as a renewal finds the lease taken."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.harness_fixtures import TestClock, pg_url_with_schema
from support.loops_harness import call, driver_loop, loop_row, send, snapshot, started


async def test_a_lease_moves_only_after_store_clock_expiry_and_the_old_node_is_fenced(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    a = await started(url, store_clock, tmp_path / "a")
    b = await started(url, store_clock, tmp_path / "b")
    try:
        a.node.placement.renewer.paused = True  # type: ignore[union-attr]  # a stops renewing (partition)
        agent, _, loop_id = await driver_loop(a, compile_c)  # created through a: a claims the agent
        assert a.node.resident(loop_id) is not None and (await loop_row(a, loop_id)).incarnation == 1
        await b.tick()
        assert b.node.resident(loop_id) is None

        store_clock.advance(s=25)  # a's heartbeat is dead (20 s) but its lease (30 s) is not: nothing moves
        await b.tick()
        assert b.node.resident(loop_id) is None

        store_clock.advance(s=6)  # expired on the store clock: b claims and adopts at a new incarnation
        await b.tick()
        assert b.node.resident(loop_id) is not None
        row = await loop_row(b, loop_id)
        assert (row.incarnation, row.node_id) == (2, b.node.node_id)
        leases = b.node.placement.book.snapshot()  # type: ignore[union-attr]
        assert leases == {agent: 2}

        # a still runs its retired object (its monotonic proof is recent): every durable call is refused
        assert a.node.resident(loop_id) is not None
        before = await snapshot(b)
        line = await call(a, loop_id, "late", "loop.state.put", {"state": {"by": "a"}})
        assert line.endswith("-> -5")  # SF_HOST_ERROR: stale_incarnation
        after = await snapshot(b)
        assert [r for r in after["loop"] if r[0] == loop_id] == [r for r in before["loop"] if r[0] == loop_id]

        await a.tick()  # a's renewal finds the lease taken: it unloads at once and stops acting
        assert a.node.resident(loop_id) is None and a.node.placement.fenced_loops == 1  # type: ignore[union-attr]
        assert a.node.placement.book.snapshot() == {}  # type: ignore[union-attr]
        assert (await loop_row(b, loop_id)).incarnation == 2
    finally:
        await b.stop()
        await a.stop()


async def test_an_operation_on_another_nodes_agent_signals_the_holder_instead_of_loading(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    url = pg_url_with_schema(pg_schema)
    a = await started(url, store_clock, tmp_path / "a")
    b = await started(url, store_clock, tmp_path / "b")
    try:
        _, _, loop_id = await driver_loop(a, compile_c)
        await b.pause_loop(loop_id)  # a control change made on b …
        from support.loops_harness import until

        async def unloaded() -> bool:
            return a.node.resident(loop_id) is None

        await until(unloaded)  # … reaches the holder by NOTIFY wakeful_loops, without waiting for a tick
        await b.resume_loop(loop_id)

        async def back() -> bool:
            return a.node.resident(loop_id) is not None and b.node.resident(loop_id) is None

        await until(back)
        assert (await loop_row(a, loop_id)).node_id == a.node.node_id
        await send(a, loop_id, "e1", "noop", {})  # delivered to a's object, never acked: stays pending
        incarnation = (await loop_row(a, loop_id)).incarnation
        await b.events(loop_id, "retry")  # a retry made on b retires a's object; a reloads it (§4.2 row 14)

        async def reloaded() -> bool:
            res = a.node.resident(loop_id)
            return res is not None and res.incarnation == incarnation + 1 and b.node.resident(loop_id) is None

        await until(reloaded)
    finally:
        await b.stop()
        await a.stop()
