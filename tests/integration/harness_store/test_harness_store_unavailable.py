"""harness.md §3 unavailability: connection loss, lock timeout, disk full and a failed commit all raise the one
typed ``StoreUnavailable`` (code ``unavailable``), never a driver exception and never a success; the store
works again afterwards."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa
from support.harness_fixtures import PG_URL, PgProxy, require_pg, sqlite_read_only

from wakeful.harness.errors import StoreUnavailable
from wakeful.harness.store import Store, groups


async def _group_names(store: Any) -> list[str]:
    async with store.tx(readonly=True) as tx:
        return [g.name for g in await groups.list_groups(tx)]


async def _backend_pid(tx: Any) -> int:
    return int((await tx.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())


async def _terminate(pid: int) -> None:
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await conn.close()


async def test_unreachable_postgresql_is_unavailable(harness_runner: Any) -> None:
    with pytest.raises(StoreUnavailable) as info:
        await Store.open("postgresql://postgres@127.0.0.1:1/test")
    assert info.value.code == "unavailable"


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_connection_lost_mid_transaction(store: Any) -> None:
    with pytest.raises(StoreUnavailable):
        async with store.tx() as tx:
            await _terminate(await _backend_pid(tx))
            await groups.create_group(tx, name="lost")
    assert await _group_names(store) == []  # recovered: a fresh connection, nothing was written


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_commit_failure_is_unavailable_not_success(store: Any) -> None:
    reached_end = False
    with pytest.raises(StoreUnavailable):
        async with store.tx() as tx:
            await groups.create_group(tx, name="never")
            await _terminate(await _backend_pid(tx))
            await asyncio.sleep(0.2)
            reached_end = True
    assert reached_end and await _group_names(store) == []


async def test_lock_timeout_is_unavailable(store: Any) -> None:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="locked")
    if store.dialect == "postgresql":
        holder = await asyncpg.connect(PG_URL, server_settings={"search_path": store.target.search_path})
        await holder.execute("BEGIN; SELECT * FROM agent_group FOR UPDATE")
    else:
        holder_sqlite = sqlite3.connect(store.sqlite_path, isolation_level=None)
        holder_sqlite.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable):
            async with store.tx() as tx:
                if store.dialect == "postgresql":
                    await tx.execute(sa.text("SET LOCAL lock_timeout = '200ms'"))
                await groups.set_group_limits(tx, group.id, {"loops_per_agent": 1})
    finally:
        if store.dialect == "postgresql":
            await holder.close()
        else:
            holder_sqlite.close()
    async with store.tx() as tx:  # the store works again once the lock is gone
        assert (await groups.set_group_limits(tx, group.id, {"loops_per_agent": 2})).limits == {
            "loops_per_agent": 2
        }


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_disk_full_is_unavailable(store: Any) -> None:
    with pytest.raises(StoreUnavailable) as info:
        async with store.tx() as tx:
            pages = int((await tx.execute(sa.text("PRAGMA page_count"))).scalar_one())
            await tx.execute(sa.text(f"PRAGMA max_page_count = {pages}"))
            for n in range(200):
                await groups.create_group(tx, name=f"g{n}" + "x" * 70)
    assert "full" in info.value.message
    async with store.tx() as tx:
        await tx.execute(sa.text("PRAGMA max_page_count = 1073741823"))
    assert await _group_names(store) == []


def test_require_pg_is_visible() -> None:
    require_pg()  # skips visibly (fails with CI=true) when PostgreSQL is missing
    assert PG_URL.startswith("postgresql://")


async def test_postgresql_down_and_back(pg_schema: str) -> None:
    """The server goes away (a real TCP cut in front of it) and comes back: every operation in between is
    StoreUnavailable, nothing is reported as done, and the same Store works again afterwards."""
    async with PgProxy() as proxy:
        store = await Store.open(proxy.url(pg_schema))
        try:
            async with store.tx() as tx:
                await groups.create_group(tx, name="before")
            proxy.cut()
            for name in ("during-1", "during-2"):
                with pytest.raises(StoreUnavailable):
                    async with store.tx() as tx:
                        await groups.create_group(tx, name=name)
            with pytest.raises(StoreUnavailable):
                await store.now_ms()
            proxy.restore()
            async with store.tx() as tx:
                await groups.create_group(tx, name="after")
            assert await _group_names(store) == ["before", "after"]
        finally:
            await store.close()


async def test_postgresql_back_serves_the_first_read_though_the_pool_kept_sessions_of_before(pg_schema: str) -> None:
    """Sessions idle in the pool when the server went away are closed sockets afterwards: the first read after the
    server is back must not draw one of them and fail (``/healthz`` answered 503 right after a 202, issue 16)."""
    async with PgProxy() as proxy:
        store = await Store.open(proxy.url(pg_schema))
        try:
            held = asyncio.Event()
            sessions: list[Any] = []  # the asyncpg connections under the pooled sessions

            async def hold() -> None:
                async with store.tx(readonly=True) as tx:
                    await tx.now_ms()
                    sessions.append((await tx.conn.get_raw_connection()).driver_connection)
                    await held.wait()

            holders = [asyncio.ensure_future(hold()) for _ in range(3)]
            while store.engine.sync_engine.pool.checkedout() < 3:
                await asyncio.sleep(0.01)
            held.set()
            await asyncio.gather(*holders)
            pooled = store.engine.sync_engine.pool.checkedin()
            assert pooled >= 3
            proxy.cut()
            for _ in range(500):  # until the driver has seen every pooled socket close (the loop reads the EOFs)
                await asyncio.sleep(0.01)
                if all(session.is_closed() for session in sessions):
                    break
            assert all(session.is_closed() for session in sessions)
            proxy.restore()
            for _ in range(pooled):
                assert await store.now_ms() > 0
        finally:
            await store.close()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_sqlite_file_read_only_and_back(store: Any) -> None:
    async with store.tx() as tx:
        await groups.create_group(tx, name="before")
    with sqlite_read_only(store.sqlite_path):
        with pytest.raises(StoreUnavailable) as info:
            async with store.tx() as tx:
                await groups.create_group(tx, name="during")
        assert info.value.code == "unavailable"
        assert await _group_names(store) == ["before"]  # reads keep working
    async with store.tx() as tx:
        await groups.create_group(tx, name="after")
    assert await _group_names(store) == ["before", "after"]
