"""The outbox's bounds and writer order, in process (runtime-protocol.md §10)."""

from __future__ import annotations

import asyncio
import json

import pytest

from wakeful.runtime.outbox import CONTROL_FRAMES, OBJECT_BYTES, TOTAL_BYTES, DataFrame, Outbox


def _frame(tag: str, size: int = 0) -> bytes:
    return json.dumps({"t": tag, "p": "x" * size}).encode() + b"\n"


def _tags(chunk: bytes) -> list[str]:
    return [json.loads(line)["t"] for line in chunk.splitlines()]


def _drain(box: Outbox, limit: int = 1 << 30) -> list[str]:
    out: list[str] = []
    while box.has_frames():
        out += _tags(box.take(limit))
    return out


def test_control_burst_of_8_then_one_data_frame_and_round_robin() -> None:
    box = Outbox(lambda: None)
    for i in range(20):
        assert box.offer_control(_frame(f"c{i}"))
    for oid in ("a", "b"):
        for i in range(3):
            assert box.offer_data(DataFrame(oid, _frame(f"{oid}{i}")))
    order = _drain(box)
    assert order == ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "a0",
                     "c8", "c9", "c10", "c11", "c12", "c13", "c14", "c15", "b0",
                     "c16", "c17", "c18", "c19", "a1", "b1", "a2", "b2"]


def test_take_coalesces_up_to_the_limit_without_reordering() -> None:
    box = Outbox(lambda: None)
    for i in range(10):
        box.offer_control(_frame(f"c{i}", 10_000))
    first = box.take(65_536)
    assert len(first) <= 65_536 and _tags(first) == [f"c{i}" for i in range(6)]
    big = _frame("huge", 70_000)
    box2 = Outbox(lambda: None)
    box2.offer_control(big)
    assert box2.take(65_536) == big  # a single frame larger than the limit still goes out whole


def test_control_bound_drops_notifications_and_responses_wait() -> None:
    async def body() -> None:
        box = Outbox(lambda: None)
        for i in range(CONTROL_FRAMES):
            assert box.offer_control(_frame(f"c{i}"))
        assert not box.offer_control(_frame("note"))
        waiter = asyncio.create_task(box.put_control(_frame("resp")))
        await asyncio.sleep(0)
        assert not waiter.done() and box.control_frames == CONTROL_FRAMES
        assert not box.offer_control(_frame("note2"))  # a waiting response goes first
        box.take(len(_frame("c0")))
        await asyncio.sleep(0)
        assert waiter.done() and box.control_frames == CONTROL_FRAMES
        assert _drain(box)[-1] == "resp"

    asyncio.run(body())


def test_cancelled_waiter_hands_its_place_on() -> None:
    async def body() -> None:
        box = Outbox(lambda: None)
        for i in range(CONTROL_FRAMES):
            box.offer_control(_frame(f"c{i}"))
        first = asyncio.create_task(box.put_control(_frame("r1")))
        second = asyncio.create_task(box.put_control(_frame("r2")))
        await asyncio.sleep(0)
        box.take(len(_frame("c0")))  # wakes r1 ...
        first.cancel()  # ... which is cancelled before it runs
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert second.done()
        assert "r2" in _drain(box)

    asyncio.run(body())


def test_per_object_and_global_data_bounds() -> None:
    box = Outbox(lambda: None)
    frame = _frame("a", 1000)
    taken = 0
    while box.offer_data(DataFrame("a", frame)):
        taken += 1
    assert taken == OBJECT_BYTES // len(frame) and box.dropped == 1
    assert box.object_bytes("a") <= OBJECT_BYTES
    assert box.offer_data(DataFrame("b", frame))  # other objects are not affected
    big = Outbox(lambda: None)
    piece = _frame("x", 60_000)
    objects = 0
    while big.offer_data(DataFrame(f"o{objects}", piece)):
        objects += 1
    assert objects == TOTAL_BYTES // len(piece) and big.data_bytes <= TOTAL_BYTES


def test_waiting_host_frames_enter_when_space_frees_and_can_be_withdrawn() -> None:
    box = Outbox(lambda: None)
    filler = _frame("log", 30_000)
    assert box.offer_data(DataFrame("a", filler)) and box.offer_data(DataFrame("a", filler))
    call = DataFrame("a", _frame("call", 10_000))
    box.submit_waiting(call)
    assert call.state == "waiting" and not call.accepted
    later = DataFrame("a", _frame("call2", 10))
    box.submit_waiting(later)  # FIFO behind the first waiting frame even though it would fit
    assert later.state == "waiting"
    box.take(len(filler))
    assert call.accepted and call.state == "queued" and later.accepted
    box.remove(call)
    assert call.state == "removed" and _drain(box) == ["log", "call2"]


def test_purge_drops_an_objects_frames() -> None:
    box = Outbox(lambda: None)
    box.offer_data(DataFrame("a", _frame("a1")))
    box.offer_data(DataFrame("b", _frame("b1")))
    waiting = DataFrame("a", _frame("w"))
    box.submit_waiting(waiting)
    box.purge("a")
    assert box.object_bytes("a") == 0 and _drain(box) == ["b1"]


@pytest.mark.parametrize("closed_op", ["offer_control", "offer_data"])
def test_closed_outbox_accepts_nothing(closed_op: str) -> None:
    box = Outbox(lambda: None)
    box.close()
    if closed_op == "offer_control":
        assert not box.offer_control(_frame("x"))
    else:
        assert not box.offer_data(DataFrame("a", _frame("x")))
