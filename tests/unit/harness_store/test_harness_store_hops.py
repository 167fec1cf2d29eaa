"""Round trips to the SQLite driver's thread (issue 16, event → wake latency): a write transaction is two of them
(``BEGIN IMMEDIATE`` and ``COMMIT``) whatever its statements, and a statement adds none — aiosqlite made 3–4 per
statement (cursor, execute, fetch, close) and three for ``BEGIN``. Counted as the driver thread's hand-backs to the
event loop (``call_soon_threadsafe``), which every round trip makes once."""

from __future__ import annotations

import asyncio
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


async def test_a_write_transaction_is_two_round_trips_whatever_its_statements(
        harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        async def write() -> None:
            async with store.tx() as tx:
                for n in range(5):
                    await groups.create_group(tx, name=f"g{n}")
                await tx.execute(sa.select(schema.agent_group.c.name))
                await tx.now_ms()

        assert await _round_trips(write) == 2  # BEGIN IMMEDIATE, COMMIT (was 3 + 3–4 per statement)
        async with store.tx(readonly=True) as tx:
            assert len((await tx.execute(sa.select(schema.agent_group.c.name))).all()) == 5  # committed
    finally:
        await store.close()


async def test_group_commit_units_add_no_round_trips(harness_runner: asyncio.Runner, tmp_path: Path) -> None:
    store = await _open(tmp_path)
    try:
        async def unit(tx: Tx) -> None:
            await groups.create_group(tx, name="alone")

        assert await _round_trips(lambda: store.grouped(unit)) == 2
    finally:
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
