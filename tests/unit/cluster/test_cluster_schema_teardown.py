"""The per-test PostgreSQL schema is dropped even when the test left a transaction open in it: the holder is
terminated after a lock timeout and the teardown fails naming it (tests/support/harness_fixtures.py)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time

import asyncpg
import pytest
from support import harness_fixtures as hf


def test_a_leftover_open_transaction_neither_hangs_the_drop_nor_passes_silently(monkeypatch: pytest.MonkeyPatch) -> None:
    hf.require_pg()
    monkeypatch.setattr(hf, "DROP_LOCK_TIMEOUT", "300ms")  # the fixtures' 5 s, shortened for this test
    name = "wk_" + secrets.token_hex(6)
    asyncio.run(hf._pg_schema("create", name))
    loop = asyncio.new_event_loop()

    async def hold() -> asyncpg.Connection:  # a test's leaked connection, idle in a transaction reading the schema
        conn = await asyncpg.connect(hf.PG_URL)
        await conn.execute(f'CREATE TABLE "{name}".t (x int)')
        await conn.transaction().start()
        await conn.execute(f'SELECT * FROM "{name}".t')
        return conn

    async def schemas() -> int:
        conn = await asyncpg.connect(hf.PG_URL)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", name))
        finally:
            await conn.close()

    leaked = loop.run_until_complete(hold())
    try:
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="left backends holding locks") as caught:
            asyncio.run(hf._pg_schema("drop", name))
        assert time.monotonic() - started < 30  # bounded: lock timeout, terminate, retry
        assert "idle in transaction" in str(caught.value)
        assert asyncio.run(schemas()) == 0
        assert leaked.is_closed() or loop.run_until_complete(_dead(leaked))
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(leaked.close(timeout=2))
        loop.close()
    # a clean schema drops without complaint
    asyncio.run(hf._pg_schema("create", name))
    asyncio.run(hf._pg_schema("drop", name))
    assert asyncio.run(schemas()) == 0


async def _dead(conn: asyncpg.Connection) -> bool:
    try:
        await conn.fetchval("SELECT 1", timeout=5)
    except (asyncpg.exceptions.PostgresError, asyncpg.exceptions.InterfaceError, ConnectionError, OSError):
        return True
    return False
