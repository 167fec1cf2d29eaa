"""``Store.write`` (issue 16, event → wake latency): on SQLite the self-scoped writes of a guest — loop.state.put,
agent.notify — are units of the group commit, so they share a commit with the admissions and acks queued beside
them instead of queueing for the writer turn and committing alone; on PostgreSQL each is a transaction of its own
(parallel on the pool). In store terms: units queued and commits counted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.commit_gate import Gate
from support.store_rows import loop_row

from wakeful.harness import selfcalls
from wakeful.harness.budget import LimitWatch
from wakeful.harness.config import Limits
from wakeful.harness.store import Store, Tx, groups, loops, sessions


async def _loop(store: Store) -> loops.Loop:
    return await loop_row(store, capabilities=[{"name": "agent.notify"}])


async def _until(check: Any) -> bool:
    for _ in range(2000):  # polling for a scheduler state (a guard against a hang, not a timing assertion)
        if check():
            return True
        await asyncio.sleep(0.005)
    return False


async def test_a_state_put_and_a_wake_share_one_commit_with_what_is_queued_on_sqlite(store: Store) -> None:
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL: each a transaction of its own")
    loop = await _loop(store)
    gate = Gate()
    store.before_commit.append(gate)

    async def held(tx: Tx) -> str:
        return (await groups.create_group(tx, name="held")).name

    first = asyncio.create_task(store.grouped(held))
    await gate.entered.wait()  # a batch holds the writer at its COMMIT
    put = asyncio.create_task(
        selfcalls.put_state(store, loop.id, loop.incarnation, {"state": {"above": True}})
    )
    wake = asyncio.create_task(
        selfcalls.notify(
            store,
            LimitWatch(),
            Limits(),
            0,
            loop.id,
            loop.incarnation,
            {"content": "cpu 95", "dedup_key": "k1"},
        )
    )
    assert await _until(lambda: store.grouping.queued == 2)  # both wait as units, not for the writer turn
    commits = store.commits
    gate.release.set()
    assert await first == "held"
    assert (await put)["status"] == "stored"
    assert (await wake).result == {"status": "queued", "message_id": sessions.wake_message_id(loop.id, "k1")}
    assert store.commits - commits == 2  # the held batch, then one commit for the state and the wake
    async with store.tx(readonly=True) as tx:
        row = await loops.get_loop(tx, loop.id)
        assert row.checkpoint == {"above": True}
        assert await sessions.message_exists(tx, sessions.wake_message_id(loop.id, "k1"))


async def test_a_wake_updates_the_loop_row_once(store: Store) -> None:
    """issue 16: the wake window and the last-notified columns are one UPDATE of the Loop row (was two), on both
    stores; a duplicate writes nothing."""
    from sqlalchemy import event

    loop = await _loop(store)
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        statements.append(" ".join(statement.split()[:2]).upper())

    event.listen(store.engine.sync_engine, "before_cursor_execute", seen)
    try:
        args = {"content": "cpu 95", "dedup_key": "k1"}
        outcome = await selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation, args)
        assert outcome.result is not None and outcome.result["status"] == "queued"
        assert statements.count("UPDATE LOOP") == 1 and statements.count("INSERT INTO") == 1
        statements.clear()
        again = await selfcalls.notify(store, LimitWatch(), Limits(), 0, loop.id, loop.incarnation, args)
        assert again.result is not None and again.result["status"] == "duplicate"
        assert not [s for s in statements if s.startswith(("UPDATE", "INSERT"))]
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", seen)
    async with store.tx(readonly=True) as tx:
        row = await loops.get_loop(tx, loop.id)
    assert row.notify_window_count == 1 and row.notified_since_activation and row.last_notified_ms is not None
