"""Isolation and shutdown against the real child (runtime-protocol.md §12, §16 item 10): control requests
are answered between scheduler batches whatever guests do, and shutdown does not wait for the guests — both in
scheduler terms (the server's counters in ``wakeful.stats``; sleepers whose timers lie an hour ahead). The
wall-clock figures of §16 (replies within 250 ms, exit within 2 s) are measured by ``wakeful bench stdio``
(``init.shutdown_ms``), not asserted here."""

from __future__ import annotations

import asyncio
from typing import Any

import stdio_guests as g


def test_control_replies_wait_at_most_one_batch_next_to_hostile_guests(compile_c: Any) -> None:
    spin, loop, fault = compile_c(g.SPIN), compile_c(g.JSON_LOOP), compile_c(g.FAULT)

    async def body() -> None:
        async with g.session() as c:
            hostile = []
            for elf, config in ((spin, None), (loop, None), (fault, {"delay_ms": 30})):
                st = await c.load(elf, config=config)
                await c.start(st.object_id)
                hostile.append(st.object_id)
            await g.wait_state(c, hostile[2], "failed")
            before = await c.request("wakeful.stats", {})
            for _ in range(40):
                await c.stats()
                await asyncio.sleep(0.005)
            after = await c.request("wakeful.stats", {})
            server = after["server"]
            # scheduler terms: between a request's arrival and its queued reply at most one batch ran,
            # and in it each of the two runnable hostile guests got at most one slice
            assert server["max_batches_waited"] <= 1, server
            assert server["max_slices_waited"] <= 2, server
            assert after["scheduler"]["slices"] - before["scheduler"]["slices"] > 40  # they did run
            for oid in hostile[:2]:
                assert (await c.get(oid)).state == "running"
                assert (await c.stop(oid)).state == "stopped"

    g.run(body)


def test_shutdown_with_1000_live_objects_does_not_wait_for_them(compile_c: Any) -> None:
    sleeper = compile_c(g.SLEEPER)

    async def body() -> None:
        c = await g.spawn()
        await c.initialize()
        import base64

        elf = base64.b64encode(sleeper).decode()
        for start in range(0, 1000, 48):
            batch = range(start, min(start + 48, 1000))
            await asyncio.gather(*(c.request("sf.object.load", {"elf": elf}) for _ in batch))
            await asyncio.gather(*(c.start(f"o{i + 1}") for i in batch))
        assert (await c.stats())["objects"] == 1000
        assert await c.request("sf.shutdown", {}) == {"shutdown": True}
        # every sleeper's timer is an hour away: an exit at all shows shutdown waited for none of them
        assert await c.wait(120) == 0

    g.run(body)
