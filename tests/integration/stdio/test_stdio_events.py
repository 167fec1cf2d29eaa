"""Events over stdio: every check of sf.event.deliver in order, mailbox bounds, dedup window, FIFO,
queued before start, refused after the end (runtime-protocol.md §6.9, §8; §16 item 7)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import stdio_guests as g

from wakeful.errors import Busy, InvalidParams, MailboxFull, ObjectNotFound


@pytest.fixture(scope="module")
def sink(compile_c: Any) -> bytes:
    return bytes(compile_c(g.EVENT_SINK))


def test_checks_in_order_and_mailbox_bounds(sink: bytes, compile_c: Any) -> None:
    exit_elf = compile_c(g.EXIT_CODE)

    async def body() -> None:
        async with g.session() as c:
            oid = (await c.load(sink)).object_id
            # topic / payload limits come before the object check
            with pytest.raises(InvalidParams, match="event exceeds limits"):
                await c.deliver("o404", "e", "t" * 129, None)
            with pytest.raises(InvalidParams, match="event exceeds limits"):
                await c.deliver("o404", "e", "t", {"x": "a" * 16_400})
            with pytest.raises(ObjectNotFound):
                await c.deliver("o404", "e", "t", None)
            with pytest.raises(InvalidParams):
                await c.deliver(oid, "e" * 129, "t", None)
            assert await c.deliver(oid, "e" * 128, "t" * 128, None) == (True, False)
            # envelope over 16,384 bytes although the payload alone is within limits
            payload = "p" * (16_384 - 10)
            with pytest.raises(InvalidParams):
                await c.deliver(oid, "big", "t" * 100, payload)
            for i in range(31):
                assert await c.deliver(oid, f"e{i}", "t", i) == (True, False)
            with pytest.raises(MailboxFull) as full:
                await c.deliver(oid, "e31", "t", 31)
            assert full.value.rpc_code == -32002  # type: ignore[attr-defined]
            assert await c.deliver(oid, "e5", "t", 999) == (True, True)  # duplicate even when full
            assert (await c.get(oid)).mailbox_entries == 32
            # the byte bound: 32,768 bytes of envelopes
            other = (await c.load(sink)).object_id
            chunk = "b" * 10_000
            for i in range(3):
                await c.deliver(other, f"b{i}", "t", chunk)
            with pytest.raises(MailboxFull):
                await c.deliver(other, "b3", "t", chunk)
            assert await c.deliver(other, "small", "t", 1) == (True, False)
            # after the end: refused
            done = (await c.load(exit_elf)).object_id
            await c.start(done)
            await g.wait_state(c, done, "exited")
            with pytest.raises(Busy, match="no longer accepts events"):
                await c.deliver(done, "late", "t", None)
            await c.stop(oid)
            with pytest.raises(Busy):
                await c.deliver(oid, "e0", "t", None)  # stopped: refused before the dedup check

    g.run(body)


def test_fifo_queued_before_start_and_dedup_after_consumption(sink: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            seen: list[Any] = []

            @c.on_host_call
            def record(call: Any) -> Any:
                seen.append(call.arguments)
                return {}

            oid = (await c.load(sink, capabilities=[{"name": "sink"}], config={"count": 1000})).object_id
            for i in range(5):  # queued while loaded
                await c.deliver(oid, f"e{i}", "topic", {"n": i})
            await c.start(oid)

            async def consumed(n: int) -> bool:
                return len(seen) >= n

            await g.until(lambda: consumed(5))
            assert [s["event_id"] for s in seen] == [f"e{i}" for i in range(5)]
            assert seen[0] == {"event_id": "e0", "topic": "topic", "payload": {"n": 0}}
            assert await c.deliver(oid, "e0", "topic", None) == (True, True)  # consumed, still remembered
            for i in range(5, 135):
                got = await c.deliver(oid, f"e{i}", "t", i)
                assert got == (True, False)
                if i % 20 == 0:
                    await g.until(lambda n=i - 10: consumed(n))  # type: ignore[misc]
            await g.until(lambda: consumed(135))
            assert [s["event_id"] for s in seen] == [f"e{i}" for i in range(135)]  # FIFO
            # the window holds the last 128 accepted ids: e0..e6 were evicted by e7..e134
            assert await c.deliver(oid, "e7", "t", None) == (True, True)
            assert await c.deliver(oid, "e6", "t", None) == (True, False)
            assert (await c.get(oid)).state == "running"

    g.run(body)


def test_waiting_guest_is_woken_by_delivery(sink: bytes) -> None:
    async def body() -> None:
        async with g.session() as c:
            got: asyncio.Queue[Any] = asyncio.Queue()
            def forward(call: Any) -> Any:
                got.put_nowait(call.arguments)
                return {}

            c.on_host_call(forward)
            oid = (await c.load(sink, capabilities=[{"name": "sink"}], config={"count": 1})).object_id
            await c.start(oid)

            async def waiting() -> bool:
                return (await c.get(oid)).wait == "event"

            await g.until(waiting)
            await c.deliver(oid, "x", "t", [1, 2])
            assert (await asyncio.wait_for(got.get(), 5))["payload"] == [1, 2]
            assert (await g.wait_state(c, oid, "exited")).outcome == {"exit_code": 1}

    g.run(body)
