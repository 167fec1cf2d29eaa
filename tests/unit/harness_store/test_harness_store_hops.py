"""Round trips to the SQLite driver's thread (issue 16, event → wake latency): a write transaction is one of them
(its ``COMMIT``; ``BEGIN IMMEDIATE`` runs inline when the write lock is free, on the thread only when another
connection holds it) whatever its statements, and a statement adds none — aiosqlite made 3–4 per statement (cursor,
execute, fetch, close) and three for ``BEGIN``. Counted as the driver thread's hand-backs to the
event loop (``call_soon_threadsafe``), which every round trip makes once."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from wakeful.harness.errors import InvalidRequest, StoreUnavailable
from wakeful.harness.store import Store, Tx, groups, schema


async def _round_trips(action: Callable[[], Awaitable[Any]]) -> int:
    loop = asyncio.get_running_loop()
    count = [0]
    original = loop.call_soon_threadsafe

    def counting(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(*args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
    try:
        await action()
    finally:
        del loop.call_soon_threadsafe  # (the instance attribute: the class's method again)
    return count[0]


async def _open(tmp_path: Path) -> Store:
    store = await Store.open(f"sqlite:///{tmp_path / 'hops.db'}")
    async with store.tx(readonly=True) as tx:  # the pool's connection is opened (its own round trips) before counting
        await tx.execute(sa.select(1))
    return store


async def test_a_write_transaction_is_one_round_trip_whatever_its_statements(
        harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        async def write() -> None:
            async with store.tx() as tx:
                for n in range(5):
                    await groups.create_group(tx, name=f"g{n}")
                await tx.execute(sa.select(schema.agent_group.c.name))
                await tx.now_ms()

        # the COMMIT (was 2: BEGIN IMMEDIATE too; before that 3 + 3–4 per statement)
        assert await _round_trips(write) == 1
        async with store.tx(readonly=True) as tx:
            assert len((await tx.execute(sa.select(schema.agent_group.c.name))).all()) == 5  # committed
    finally:
        await store.close()


async def test_group_commit_units_add_no_round_trips(harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        async def unit(tx: Tx) -> None:
            await groups.create_group(tx, name="alone")

        assert await _round_trips(lambda: store.grouped(unit)) == 1
    finally:
        await store.close()


async def test_a_batch_right_behind_another_begins_on_the_thread(
        harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    """The first group-commit batch after an idle spell begins inline (one round trip: its COMMIT); a batch queued
    while another ran begins on the thread (BEGIN IMMEDIATE and COMMIT), so the callers the batch before answered
    run before its statements: here the first caller resumes before the second unit's statements run."""
    store = await _open(tmp_path)
    try:
        order: list[str] = []

        async def unit(name: str) -> None:
            async def work(tx: Tx) -> None:
                order.append(f"unit {name}")
                await groups.create_group(tx, name=name)
            await store.grouped(work)
            order.append(f"answered {name}")

        async def both() -> None:
            first = asyncio.ensure_future(unit("a"))
            await asyncio.sleep(0)  # (a's batch begins)
            await asyncio.gather(first, unit("b"))  # b queues behind it

        assert await _round_trips(both) == 3  # a: COMMIT; b: BEGIN IMMEDIATE, COMMIT
        assert order == ["unit a", "answered a", "unit b", "answered b"]
        assert await _round_trips(lambda: unit("c")) == 1  # idle again: inline
    finally:
        await store.close()


async def test_begin_immediate_waits_on_the_thread_while_another_connection_writes(
        harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    """The inline ``BEGIN IMMEDIATE`` never waits: while another process's connection holds the write lock it goes
    to the thread, which waits ``busy_timeout`` for the lock as before; the transaction commits once the lock is
    free, and the connection's busy timeout is the store's again afterwards."""
    store = await _open(tmp_path)
    other = sqlite3.connect(str(tmp_path / "hops.db"), isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, other.execute, "COMMIT")

        async def write(name: str) -> None:
            async with store.tx() as tx:
                await groups.create_group(tx, name=name)

        assert await _round_trips(lambda: write("waited")) == 2  # BEGIN IMMEDIATE on the thread (it waited), COMMIT
        assert await _round_trips(lambda: write("free")) == 1  # the lock free again: BEGIN inline
        async with store.tx(readonly=True) as tx:
            assert (await tx.execute(sa.text("PRAGMA busy_timeout"))).scalar_one() == 5000
            assert sorted((await tx.execute(sa.select(schema.agent_group.c.name))).scalars()) == ["free", "waited"]
    finally:
        other.close()
        await store.close()


async def test_a_refused_write_rolls_back_and_statement_errors_still_surface(
        harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        with pytest.raises(InvalidRequest):
            async with store.tx() as tx:
                await groups.create_group(tx, name="undone")
                raise InvalidRequest("refused", field="name")
        with pytest.raises(StoreUnavailable):  # (a driver error of a statement run inline, translated)
            async with store.tx() as tx:
                await tx.execute(sa.text("SELECT * FROM no_such_table"))
        async with store.tx(readonly=True) as tx:
            assert (await tx.execute(sa.select(sa.func.count()).select_from(schema.agent_group))).scalar_one() == 0
    finally:
        await store.close()


async def test_a_read_transaction_is_no_round_trip(harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    """issue 16 (creates/s): a read transaction's COMMIT only ends its read, so it runs inline too — a burst of
    creates ran four read transactions per batch, each a round trip for its COMMIT alone."""
    store = await _open(tmp_path)
    try:
        async with store.tx() as tx:
            await groups.create_group(tx, name="g0")

        async def read() -> None:
            async with store.tx(readonly=True) as tx:
                assert len((await tx.execute(sa.select(schema.agent_group.c.name))).all()) == 1
                await tx.now_ms()

        assert await _round_trips(read) == 0  # (was 1: the COMMIT)
    finally:
        await store.close()


async def test_a_deferred_transaction_that_wrote_commits_on_the_thread(
        harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    """A transaction that began deferred but wrote is not a read: its COMMIT (the disk's) stays on the thread."""
    store = await _open(tmp_path)
    try:
        async def write_in_a_read() -> None:
            async with store.tx(readonly=True) as tx:
                await groups.create_group(tx, name="g1")

        assert await _round_trips(write_in_a_read) == 1  # the COMMIT
        async with store.tx(readonly=True) as tx:
            assert (await tx.execute(sa.select(schema.agent_group.c.name))).scalars().all() == ["g1"]  # committed
    finally:
        await store.close()
