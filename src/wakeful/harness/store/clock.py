"""The store clock: durable timestamps in Unix milliseconds, read once per transaction (harness.md §3).

The database clock on PostgreSQL (``clock_timestamp()``), ``time.time()`` on SQLite; tests inject a wall clock.
"""

from __future__ import annotations

import time
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["STORE_MS_SQL", "WallClock", "read_store_ms"]


class WallClock(Protocol):
    """Anything with ``unix_ms()``: ``wakeful.runtime.clock.ManualClock`` fits, so one test clock drives
    the store and the node's monotonic clock together."""

    def unix_ms(self) -> int: ...


STORE_MS_SQL = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"  # PostgreSQL's store clock (ms)


# harness.md §3: clock_timestamp() on PostgreSQL, the process wall clock on SQLite
async def read_store_ms(conn: AsyncConnection, dialect: str, clock: WallClock | None) -> int:
    if clock is not None:
        return int(clock.unix_ms())
    if dialect == "postgresql":
        value = (await conn.execute(text(f"SELECT {STORE_MS_SQL}"))).scalar_one()
        return int(value)
    return int(time.time() * 1000)
