"""PostgreSQL's session pool under a steady load (issue 16, ingest-2k2): the session used most recently goes out
first (``pool_use_lifo``), so transactions one after the other run on one session — its prepared statements and
asyncpg's type cache warm — instead of rotating through every session the pool has opened (FIFO), which prepared
each of the ingest step's batch statements once per session (``Connection.prepare`` and the type introspection's
round trips in the node's profile)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from support.harness_fixtures import pg_url_with_schema

from wakeful.harness.store import Store

pytestmark = pytest.mark.integration


async def _backend(store: Store, hold: asyncio.Event | None = None) -> int:
    async with store.tx(readonly=True) as tx:
        pid = int((await tx.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
        if hold is not None:
            await hold.wait()
        return pid


async def test_transactions_one_after_another_run_on_the_most_recent_session(
    harness_runner: Any, pg_schema: str,
) -> None:
    store = await Store.open(pg_url_with_schema(pg_schema))
    try:
        hold = asyncio.Event()
        burst = [asyncio.create_task(_backend(store, hold)) for _ in range(4)]
        while store.engine.pool.checkedout() < 4:  # (polling for the pool's state, not a timing assertion)
            await asyncio.sleep(0.005)
        hold.set()
        opened = set(await asyncio.gather(*burst))
        assert len(opened) == 4  # four sessions in the pool
        steady = [await _backend(store) for _ in range(12)]
        assert len(set(steady)) == 1, steady  # FIFO: all four in turn
        assert steady[0] in opened
    finally:
        await store.close()
