"""harness.md §3 engine rules: URL parsing, SQLite pragmas and BEGIN IMMEDIATE, PostgreSQL READ COMMITTED,
the store clock (one reading per transaction, injectable), atomic transactions, and the node lock."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from wakeful.harness.errors import InvalidRequest, NodeLocked
from wakeful.harness.store import Store, groups, schema
from wakeful.harness.store.engine import NodeLock, parse_url
from wakeful.harness.store.ids import is_id, new_id, new_key_id


def test_parse_url() -> None:
    sqlite = parse_url("sqlite:////data/wakeful.db")
    assert (sqlite.dialect, sqlite.sa_url, sqlite.sqlite_path) == (
        "sqlite",
        "sqlite+aiosqlite:////data/wakeful.db",
        Path("/data/wakeful.db"),
    )
    pg = parse_url("postgresql://u@h:5432/db?search_path=wk_1&ssl=disable")
    assert (pg.dialect, pg.sa_url, pg.search_path) == (
        "postgresql",
        "postgresql+asyncpg://u@h:5432/db?ssl=disable",
        "wk_1",
    )
    assert parse_url("postgres://u@h/db").dialect == "postgresql"
    for bad in ("mysql://x/y", "wakeful.db", "sqlite://", "sqlite:///:memory:"):
        with pytest.raises(InvalidRequest):
            parse_url(bad)


def test_ids() -> None:
    made = [new_id("lp", 1_767_225_600_000) for _ in range(50)]
    assert made == sorted(made) and len(set(made)) == 50  # same millisecond: still increasing
    assert all(is_id(x, "lp") and len(x) == 29 for x in made)
    assert new_id("grp") > new_id("grp", 1_000)  # time-ordered
    key = new_key_id()
    assert is_id(key, "key") and len(key) == 16
    assert not is_id("lp_" + "I" * 26, "lp") and not is_id("grp_x", "grp") and not is_id(7, "lp")
    with pytest.raises(ValueError):
        new_id("usr")


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_sqlite_pragmas(store: Any) -> None:
    async with store.tx() as tx:
        values = [
            (await tx.execute(sa.text(f"PRAGMA {name}"))).scalar()
            for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout", "cache_size")
        ]
    # synchronous 2 = FULL; issue 16: a 256 KiB page cache per pooled connection (negative = KiB), not 2 MiB
    assert values == ["wal", 2, 1, 5000, -256]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_postgresql_settings(store: Any) -> None:
    async with store.tx() as tx:
        iso = (await tx.execute(sa.text("SHOW transaction_isolation"))).scalar()
        lock = (await tx.execute(sa.text("SHOW lock_timeout"))).scalar()
    assert (iso, lock) == ("read committed", "5s")


async def test_writers_serialise_without_deadlock(store: Any) -> None:
    """Read-then-write transactions racing on one row: BEGIN IMMEDIATE (SQLite) / row locks (PG) make every
    increment count, and no transaction fails on a lock upgrade."""
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="counter", limits={"n": 0})

    async def bump() -> None:
        async with store.tx() as tx:
            G = schema.agent_group
            row = (await tx.execute(tx.for_update(sa.select(G.c.limits).where(G.c.id == group.id)))).one()
            await asyncio.sleep(0.001)
            n = int(row.limits.split(":")[1].rstrip("}")) + 1
            await tx.execute(G.update().where(G.c.id == group.id).values(limits=f'{{"n":{n}}}'))

    await asyncio.gather(*(bump() for _ in range(20)))
    async with store.tx(readonly=True) as tx:
        assert (await groups.get_group(tx, group.id)).limits == {"n": 20}


async def test_a_failed_transaction_leaves_nothing(store: Any) -> None:
    with pytest.raises(InvalidRequest):
        async with store.tx() as tx:
            await groups.create_group(tx, name="first")
            await groups.create_group(tx, name="")  # refused after a write in the same transaction
    async with store.tx(readonly=True) as tx:
        assert await groups.list_groups(tx) == []


async def test_sqlite_returns_a_connection_to_the_pool_without_another_rollback(store: Any) -> None:
    """issue 16: a committed transaction's connection goes back to the pool without the pool's reset ROLLBACK
    (with aiosqlite one more round trip to the driver thread per transaction); a failed one is rolled back once,
    and every pooled connection is then clean for the next transaction."""
    if store.dialect != "sqlite":
        pytest.skip("SQLite's pool")
    dialect = store.engine.sync_engine.dialect
    rollbacks: list[None] = []
    original = dialect.do_rollback
    dialect.do_rollback = lambda conn: (rollbacks.append(None), original(conn))[1]
    async with store.tx() as tx:
        await groups.create_group(tx, name="kept")
    async with store.tx(readonly=True) as tx:
        await tx.execute(sa.select(schema.agent_group.c.id))
    assert rollbacks == []

    class Boom(Exception):
        pass

    for n in range(12):  # more than the pool holds: each connection has failed once
        with pytest.raises(Boom):
            async with store.tx() as tx:
                await groups.create_group(tx, name=f"lost{n}")
                raise Boom
    assert len(rollbacks) == 12
    for n in range(12):  # a transaction left open on a pooled connection would make BEGIN fail here
        async with store.tx() as tx:
            await groups.create_group(tx, name=f"after{n}")
    async with store.tx(readonly=True) as tx:
        names = set((await tx.execute(sa.select(schema.agent_group.c.name))).scalars())
    assert names == {"kept", *(f"after{n}" for n in range(12))}


async def test_injected_clock_is_read_once_per_transaction(store: Any, store_clock: Any) -> None:
    async with store.tx() as tx:
        first = await tx.now_ms()
        store_clock.advance(s=5)
        assert await tx.now_ms() == first  # one reading per transaction
        group = await groups.create_group(tx, name="g")
    assert group.created_ms == first
    assert await store.now_ms() == first + 5000
    store_clock.jump_wall(s=-3600)  # the store clock follows a wall-clock jump back
    assert await store.now_ms() == first + 5000 - 3_600_000


async def test_default_store_clock(store_url: str) -> None:
    """No injected clock: the database clock on PostgreSQL, time.time() on SQLite — both near now."""
    store = await Store.open(store_url)
    try:
        before = int(time.time() * 1000)
        reading = await store.now_ms()
        after = int(time.time() * 1000)
    finally:
        await store.close()
    assert before - 1000 <= reading <= after + 1000


async def test_node_lock_refuses_a_second_node(tmp_path: Path, harness_runner: Any) -> None:
    url = f"sqlite:///{tmp_path / 'wakeful.db'}"
    first = await Store.open(url, node_lock=True)
    try:
        with pytest.raises(NodeLocked) as info:
            await Store.open(url, node_lock=True)
        assert info.value.code == "node_locked"
        assert (tmp_path / "wakeful.db.node").read_text().strip().isdigit()
        reader = await Store.open(url)  # without the node lock (e.g. `wakeful db version`) it opens
        await reader.close()
    finally:
        await first.close()
    again = await Store.open(url, node_lock=True)  # released on close
    await again.close()


def test_node_lock_is_per_file(tmp_path: Path) -> None:
    a, b = NodeLock(tmp_path / "a.db"), NodeLock(tmp_path / "b.db")
    a.acquire()
    b.acquire()
    with pytest.raises(NodeLocked):
        NodeLock(tmp_path / "a.db").acquire()
    a.release()
    b.release()
    a.release()  # idempotent
