"""The wake budget with an injected clock (harness.md §9.5, §4.2 row 8) and idempotent wakes (§2.3):
the 7th wake in 10 minutes is refused, an hour of limiting pauses the Loop with reason budget and tells
the agent once; a repeated dedup key reaches the session once across guest retries, restarts and
redelivery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from support.loops_harness import call, driver, driver_loop, loop_row, send, started, tenant, until

from wakeful.harness.embed import Harness
from wakeful.harness.store import schema

TEN_MIN_MS = 600_000


async def _notify(h: Harness, loop_id: str, event_id: str, key: str) -> str:
    return await call(h, loop_id, event_id, "agent.notify", {"content": f"wake {key}", "dedup_key": key})


async def _window(h: Harness, loop_id: str, n: int, tag: str) -> list[str]:
    return [await _notify(h, loop_id, f"{tag}-e{i}", f"{tag}-k{i}") for i in range(n)]


async def test_seventh_wake_is_refused_and_an_hour_of_limiting_pauses_the_loop(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)
        first = await _window(h, loop_id, 7, "w0")
        assert first == ["call agent.notify -> 1"] * 6 + ["call agent.notify -> -5"]  # SF_HOST_ERROR
        row = await loop_row(h, loop_id)
        assert row.notify_limited_since_ms is not None and row.state == "active"
        for window in range(1, 6):  # minutes 10..50: every window saturated again
            store_clock.advance(ms=TEN_MIN_MS)
            assert (await _window(h, loop_id, 7, f"w{window}"))[-1] == "call agent.notify -> -5"
            assert (await loop_row(h, loop_id)).state == "active"
        store_clock.advance(ms=TEN_MIN_MS)  # minute 60: an hour of limiting on both clocks
        assert await _window(h, loop_id, 6, "w6") == ["call agent.notify -> 1"] * 6
        # the 7th is answered budget_exhausted and the object is stopped before it can log the answer
        await send(h, loop_id, "w6-e6", "call", {"cap": "agent.notify",
                                                "args": {"content": "wake", "dedup_key": "w6-k6"}})

        async def paused() -> bool:  # the row commits paused first; the object is stopped after that commit
            await h.settle()
            return (await loop_row(h, loop_id)).state == "paused" and h.node.resident(loop_id) is None

        await until(paused)
        row = await loop_row(h, loop_id)
        assert (row.state, row.pause_reason) == ("paused", "budget")
        assert h.node.resident(loop_id) is None
        wakes = await h.messages(session, kinds=["loop"])
        notices = await h.messages(session, kinds=["lifecycle"])
        assert len(wakes) == 7 * 6
        assert [m.id for m in notices] == [f"loop:{loop_id}:lifecycle:budget:{row.incarnation}"]
        assert "rate-limited" in notices[0].content and "6 wakes per 10 minutes" in notices[0].content
        # resume resets the window and the limiting mark (events settled first: a replay would notify again)
        async with h.store.tx() as tx:
            E = schema.loop_event
            await tx.execute(sa.update(E).where(E.c.loop_id == loop_id).values(status="discarded"))
        resumed = await h.resume_loop(loop_id)
        assert resumed["state"] == "active"
        fresh = await loop_row(h, loop_id)
        assert fresh.notify_limited_since_ms is None and fresh.notify_window_count == 0
    finally:
        await h.stop()


async def test_a_wall_clock_jump_alone_does_not_pause(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)
        await _window(h, loop_id, 7, "a")
        for window in range(1, 7):  # the store clock moves through an hour of saturated windows...
            store_clock.jump_wall(ms=TEN_MIN_MS)
            assert (await _window(h, loop_id, 7, f"w{window}"))[-1] == "call agent.notify -> -5"
        row = await loop_row(h, loop_id)
        assert row.state == "active"  # ...but the node's monotonic clock has not seen an hour
    finally:
        await h.stop()


async def test_a_dedup_key_reaches_the_session_once(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)
        assert await _notify(h, loop_id, "e1", "same") == "call agent.notify -> 1"
        assert await _notify(h, loop_id, "e2", "same") == "call agent.notify -> 1"  # guest retry: duplicate
        row = await loop_row(h, loop_id)
        assert row.notify_window_count == 1  # duplicates are free
    finally:
        await h.stop()

    h = await started(store_url, store_clock, tmp_path / "data")  # restart: new incarnation
    try:
        # redelivery: e1 and e2 were never acked, so the new object processes them again
        async def replayed() -> bool:
            await h.node.flush_logs()
            from support.loops_harness import guest_lines

            return len(await guest_lines(h, loop_id, "call agent.notify")) >= 4

        await until(replayed)
        assert await _notify(h, loop_id, "e3", "same") == "call agent.notify -> 1"
        wakes = await h.messages(session, kinds=["loop"])
        assert [m.id for m in wakes] == [f"loop:{loop_id}:same"]
        assert wakes[0].incarnation == 1 and wakes[0].role == "user" and wakes[0].content == "wake same"
    finally:
        await h.stop()


async def test_wake_handlers_run_after_commit_and_mark_messages_handled(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    seen: list[str] = []
    try:
        _, agent, session = await tenant(h)
        h.on_wake(lambda m: seen.append(m.id), agent_id=agent)
        art = await driver(h, agent, compile_c)
        loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]
        await _notify(h, loop_id, "e1", "k")
        await send(h, loop_id, "e2", "exit", {"code": 0})  # exit 0 after a wake: silent
        await h.settle()

        async def exited() -> bool:
            await h.settle()
            return (await loop_row(h, loop_id)).state == "paused"

        await until(exited)
        assert seen == [f"loop:{loop_id}:k"]
        (wake,) = await h.messages(session)
        assert wake.handled_ms is not None
    finally:
        await h.stop()


async def test_sweeps_run_in_the_background_and_stop_with_the_harness(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    from support.loops_harness import guest_lines

    from wakeful.harness.config import Config

    h = Harness(Config(data_dir=tmp_path / "data", store_url=store_url), clock=store_clock, tick_s=0.05)
    await h.start()
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)

        async def flushed() -> bool:  # the 2 s log flusher, not the test, writes the start line
            return bool(await guest_lines(h, loop_id, "config "))

        await until(flushed, timeout=10)
        await h.node.end_incarnation(loop_id)  # lost object: the background tick re-adopts it

        async def readopted() -> bool:
            return h.node.resident(loop_id) is not None

        await until(readopted, timeout=10)
        assert (await loop_row(h, loop_id)).incarnation == 2
    finally:
        await h.stop()
    assert all(t.done() for t in h._sweeps) or h._sweeps == []


async def test_a_failing_wake_handler_is_retried_and_offered_again_after_restart(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
    monkeypatch: Any,
) -> None:
    from wakeful.harness import embed

    monkeypatch.setattr(embed, "BACKOFF_START_S", 0.01)
    attempts: list[str] = []

    def flaky(message: Any) -> None:
        attempts.append(message.id)
        if len(attempts) < 3:
            raise RuntimeError("agent host busy")

    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        h.on_wake(flaky)
        art = await driver(h, agent, compile_c)
        loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]
        await _notify(h, loop_id, "e1", "k")
        await h.settle()
        assert attempts == [f"loop:{loop_id}:k"] * 3
        (wake,) = await h.messages(session)
        assert wake.handled_ms is not None
        attempts.clear()
        h._handlers.clear()  # the next wake finds no handler on this node and stays unhandled
        await _notify(h, loop_id, "e2", "k2")
        await h.settle()
    finally:
        await h.stop()
    seen: list[str] = []
    h2 = Harness(h.config, clock=store_clock, sweeps=False)
    h2.on_wake(lambda m: seen.append(m.id), kinds=("loop",))
    await h2.start()
    try:
        await h2.settle()
        assert seen == [f"loop:{loop_id}:k2"]  # at-least-once: offered again after a restart
    finally:
        await h2.stop()
