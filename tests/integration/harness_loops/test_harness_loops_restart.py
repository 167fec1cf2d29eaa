"""Restart and fencing (harness.md §4.3, §5, §6): active Loops come back from their checkpoints at a new
incarnation; a stale incarnation's host call, ack, checkpoint or notify is refused and changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.loops_harness import (
    call,
    configs_seen,
    driver,
    driver_loop,
    loop_row,
    send,
    snapshot,
    started,
    tenant,
    until,
)

from wakeful.errors import HostCallError
from wakeful.harness.store import sessions
from wakeful.runtime import HostCall


async def test_restart_reloads_active_loops_from_their_checkpoints(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        created = await h.create_loop(agent_id=agent, session_id=session, artifact=art, config={"k": 7})
        loop_id = created["id"]
        assert created["state"] == "active" and created["incarnation"] == 1 and created["runtime"] == "resident"
        line = await call(h, loop_id, "e1", "loop.state.put", {"state": {"beats": 3}})
        assert line == "call loop.state.put -> 1"
        paused = await h.create_loop(agent_id=agent, session_id=session, artifact=art, name="held")
        await h.pause_loop(paused["id"])
    finally:
        await h.stop()

    h2 = await started(store_url, store_clock, tmp_path / "data")
    try:
        row = await loop_row(h2, loop_id)
        assert row.state == "active" and row.incarnation == 2 and row.object_id is not None
        assert (await h2.get_loop(loop_id))["runtime"] == "resident"

        async def two_starts() -> bool:
            return len(await configs_seen(h2, loop_id)) >= 2

        await until(two_starts)
        first, second = await configs_seen(h2, loop_id)
        assert first == {"k": 7, "loop_id": loop_id, "incarnation": 1, "state": None}
        assert second == {"k": 7, "loop_id": loop_id, "incarnation": 2, "state": {"beats": 3}}
        held = await loop_row(h2, paused["id"])
        assert held.state == "paused" and held.pause_reason == "manual" and held.incarnation == 1
        assert h2.node.resident(paused["id"]) is None
    finally:
        await h2.stop()


@pytest.mark.parametrize(
    ("cap", "args"),
    [
        ("loop.state.put", {"state": {"x": 1}}),
        ("loop.ack", {"event_id": "e1"}),
        ("agent.notify", {"content": "stale", "dedup_key": "k1"}),
        ("loop.log", {"message": "stale"}),
        ("loop.state.get", {}),
    ],
)
async def test_a_retired_incarnation_is_refused_and_changes_nothing(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any, cap: str, args: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        agent, session, loop_id = await driver_loop(h, compile_c)
        await send(h, loop_id, "e1", "noop", {})
        await h.node.load(loop_id)  # a reload: incarnation 2 is current, 1 is retired
        assert (await loop_row(h, loop_id)).incarnation == 2
        before = await snapshot(h)
        hc = HostCall(id="sf:t:1", object_id="o-retired", label=loop_id, capability=cap, arguments=args,
                      timeout_ms=5000, deadline_unix_ms=store_clock.unix_ms() + 5000)
        with pytest.raises(HostCallError) as info:
            await h.node.dispatch.run(loop_id, 1, hc)
        assert info.value.kind == "stale_incarnation"
        with pytest.raises(HostCallError) as by_object:
            h.node.dispatch.handle(hc)  # the retired object id maps to no Loop at all
        assert by_object.value.kind == "stale_incarnation"
        assert await snapshot(h) == before
        async with h.store.tx(readonly=True) as tx:
            assert await sessions.count_messages(tx, loop_id=loop_id) == 0
    finally:
        await h.stop()


async def test_a_full_runtime_leaves_the_loop_active_and_waiting_for_capacity(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """§4.3 step 3: runtime at capacity → the Loop stays active, runtime view waiting_capacity, next tick."""
    h = await started(store_url, store_clock, tmp_path / "data", max_objects=1)
    try:
        _, agent, session = await tenant(h)
        art = await driver(h, agent, compile_c)
        first = await h.create_loop(agent_id=agent, session_id=session, artifact=art)
        second = await h.create_loop(agent_id=agent, session_id=session, artifact=art)
        assert first["runtime"] == "resident"
        assert (second["state"], second["runtime"]) == ("active", "waiting_capacity")
        await h.tick()
        assert (await h.get_loop(second["id"]))["runtime"] == "waiting_capacity"
        await h.pause_loop(first["id"])
        await h.tick()
        view = await h.get_loop(second["id"])
        assert view["runtime"] == "resident" and h.node.resident(second["id"]) is not None
    finally:
        await h.stop()
