"""harness.md §21 "DB down" for intake: with the store unreachable (PostgreSQL behind a cut proxy) or read-only
(SQLite), admission and the event tools raise ``StoreUnavailable`` and write nothing; the running Loop keeps
running, ticks survive, and after recovery admission and delivery resume with no admitted event missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.harness_fixtures import PgProxy, sqlite_read_only
from support.ingress_harness import counter_loop, event_rows, seen
from support.loops_harness import started, until

from wakeful.harness.errors import StoreUnavailable


async def _refused_everywhere(h: Any, loop_id: str) -> None:
    with pytest.raises(StoreUnavailable):
        await h.intake.admit(loop_id=loop_id, topic="t", payload={"n": 2}, event_id="e2", source="api")
    with pytest.raises(StoreUnavailable):
        await h.send_event(loop_id, "t", {"n": 3}, "e3")
    with pytest.raises(StoreUnavailable):
        await h.webhook(loop_id, "rotate")
    with pytest.raises(StoreUnavailable):
        await h.events(loop_id, "discard")
    await h.node.pending.reconcile()  # the pending-event pass logs and carries on (the sweep retries)


async def _recovered(h: Any, loop_id: str) -> None:
    assert h.node.resident(loop_id) is not None  # the object kept running
    assert (await h.send_event(loop_id, "t", {"n": 4}, "e4"))["duplicate"] is False

    async def delivered() -> bool:
        return await seen(h, loop_id) == ["e1", "e4"] and (await event_rows(h, loop_id))[-1].status == "acked"

    await until(delivered)
    rows = await event_rows(h, loop_id)
    assert [(r.event_id, r.status) for r in rows] == [("e1", "pending"), ("e4", "acked")]  # nothing half-written
    assert not (await h.get_loop(loop_id))["webhook_enabled"]


async def test_postgresql_down_during_intake(
    harness_runner: Any, pg_schema: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    async with PgProxy() as proxy:
        h = await started(proxy.url(pg_schema), store_clock, tmp_path / "data")
        try:
            _, _, _, loop_id = await counter_loop(h, compile_c)
            await h.send_event(loop_id, "hold", {"n": 1}, "e1")  # stays pending

            async def first() -> bool:
                return await seen(h, loop_id) == ["e1"]

            await until(first)
            await h.settle()
            proxy.cut()
            await _refused_everywhere(h, loop_id)
            proxy.restore()
            await _recovered(h, loop_id)
        finally:
            proxy.restore()
            await h.stop()


async def test_sqlite_read_only_during_intake(
    harness_runner: Any, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    db = tmp_path / "wakeful.db"
    h = await started(f"sqlite:///{db}", store_clock, tmp_path / "data")
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c)
        await h.send_event(loop_id, "hold", {"n": 1}, "e1")  # stays pending

        async def first() -> bool:
            return await seen(h, loop_id) == ["e1"]

        await until(first)
        await h.settle()
        with sqlite_read_only(db):
            await _refused_everywhere(h, loop_id)
        await _recovered(h, loop_id)
    finally:
        await h.stop()
