"""The single writer path on SQLite (issue 16, benchmarks.md §2.2): write transactions of one store queue in the
process instead of racing for SQLite's write lock, so a writer that waits while another holds the lock longer
than the busy timeout does not fail with ``database is locked`` as long as the holder finishes within the wait.

Scheduler terms only: the holder is released once the second writer is seen queued (or has already failed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import sqlalchemy as sa

from wakeful.harness.store import Store, groups, schema


async def _second_writer_outcome(store: Store) -> str:
    gate, inside = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with store.tx() as tx:
            await groups.create_group(tx, name="first")
            inside.set()
            await gate.wait()

    async def second() -> str:
        try:
            async with store.tx() as tx:
                await groups.create_group(tx, name="second")
        except Exception as exc:  # the old path: BEGIN IMMEDIATE gave up after busy_timeout
            return type(exc).__name__
        return "committed"

    first = asyncio.create_task(holder())
    await inside.wait()
    other = asyncio.create_task(second())
    while not other.done() and store.writers_waiting == 0:
        await asyncio.sleep(0.01)  # polling, not timing: done when the second writer queued or gave up
    gate.set()
    await first
    return await other


async def test_a_second_writer_queues_behind_the_first_instead_of_failing(harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        assert await _second_writer_outcome(store) == "committed"
        async with store.tx(readonly=True) as tx:
            names = (await tx.execute(sa.select(schema.agent_group.c.name))).scalars().all()
        assert sorted(names) == ["first", "second"]
    finally:
        await store.close()


async def test_readers_do_not_wait_for_the_writer(harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 'r.db'}")
    gate, inside = asyncio.Event(), asyncio.Event()
    try:
        async def holder() -> None:
            async with store.tx() as tx:
                await groups.create_group(tx, name="held")
                inside.set()
                await gate.wait()

        first = asyncio.create_task(holder())
        await inside.wait()
        async with store.tx(readonly=True) as tx:  # WAL: a reader runs beside the writer
            assert (await tx.execute(sa.select(sa.func.count()).select_from(schema.agent_group))).scalar_one() == 0
        assert store.writers_waiting == 0
        gate.set()
        await first
    finally:
        await store.close()
