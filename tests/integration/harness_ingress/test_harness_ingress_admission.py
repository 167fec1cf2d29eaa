"""Durable admission (harness.md §10.2) and delivery (§11) with a real compiled Loop, on SQLite and PostgreSQL:
duplicates keep the original payload, the mailbox bound, the group backlog, inactive Loops, ordering (also across
a restart), and ack once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.ingress_harness import counter_loop, event_rows, seen, statuses
from support.loops_harness import snapshot, started, until

from wakeful.harness.config import Limits
from wakeful.harness.errors import GroupBacklogFull, LoopMailboxFull, LoopNotActive, NotFound


async def test_admitted_event_is_delivered_acked_once_and_stays_a_duplicate(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, _, _, loop_id = await counter_loop(h, compile_c)
        admitted: list[str] = []
        h.node.add_instrument(SimpleNamespace(admitted=admitted.append))
        first = await h.intake.admit(loop_id=loop_id, topic="t", payload={"n": 1}, event_id="e1", source="api",
                                     group_id=group)
        assert first == {"status": "accepted", "event_id": "e1", "duplicate": False}

        async def acked() -> bool:
            return (await statuses(h, loop_id)).get("e1") == "acked"

        await until(acked)
        assert await seen(h, loop_id) == ["e1"]
        row = (await event_rows(h, loop_id))[0]
        assert row.source == "api" and row.acked_incarnation == 1 and row.first_delivered_ms is not None
        assert row.deadline_ms == row.first_delivered_ms + 900_000

        again = await h.intake.admit(loop_id=loop_id, topic="t", payload={"n": 1}, event_id="e1", source="api")
        assert again == {"status": "accepted", "event_id": "e1", "duplicate": True}
        other = await h.intake.admit(loop_id=loop_id, topic="t", payload={"n": 2}, event_id="e1", source="api")
        assert other == {"status": "accepted", "event_id": "e1", "duplicate": True, "payload_mismatch": True}
        stored = (await h.events(loop_id, include_payloads=True))["events"]
        assert [e["payload"] for e in stored] == [{"n": 1}]  # the original payload is kept
        assert admitted == [loop_id]  # the post-commit hook saw the new event only
        await h.tick()
        assert await seen(h, loop_id) == ["e1"]  # never delivered again
    finally:
        await h.stop()


async def test_dedup_retention_makes_an_old_id_new_again(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "t", {"x": 1}, "e1")

        async def acked() -> bool:
            return (await statuses(h, loop_id)).get("e1") == "acked"

        await until(acked)
        await h.tick()  # the first prune runs at once (nothing is old enough yet)
        assert (await h.send_event(loop_id, "t", {"x": 1}, "e1"))["duplicate"] is True
        store_clock.advance(s=86_400 + 3_600)  # a day and the hourly prune tick later
        await h.tick()
        assert await statuses(h, loop_id) == {}
        assert (await h.send_event(loop_id, "t", {"x": 1}, "e1"))["duplicate"] is False
    finally:
        await h.stop()


async def test_the_33rd_pending_event_is_mailbox_full_and_nothing_is_written(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        for i in range(32):
            await h.send_event(loop_id, "hold", {"i": i}, f"e{i:02d}")

        async def all_seen() -> bool:
            return len(await seen(h, loop_id)) == 32

        async def all_stamped() -> bool:  # the delivery stamps (§11) are written after the deliver call returns
            return all(r.first_delivered_ms is not None for r in await event_rows(h, loop_id))

        await until(all_seen)  # the guest is idle again (it pops, checkpoints, never acks "hold")
        await until(all_stamped)
        before = await snapshot(h)
        with pytest.raises(LoopMailboxFull) as refused:
            await h.send_event(loop_id, "hold", {"i": 32}, "e32")
        assert refused.value.details["retry_after_s"] == 5
        assert await snapshot(h) == before
        # a duplicate of a pending id is still accepted while the mailbox is full
        assert (await h.send_event(loop_id, "hold", {"i": 0}, "e00"))["duplicate"] is True
        # discarding one makes room
        assert (await h.events(loop_id, "discard", event_ids=["e00"]))["discarded"] == ["e00"]
        assert (await h.send_event(loop_id, "hold", {"i": 32}, "e32"))["duplicate"] is False
    finally:
        await h.stop()


async def test_group_backlog_bound_counts_pending_bytes_of_active_loops(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data", limits=Limits(group_backlog_bytes=3000))
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        blob = "x" * 900
        for i in range(3):
            await h.send_event(loop_id, "hold", {"b": blob}, f"e{i}")
        with pytest.raises(GroupBacklogFull) as refused:
            await h.send_event(loop_id, "hold", {"b": blob}, "e3")
        assert refused.value.details["retry_after_s"] == 30
        assert len(await event_rows(h, loop_id)) == 3
    finally:
        await h.stop()


@pytest.mark.parametrize("how", ["pause", "fail"])
async def test_inactive_loop_is_loop_not_active_and_nothing_is_written(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any, how: str,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        if how == "pause":
            await h.pause_loop(loop_id)
            state, reason = "paused", "manual"
        else:
            async with h.store.tx() as tx:
                from wakeful.harness.store import loops

                await loops.update_loop(tx, loop_id, state="failed", pause_reason=None)
            state, reason = "failed", None
        before = await snapshot(h)
        with pytest.raises(LoopNotActive) as refused:
            await h.intake.admit(loop_id=loop_id, topic="t", payload=None, event_id=None, source="api")
        assert refused.value.details == {"state": state, "pause_reason": reason}
        assert await snapshot(h) == before
    finally:
        await h.stop()


async def test_unknown_loop_wrong_group_or_other_agent_is_not_found(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, agent, _, loop_id = await counter_loop(h, compile_c)
        other_group, other_agent, _, _ = await counter_loop(h, compile_c, name="b2")
        for kwargs in ({"loop_id": "lp_nope"}, {"loop_id": loop_id, "group_id": other_group}):
            with pytest.raises(NotFound):
                await h.intake.admit(topic="t", payload={}, event_id="e", source="api", **kwargs)
        with pytest.raises(NotFound):
            await h.send_event(loop_id, "t", {}, "e", agent_id=other_agent, source="send")
        with pytest.raises(NotFound):
            await h.intake.loop_in_scope(other_group, loop_id, None)
        with pytest.raises(NotFound):
            await h.intake.loop_in_scope(group, loop_id, other_agent)
        await h.intake.loop_in_scope(group, loop_id, agent)
        await h.intake.loop_in_scope(group, loop_id, None)
        assert await event_rows(h) == []
        ok = await h.send_event(loop_id, "t", {}, "e", agent_id=agent, source="send")
        assert ok["duplicate"] is False and (await event_rows(h))[0].source == "send"
    finally:
        await h.stop()


async def test_delivery_order_is_admission_order_also_across_a_restart(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    ids = ["z9", "a1", "m5", "b2", "y0"]  # reverse-sorted ids admitted within one millisecond
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.node.end_incarnation(loop_id)  # not resident: the events wait in the store
        for event_id in ids[:3]:
            await h.send_event(loop_id, "hold", {}, event_id)
    finally:
        await h.stop()
    h2 = await started(store_url, store_clock, tmp_path / "data")
    try:
        for event_id in ids[3:]:
            await h2.send_event(loop_id, "hold", {}, event_id)

        async def all_seen() -> bool:
            return len(await seen(h2, loop_id)) == len(ids)

        await until(all_seen)
        assert await seen(h2, loop_id) == ids
        rows = await event_rows(h2, loop_id)
        assert [r.event_id for r in rows] == ids
    finally:
        await h2.stop()


async def test_restart_after_notify_before_ack_gives_one_wake_and_one_ack(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    from wakeful.harness import selfcalls

    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, session, loop_id = await counter_loop(h, compile_c)
        await h.node.end_incarnation(loop_id)  # the object stops between its notify and its ack (a crash)
        await h.send_event(loop_id, "wake", {}, "w1")
        # what incarnation 1 had done before the crash: the notify with the key derived from the event
        out = await selfcalls.notify(h.store, h.node.watch, h.config.limits, 0, loop_id, 1,
                                     {"content": "ev:w1", "dedup_key": "ev:w1"})
        assert out.result is not None and out.result["status"] == "queued"
    finally:
        await h.stop()
    h2 = await started(store_url, store_clock, tmp_path / "data")
    try:
        async def acked() -> bool:
            return (await statuses(h2, loop_id)).get("w1") == "acked"

        await until(acked)
        assert await seen(h2, loop_id) == ["w1"]  # delivered once, to the new incarnation
        row = (await event_rows(h2, loop_id))[0]
        assert row.acked_incarnation == 2
        wakes = await h2.messages(session, kinds=["loop"])
        assert [m.id for m in wakes] == [f"loop:{loop_id}:ev:w1"]
    finally:
        await h2.stop()


async def test_concurrent_admissions_never_overshoot_the_mailbox_and_keep_admission_order(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    import asyncio

    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.node.end_incarnation(loop_id)  # nothing resident: the store alone decides

        async def one(i: int) -> str:
            try:
                await h.send_event(loop_id, "hold", {"i": i}, f"e{i:02d}")
            except LoopMailboxFull:
                return "full"
            return "ok"

        outcomes = await asyncio.gather(*(one(i) for i in range(50)))
        assert outcomes.count("ok") == 32 and outcomes.count("full") == 18
        rows = await event_rows(h, loop_id)
        assert len(rows) == 32 and len({r.received_ms for r in rows}) == 32  # strictly ordered, same clock ms
        await h.tick()  # adopt again: the new object gets them in admission order

        async def all_seen() -> bool:
            return len(await seen(h, loop_id)) == 32

        await until(all_seen)
        assert await seen(h, loop_id) == [r.event_id for r in rows]
    finally:
        await h.stop()
