"""Faults, exits and integrity (harness.md §4.2 rows 4–6 and 9, §4.4, §7, §8): a faulting Loop is reloaded
3 times in an hour and then failed with exactly one message; exits pause it; a tampered, altered-cache or
deleted artifact is detected at load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.loops_harness import driver, driver_loop, loop_row, send, started, tenant, until

from wakeful.harness.embed import Harness
from wakeful.harness.errors import ArtifactInvalid
from wakeful.harness.store import schema


async def _state_is(h: Harness, loop_id: str, state: str, incarnation: int | None = None) -> None:
    async def reached() -> bool:
        await h.settle()
        row = await loop_row(h, loop_id)
        return row.state == state and (incarnation is None or row.incarnation == incarnation)

    await until(reached)


async def test_a_faulting_loop_is_reloaded_three_times_then_failed_with_one_message(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)
        await send(h, loop_id, "boom", "fault", {"addr": 8})  # stays pending: every reload replays it
        for reload in range(1, 4):
            async def counted(n: int = reload) -> bool:
                await h.settle()
                return (await loop_row(h, loop_id)).reload_count == n

            await until(counted)
            assert loop_id in h.node._reload_due
            await h.tick()  # not yet: a reload waits at least 1 s
            assert (await loop_row(h, loop_id)).incarnation == reload
            store_clock.advance(s=1)
            await h.tick()
            assert (await loop_row(h, loop_id)).incarnation == reload + 1
        await _state_is(h, loop_id, "failed")
        row = await loop_row(h, loop_id)
        assert row.reload_count == 3 and row.incarnation == 4 and "MEMORY" in (row.failure or "").upper()
        notices = await h.messages(session)
        assert [m.id for m in notices] == [f"loop:{loop_id}:lifecycle:failed:4"]
        text = notices[0].content
        assert "3 times within an hour" in text and "1 pending event" in text
        assert "loop.resume" in text and "loop.delete" in text
        await h.tick()
        assert (await loop_row(h, loop_id)).state == "failed" and len(await h.messages(session)) == 1
    finally:
        await h.stop()


async def test_the_reload_window_restarts_after_an_hour(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)
        for i in range(5):  # five faults, each more than an hour after the window opened
            await send(h, loop_id, f"boom{i}", "fault", {"addr": 8})

            async def reloading() -> bool:
                await h.settle()
                return loop_id in h.node._reload_due

            await until(reloading)
            async with h.store.tx() as tx:  # ack it so the next object does not replay it
                E = schema.loop_event
                await tx.execute(sa.update(E).where(E.c.event_id == f"boom{i}").values(status="acked"))
            store_clock.advance(s=3601)
            await h.tick()
        row = await loop_row(h, loop_id)
        assert row.state == "active" and row.reload_count == 1 and row.incarnation == 6
        assert await h.messages(session) == []
    finally:
        await h.stop()


@pytest.mark.parametrize(("code", "wake_first", "told"), [(0, True, False), (0, False, True), (3, True, True)])
async def test_exit_pauses_and_tells_unless_it_ended_silently(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
    code: int, wake_first: bool, told: bool,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art, name="ex"))["id"]
        if wake_first:
            await send(h, loop_id, "w", "call", {"cap": "agent.notify", "args": {"text": "hi", "dedup_key": "w"}})
        await send(h, loop_id, "x", "exit", {"code": code})
        await _state_is(h, loop_id, "paused")
        row = await loop_row(h, loop_id)
        assert (row.pause_reason, row.exit_code) == ("exited", code)
        notices = await h.messages(session, kinds=["lifecycle"])
        if told:
            assert [m.id for m in notices] == [f"loop:{loop_id}:lifecycle:exited:1"]
            assert f"exit code {code}" in notices[0].content and "loop.resume" in notices[0].content
        else:
            assert notices == []
        async with h.store.tx() as tx:  # settle the events, or the resumed object would replay the exit
            E = schema.loop_event
            await tx.execute(sa.update(E).where(E.c.loop_id == loop_id).values(status="discarded"))
        resumed = await h.resume_loop(loop_id)
        assert resumed["state"] == "active" and resumed["incarnation"] == 2
        await h.settle()
        assert (await loop_row(h, loop_id)).state == "active"
    finally:
        await h.stop()


async def _tamper_setup(h: Harness, compile_c: Any) -> tuple[str, str, str]:
    _, agent, session = await tenant(h)
    art = await driver(h, agent, compile_c)
    loop_id = (await h.create_loop(agent_id=agent, session_id=session, artifact=art))["id"]
    return loop_id, session, art.removeprefix("sha256:")


@pytest.mark.parametrize("damage", ["altered", "deleted"])
async def test_a_tampered_or_deleted_artifact_pauses_with_fault_and_tells_once(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any, damage: str,
) -> None:
    data = tmp_path / "data"
    h = await started(store_url, store_clock, data)
    try:
        loop_id, session, sha = await _tamper_setup(h, compile_c)
        (data / "artifacts" / f"{sha}.elf").unlink()  # only the database copy is left
        A = schema.artifact
        async with h.store.tx() as tx:
            if damage == "altered":
                elf = (await tx.execute(sa.select(A.c.elf).where(A.c.sha256 == sha))).scalar_one()
                await tx.execute(sa.update(A).where(A.c.sha256 == sha).values(elf=elf[:-1] + b"\x01"))
            else:
                await tx.execute(sa.delete(A).where(A.c.sha256 == sha))
        await h.node.load(loop_id)  # the next load (a restart, a reload) re-reads and re-hashes
        await h.settle()
        row = await loop_row(h, loop_id)
        expected = "artifact_changed" if damage == "altered" else "artifact_missing"
        assert (row.state, row.pause_reason, row.failure) == ("paused", "fault", expected)
        assert h.node.resident(loop_id) is None
        notices = await h.messages(session)
        assert [m.id for m in notices] == [f"loop:{loop_id}:lifecycle:fault:{row.incarnation}"]
        if damage == "altered":
            assert f"expected sha256:{sha}" in notices[0].content
        with pytest.raises(ArtifactInvalid):
            await h.resume_loop(loop_id)
        await h.tick()
        after = await loop_row(h, loop_id)
        assert (after.state, after.pause_reason) == ("paused", "fault") and len(await h.messages(session)) == 1
    finally:
        await h.stop()


async def test_an_altered_cache_file_is_replaced_and_the_loop_runs(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    data = tmp_path / "data"
    h = await started(store_url, store_clock, data)
    try:
        loop_id, session, sha = await _tamper_setup(h, compile_c)
        cached = data / "artifacts" / f"{sha}.elf"
        good = cached.read_bytes()
        cached.write_bytes(good[:-1] + b"\x01")
        await h.node.load(loop_id)
        row = await loop_row(h, loop_id)
        assert row.state == "active" and row.incarnation == 2 and h.node.resident(loop_id) is not None
        assert cached.read_bytes() == good
        assert await h.messages(session) == []
    finally:
        await h.stop()
