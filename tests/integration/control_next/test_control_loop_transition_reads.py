"""The bridge's handler of a Loop transition (control-plane.md §9) in store terms (issue 16: every create is a
transition): with no monitor item to record, the Loop, its items and the items waiting for it are one read
transaction, not two; with one to record, the record is still committed and the waiting items read after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from support.loops_harness import driver_loop

from wakeful.control.embed import Harness
from wakeful.control.loops import LoopBridge
from wakeful.harness.config import Config


@asynccontextmanager
async def _settled_bridge(store_url: str, store_clock: Any, tmp_path: Path,
                          compile_c: Any) -> AsyncIterator[tuple[Harness, LoopBridge, str]]:
    """A started harness with one driver Loop whose transitions the bridge has settled: (harness, bridge, Loop)."""
    h = Harness(Config(data_dir=tmp_path, store_url=store_url), clock=store_clock, sweeps=False)
    await h.start()
    try:
        bridge = h.loop_bridge
        assert isinstance(bridge, LoopBridge)
        _, _, loop_id = await driver_loop(h, compile_c)
        await bridge.settle()
        yield h, bridge, loop_id
    finally:
        await h.stop()


async def test_a_transition_with_nothing_to_record_is_one_read(
    store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    async with _settled_bridge(store_url, store_clock, tmp_path, compile_c) as (h, bridge, loop_id):
        begins: list[object] = []

        def begun(conn: Any) -> None:
            begins.append(conn)

        event.listen(h.store.engine.sync_engine, "begin", begun)
        try:
            assert await bridge.on_transition(loop_id) == 0
        finally:
            event.remove(h.store.engine.sync_engine, "begin", begun)
        assert len(begins) == 1


async def test_transitions_reported_together_are_handled_by_one_read(
    store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """Issue 16: the transitions reported while the handler is busy (a burst of creates) are read together."""
    h = Harness(Config(data_dir=tmp_path, store_url=store_url), clock=store_clock, sweeps=False)
    await h.start()
    try:
        bridge = h.loop_bridge
        assert isinstance(bridge, LoopBridge)
        agent, session, first = await driver_loop(h, compile_c)
        art = (await h.get_loop(first))["artifact_sha256"]
        made = [first, *[str((await h.create_loop(agent_id=agent, session_id=session, artifact=f"sha256:{art}",
                                                  name=f"t{i}"))["id"]) for i in range(3)]]
        await bridge.settle()
        begins: list[object] = []

        def begun(conn: Any) -> None:
            begins.append(conn)

        event.listen(h.store.engine.sync_engine, "begin", begun)
        try:
            for loop_id in [*made, made[0]]:  # one of them twice: read once, after both reports
                bridge.transition(loop_id)
            await bridge.settle()
        finally:
            event.remove(h.store.engine.sync_engine, "begin", begun)
        assert len(begins) == 1
    finally:
        await h.stop()


async def test_a_transitions_read_takes_the_loops_state_not_its_whole_row(
    store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """Issue 16: every create is a transition the bridge reads; its read of the Loop names the state columns the
    handler uses (state, reason, incarnation, group, updated_ms) — not the config, capabilities or checkpoint,
    whose decoding was ~7 % of a node's CPU in a PostgreSQL create burst — and the handler still sees the state."""
    async with _settled_bridge(store_url, store_clock, tmp_path, compile_c) as (h, bridge, loop_id):
        ran: list[str] = []

        def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
            ran.append(" ".join(statement.split()))

        event.listen(h.store.engine.sync_engine, "before_cursor_execute", seen)
        try:
            assert await bridge.on_transition(loop_id) == 0
        finally:
            event.remove(h.store.engine.sync_engine, "before_cursor_execute", seen)
        reads = [s for s in ran if " FROM loop " in f"{s} " and s.upper().startswith("SELECT")]
        assert len(reads) == 1, ran
        assert "loop.state" in reads[0] and "loop.incarnation" in reads[0]
        for column in ("loop.checkpoint", "loop.config", "loop.capabilities", "loop.webhook_secret_sha256"):
            assert column not in reads[0], reads[0]
