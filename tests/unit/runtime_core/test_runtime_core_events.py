"""Event delivery through the runtime (runtime-protocol.md §6.9, §8): FIFO, limits, dedup, queued before
start, rejected after exit, and the order of the checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import rtcore_guests as g

from wakeful.errors import Busy, InvalidParams, MailboxFull, ObjectNotFound
from wakeful.runtime import HostCall, ManualClock, Runtime

SINK = [{"name": "sink"}]


@pytest.fixture(scope="module")
def sink_elf(compile_c: Any) -> bytes:
    return bytes(compile_c(g.EVENT_SINK))


def sink_runtime(clock: ManualClock) -> tuple[Runtime, list[Any]]:
    got: list[Any] = []

    def handler(call: HostCall) -> Any:
        got.append(call.arguments)
        return {}

    return g.make_runtime(clock, handler), got


def test_fifo_queued_before_start_and_woken_waiter(sink_elf: bytes) -> None:
    clock = ManualClock()
    rt, got = sink_runtime(clock)
    oid = rt.load_nowait(sink_elf, capabilities=SINK, config={"count": 6}).object_id
    for i in range(3):
        assert rt.deliver_nowait(oid, f"e{i}", "t", {"i": i}) == (True, False)
    assert rt.get_nowait(oid).mailbox_entries == 3
    rt.start_nowait(oid)
    rt.run_batch()
    assert rt.get_nowait(oid).wait == "event" and rt.get_nowait(oid).mailbox_entries == 0
    for i in range(3, 6):
        rt.deliver_nowait(oid, f"e{i}", "topic/x", {"i": i})
        rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": 6}
    assert [e["payload"]["i"] for e in got] == list(range(6))
    assert got[3] == {"event_id": "e3", "topic": "topic/x", "payload": {"i": 3}}
    with pytest.raises(Busy):  # rejected after exit
        rt.deliver_nowait(oid, "late", "t", 1)


def test_event_wait_times_out(sink_elf: bytes) -> None:
    clock = ManualClock()
    rt, _ = sink_runtime(clock)
    oid = g.load_started(rt, sink_elf, capabilities=SINK, config={"timeout_ms": 100})
    rt.run_batch()
    clock.advance(ms=99)
    rt.run_batch()
    assert rt.get_nowait(oid).wait == "event"
    clock.advance(ms=1)
    rt.run_batch()
    assert rt.get_nowait(oid).outcome == {"exit_code": -3}


def test_bounds_and_dedup(sink_elf: bytes) -> None:
    clock = ManualClock()
    rt, _ = sink_runtime(clock)
    oid = rt.load_nowait(sink_elf, capabilities=SINK).object_id
    for i in range(32):
        rt.deliver_nowait(oid, f"e{i}", "t", i)
    with pytest.raises(MailboxFull):
        rt.deliver_nowait(oid, "e32", "t", 0)
    # a duplicate beats the envelope size check and fullness
    assert rt.deliver_nowait(oid, "e5", "t", "x" * 16_382) == (True, True)
    # the byte bound: fresh object, big envelopes
    other = rt.load_nowait(sink_elf, capabilities=SINK).object_id
    big = "x" * 16_000
    rt.deliver_nowait(other, "a", "t", big)
    rt.deliver_nowait(other, "b", "t", big)
    with pytest.raises(MailboxFull):
        rt.deliver_nowait(other, "c", "t", big)


def test_dedup_after_consumption(sink_elf: bytes) -> None:
    clock = ManualClock()
    rt, got = sink_runtime(clock)
    oid = g.load_started(rt, sink_elf, capabilities=SINK, config={"count": 2})
    rt.run_batch()
    rt.deliver_nowait(oid, "once", "t", 1)
    rt.run_batch()
    assert len(got) == 1 and rt.get_nowait(oid).mailbox_entries == 0
    assert rt.deliver_nowait(oid, "once", "t", 1) == (True, True)
    rt.run_batch()
    assert len(got) == 1


def test_check_order(sink_elf: bytes) -> None:
    clock = ManualClock()
    rt, _ = sink_runtime(clock)
    oid = rt.load_nowait(sink_elf, capabilities=SINK).object_id
    # topic/payload limits come before the object lookup
    with pytest.raises(InvalidParams, match="event exceeds limits"):
        rt.deliver_nowait("o999", "e", "t" * 129, 1)
    with pytest.raises(InvalidParams, match="event exceeds limits"):
        rt.deliver_nowait("o999", "e", "t", [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])
    with pytest.raises(ObjectNotFound):
        rt.deliver_nowait("o999", "e" * 200, "t", 1)
    with pytest.raises(InvalidParams, match="event_id"):
        rt.deliver_nowait(oid, "e" * 129, "t", 1)
    assert rt.deliver_nowait(oid, "e" * 128, "t" * 128, 1) == (True, False)
    # the envelope as a whole: a payload within limits whose envelope is over 16,384 bytes
    payload = "y" * (16_384 - 2)
    with pytest.raises(InvalidParams, match="envelope"):
        rt.deliver_nowait(oid, "big", "t", payload)
    assert rt.deliver_nowait(oid, "big", "t", "y" * 16_300) == (True, False)  # refused id not remembered
    rt.stop_nowait(oid)
    with pytest.raises(Busy, match="no longer accepts"):
        rt.deliver_nowait(oid, "after", "t", 1)


def test_asyncio_drives_batches_without_a_task_per_request(sink_elf: bytes) -> None:
    """vm.md §7: deliveries and plain host-call returns mark guests runnable and schedule one batch; no
    asyncio Task or Future is created per guest request."""

    async def main() -> None:
        got: list[Any] = []
        async with Runtime(host_handler=lambda call: got.append(call.object_id) or {}) as rt:
            await drive(rt, got)

    async def drive(rt: Runtime, got: list[Any]) -> None:
        ids = [g.load_started(rt, sink_elf, capabilities=SINK, config={"count": 1}) for _ in range(200)]
        await asyncio.sleep(0.01)
        assert all(rt.get_nowait(i).wait == "event" for i in ids)
        for i in ids:
            rt.deliver_nowait(i, "e", "t", {"to": i})
        for _ in range(200):
            assert asyncio.all_tasks() == {asyncio.current_task()}
            if all(rt.get_nowait(i).state == "exited" for i in ids):
                break
            await asyncio.sleep(0.001)
        assert sorted(got) == sorted(ids)

    asyncio.run(main())


def test_long_event_timeouts_answered_by_deliveries_do_not_grow_the_timer_heap(sink_elf: bytes) -> None:
    clock = ManualClock()
    rt, got = sink_runtime(clock)
    oid = g.load_started(rt, sink_elf, capabilities=SINK, config={"count": 2500, "timeout_ms": 86_400_000})
    rt.run_batch()
    for i in range(2500):
        rt.deliver_nowait(oid, f"e{i}", "t", i)
        rt.run_batch()
        assert rt.scheduler.heap_entries <= 2 * 1024 + 2
    assert rt.get_nowait(oid).outcome == {"exit_code": 2500} and len(got) == 2500
    assert rt.scheduler.timers == 0
