"""Pending events (harness.md §9.6, §11, §12; §4.2 rows 7, 13, 14) with a real Loop on SQLite and PostgreSQL:
the ack deadline on both clocks, resume's fresh 15 minutes, retry at a new incarnation, discard, ack fencing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.ingress_harness import counter_loop, event_rows, seen, statuses
from support.loops_harness import loop_row, snapshot, started, until

from wakeful.harness import selfcalls
from wakeful.harness.errors import HostCallRefused, InvalidRequest, NotFound
from wakeful.harness.store import loops

MIN = 60


async def _wait_seen(h: Any, loop_id: str, count: int) -> None:
    async def enough() -> bool:
        return len(await seen(h, loop_id)) >= count

    await until(enough)
    await h.settle()  # the delivery stamps (first_delivered_ms, deadline_ms) are committed after the deliveries


async def _notices(h: Any, session: str) -> list[Any]:
    return await h.messages(session, kinds=["lifecycle"])


async def test_deadline_fails_the_loop_only_when_both_clocks_agree(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, session, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {}, "e1")
        await h.send_event(loop_id, "hold", {}, "e2")
        await _wait_seen(h, loop_id, 2)
        first = (await event_rows(h, loop_id))[0]
        assert first.deadline_ms == first.first_delivered_ms + 15 * MIN * 1000

        store_clock.jump_wall(s=2 * 3600)  # the wall clock jumps: the store says the deadline passed
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "active"
        store_clock.advance(s=15 * MIN - 1)  # 1 s short on the monotonic clock
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "active"
        store_clock.advance(s=1)
        await h.tick()
        row = await loop_row(h, loop_id)
        assert row.state == "failed" and row.object_id is None and "event-deadline: e1" in (row.failure or "")
        assert h.node.resident(loop_id) is None
        assert await statuses(h, loop_id) == {"e1": "pending", "e2": "pending"}  # kept
        told = await _notices(h, session)
        assert [m.id for m in told] == [f"loop:{loop_id}:lifecycle:event-deadline:1"]
        assert "e1" in told[0].content and "2 pending" in told[0].content and "discard" in told[0].content
        await h.tick()
        assert len(await _notices(h, session)) == 1  # told once
    finally:
        await h.stop()


async def test_a_store_clock_behind_keeps_the_loop_even_after_15_monotonic_minutes(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {}, "e1")
        await _wait_seen(h, loop_id, 1)
        store_clock.jump_wall(s=-3600)
        store_clock.advance(s=16 * MIN)
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "active"
        store_clock.advance(s=60 * MIN)  # now the store clock agrees too (16 min past delivery)
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "failed"
    finally:
        await h.stop()


async def test_resume_gives_fifteen_new_minutes_from_the_next_delivery(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, session, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {}, "e1")
        await _wait_seen(h, loop_id, 1)
        store_clock.advance(s=15 * MIN)
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "failed"
        store_clock.advance(s=10 * MIN)
        resumed = await h.resume_loop(loop_id)
        assert resumed["state"] == "active" and resumed["incarnation"] == 2
        await _wait_seen(h, loop_id, 2)
        assert await seen(h, loop_id) == ["e1", "e1"]  # the new incarnation receives it again
        row = (await event_rows(h, loop_id))[0]
        assert row.first_delivered_ms == store_clock.unix_ms() and row.deadline_ms == row.first_delivered_ms + 900_000
        store_clock.advance(s=15 * MIN - 1)
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "active"
        store_clock.advance(s=1)
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "failed"
        ids = [m.id for m in await _notices(h, session)]
        assert ids == [f"loop:{loop_id}:lifecycle:event-deadline:1", f"loop:{loop_id}:lifecycle:event-deadline:2"]
    finally:
        await h.stop()


async def test_a_restart_gives_the_new_object_its_own_fifteen_minutes(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {}, "e1")
        await _wait_seen(h, loop_id, 1)
        store_clock.advance(s=14 * MIN)
    finally:
        await h.stop()
    h2 = await started(store_url, store_clock, tmp_path / "data")
    try:
        await _wait_seen(h2, loop_id, 2)
        store_clock.advance(s=2 * MIN)  # the store deadline has passed; this object has had 2 minutes
        await h2.tick()
        assert (await loop_row(h2, loop_id)).state == "active"
        store_clock.advance(s=13 * MIN)
        await h2.tick()
        assert (await loop_row(h2, loop_id)).state == "failed"
    finally:
        await h2.stop()


async def test_retry_reloads_at_the_next_incarnation_with_fresh_deadlines(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, _, loop_id = await counter_loop(h, compile_c)
        _, other, _, _ = await counter_loop(h, compile_c, name="b2")
        await h.send_event(loop_id, "hold", {}, "e1")
        await h.send_event(loop_id, "t", {}, "e2")  # acked
        await h.send_event(loop_id, "hold", {}, "e3")
        await _wait_seen(h, loop_id, 3)
        store_clock.advance(s=10 * MIN)
        with pytest.raises(NotFound):
            await h.events(loop_id, "retry", agent_id=other)
        async def e2_acked() -> bool:
            return (await statuses(h, loop_id))["e2"] == "acked"

        await until(e2_acked)
        idle = await h.events(loop_id, "retry", event_ids=["e2", "nope"])  # nothing pending among them
        assert idle["retried"] == [] and idle["loop"]["incarnation"] == 1
        out = await h.events(loop_id, "retry", event_ids=["e1", "e2", "nope"], agent_id=agent)
        assert out["retried"] == ["e1"] and out["loop"]["incarnation"] == 2 and out["loop"]["state"] == "active"
        await _wait_seen(h, loop_id, 5)
        assert await seen(h, loop_id) == ["e1", "e2", "e3", "e1", "e3"]  # a fresh object gets every pending event
        rows = {r.event_id: r for r in await event_rows(h, loop_id)}
        now = store_clock.unix_ms()
        assert rows["e1"].first_delivered_ms == now  # fresh deadline
        assert rows["e3"].first_delivered_ms == now - 10 * MIN * 1000  # not named: keeps its deadline
        store_clock.advance(s=5 * MIN)
        await h.tick()  # e3's store deadline passed, but this object has had it for 5 minutes only
        assert (await loop_row(h, loop_id)).state == "active"
        store_clock.advance(s=10 * MIN)
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "failed"
        out = await h.events(loop_id, "retry")  # a failed Loop: deadlines cleared, no reload
        assert out["retried"] == ["e1", "e3"] and out["loop"]["state"] == "failed"
        assert out["loop"]["incarnation"] == 2
        assert all(r.deadline_ms is None for r in await event_rows(h, loop_id) if r.status == "pending")
    finally:
        await h.stop()


async def test_a_retry_written_elsewhere_reaches_the_running_node_at_its_next_tick(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    from wakeful.harness.pending import PendingEvents

    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {}, "e1")
        await _wait_seen(h, loop_id, 1)
        local = PendingEvents(h.node, adopt=False)  # like the CLI in local mode: writes only
        assert (await local.retry(loop_id))["retried"] == ["e1"]
        assert h.node.resident(loop_id).incarnation == 1
        await h.tick()
        assert h.node.resident(loop_id).incarnation == 2
        await _wait_seen(h, loop_id, 2)
    finally:
        await h.stop()


async def test_discard_in_any_state_keeps_ids_known(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        for event_id in ("e1", "e2", "e3"):
            await h.send_event(loop_id, "hold", {"id": event_id}, event_id)
        await _wait_seen(h, loop_id, 3)
        assert (await h.events(loop_id, "discard", event_ids=["e2", "e9"]))["discarded"] == ["e2"]
        await h.pause_loop(loop_id)
        async with h.store.tx() as tx:
            await loops.update_loop(tx, loop_id, state="failed", pause_reason=None)
        assert (await h.events(loop_id, "discard"))["discarded"] == ["e1", "e3"]
        assert await statuses(h, loop_id) == {"e1": "discarded", "e2": "discarded", "e3": "discarded"}
        assert all(r.discarded_ms is not None for r in await event_rows(h, loop_id))
        await h.resume_loop(loop_id)
        again = await h.send_event(loop_id, "hold", {"id": "e2"}, "e2")
        assert again["duplicate"] is True  # ids stay known for dedup
        listed = await h.events(loop_id, status="discarded")
        assert [e["event_id"] for e in listed["events"]] == ["e1", "e2", "e3"] and listed["pending_count"] == 0
    finally:
        await h.stop()


async def test_ack_removes_the_pending_event_once_and_a_stale_incarnation_is_refused(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {}, "e1")
        await h.send_event(loop_id, "hold", {}, "e2")
        await _wait_seen(h, loop_id, 2)
        await h.pause_loop(loop_id)
        await h.resume_loop(loop_id)  # incarnation 2
        await _wait_seen(h, loop_id, 4)
        before = await snapshot(h)
        with pytest.raises(HostCallRefused) as refused:
            await selfcalls.ack(h.store, loop_id, 1, {"event_id": "e1"})
        assert refused.value.code == "stale_incarnation"
        assert await snapshot(h) == before
        first = await selfcalls.ack(h.store, loop_id, 2, {"event_id": "e1"})
        assert first == {"status": "acked", "event_id": "e1", "duplicate": False}
        second = await selfcalls.ack(h.store, loop_id, 2, {"event_id": "e1"})
        assert second == {"status": "acked", "event_id": "e1", "duplicate": True}
        row = {r.event_id: r for r in await event_rows(h, loop_id)}["e1"]
        assert row.status == "acked" and row.acked_incarnation == 2
        assert (await h.get_loop(loop_id))["pending_count"] == 1
        await h.events(loop_id, "discard", event_ids=["e2"])
        for event_id in ("e2", "e-unknown"):
            with pytest.raises(HostCallRefused) as refused:
                await selfcalls.ack(h.store, loop_id, 2, {"event_id": event_id})
            assert refused.value.code == "unknown_event"
    finally:
        await h.stop()


async def test_reconcile_redelivers_nothing_the_current_object_has_seen_but_replays_the_rest(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {}, "e1")
        await _wait_seen(h, loop_id, 1)
        for _ in range(3):
            store_clock.advance(s=60)
            await h.tick()
        assert await seen(h, loop_id) == ["e1"]
        # an event admitted while the node could not deliver (written straight to the store) waits for the tick
        async with h.store.tx() as tx:
            from wakeful.harness import eventbody
            from wakeful.harness.store import schema

            ev = eventbody.normalise(topic="hold", payload={}, event_id="e2")
            await tx.execute(schema.loop_event.insert().values(
                loop_id=loop_id, event_id="e2", group_id=(await loops.get_loop(tx, loop_id)).group_id,
                topic="hold", payload=ev.payload_text, payload_sha256=ev.payload_sha256,
                envelope_bytes=ev.envelope_bytes, status="pending", source="api", received_ms=await tx.now_ms() + 1,
            ))
        await h.tick()
        await _wait_seen(h, loop_id, 2)
        assert await seen(h, loop_id) == ["e1", "e2"]
    finally:
        await h.stop()


async def test_events_list_pages_and_refuses_bad_arguments(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, _, loop_id = await counter_loop(h, compile_c)
        ids = [f"e{i}" for i in range(7)]
        for event_id in ids:
            await h.send_event(loop_id, "t", {"n": event_id}, event_id)
        page = await h.events(loop_id, limit=3, agent_id=agent)
        got = [e["event_id"] for e in page["events"]]
        while page["next_cursor"] is not None:
            page = await h.events(loop_id, limit=3, cursor=page["next_cursor"])
            got += [e["event_id"] for e in page["events"]]
        assert got == ids
        assert "payload" not in page["events"][0]
        assert (await h.events(loop_id, include_payloads=True))["events"][0]["payload"] == {"n": "e0"}
        bad: list[dict[str, Any]] = [
            {"action": "explode"}, {"status": "weird"}, {"limit": 0}, {"limit": 201}, {"cursor": "x"},
            {"action": "retry", "event_ids": "e1"}, {"action": "discard", "event_ids": [1]},
            {"action": "discard", "event_ids": ["x" * 129]},
        ]
        for kwargs in bad:
            with pytest.raises(InvalidRequest):
                await h.events(loop_id, **kwargs)
        for loop in ("lp_missing", 7, None):
            with pytest.raises((NotFound, InvalidRequest)):
                await h.events(loop)  # type: ignore[arg-type]
    finally:
        await h.stop()


async def test_an_id_readmitted_after_the_dedup_retention_reaches_the_guest_again(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "t", {"day": 1}, "daily")

        async def acked() -> bool:
            return (await statuses(h, loop_id)).get("daily") == "acked"

        await until(acked)
        await h.tick()
        store_clock.advance(s=86_400 + 3_600)
        await h.tick()  # prunes the settled row (and the node forgets the id it delivered)
        assert await statuses(h, loop_id) == {}
        assert (await h.send_event(loop_id, "t", {"day": 2}, "daily"))["duplicate"] is False
        # the runtime still holds the id among this object's last 128: the node reloads so a fresh object gets it
        await until(acked)
        assert await seen(h, loop_id) == ["daily", "daily"]
        assert (await loop_row(h, loop_id)).incarnation == 2
    finally:
        await h.stop()
