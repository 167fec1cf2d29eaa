"""Signals are hints, and hostile ones are normal input (harness.md §10.2, §19.3): any database user can NOTIFY
the store's ``wakeful_events`` / ``wakeful_loops`` channels (``signals.channel_of``); junk, floods and ids of Loops that are not ours change nothing, and a real
signal still delivers at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
from support.harness_fixtures import PG_URL, TestClock, pg_url_with_schema
from support.loops_harness import driver_loop, guest_lines, loop_row, until
from support.loops_harness import send as admit_row

from wakeful.harness.config import Config
from wakeful.harness.embed import Harness
from wakeful.harness.placement import signals


async def test_junk_and_floods_of_signals_change_nothing(
    harness_runner: Any, pg_schema: str, store_clock: TestClock, tmp_path: Path, compile_c: Any,
) -> None:
    h = Harness(Config(data_dir=tmp_path, store_url=pg_url_with_schema(pg_schema)), clock=store_clock, sweeps=False)
    await h.start()
    conn = await asyncpg.connect(PG_URL)
    try:
        _, _, loop_id = await driver_loop(h, compile_c)
        placement = h.node.placement
        assert placement is not None
        await until(lambda: _listening(placement))
        row = await loop_row(h, loop_id)
        events, loops = signals.channel_of(h.store, signals.EVENTS), signals.channel_of(h.store, signals.LOOPS)
        for payload in ["x" * 7000, "", " ", "*", "lp_notaloop other", f"{loop_id} {'n' * 50}", "\u0000junk",
                        f"{loop_id}{'z' * 40} other"]:
            for channel in (events, loops, "wakeful_events", "wakeful_loops", "wakeful_other"):
                await conn.execute("SELECT pg_notify($1, $2)", channel, payload.replace("\u0000", ""))
        for _ in range(200):  # a flood of "sweep now"
            await conn.execute("SELECT pg_notify($1, '* someone')", loops)
        await h.settle()
        assert h.node.resident(loop_id) is not None and (await loop_row(h, loop_id)).incarnation == row.incarnation

        # a real signal from another node is acted on at once: an event admitted "elsewhere" is delivered
        await admit_row_without_replay(h, loop_id)
        await conn.execute("SELECT pg_notify($1, $2)", events, f"{loop_id} node_elsewhere")

        async def delivered() -> bool:
            await h.node.flush_logs()
            return bool(await guest_lines(h, loop_id, "call loop.log"))

        await until(delivered)
    finally:
        await conn.close()
        await h.stop()


async def _listening(placement: Any) -> bool:
    return bool(placement.listener.connected.is_set())


async def admit_row_without_replay(h: Harness, loop_id: str) -> None:
    """Write a pending event the way another node's admission would (no in-process replay here)."""
    replay = h.node.replay

    async def no_replay(_: str) -> int:
        return 0

    h.node.replay = no_replay  # type: ignore[method-assign]
    try:
        await admit_row(h, loop_id, "far-1", "call", {"cap": "loop.log", "args": {"message": "hi"}})
    finally:
        h.node.replay = replay  # type: ignore[method-assign]
