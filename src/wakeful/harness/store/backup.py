"""Consistent copies of a SQLite store with ``VACUUM INTO`` (harness.md §3: before every upgrade, and
`wakeful db backup PATH`). PostgreSQL is backed up with its own tools (pg_dump).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from wakeful.harness.errors import InvalidRequest, StoreUnavailable
from wakeful.harness.store.core import Store

__all__ = ["backup", "vacuum_into"]


def vacuum_into(db_path: Path, target: Path) -> Path:
    """Copy the live database file into ``target`` (which must not exist) as one consistent snapshot."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    try:
        conn.execute("VACUUM INTO ?", (str(target),))
    except sqlite3.OperationalError as exc:
        raise StoreUnavailable(f"backup to {target} failed: {exc}") from None
    finally:
        conn.close()
    return target


async def backup(store: Store, target: Path) -> Path:
    """`wakeful db backup PATH` for a SQLite store; refuses an existing PATH and PostgreSQL."""
    if store.sqlite_path is None:
        raise InvalidRequest("back up a PostgreSQL store with pg_dump", field="store.url")
    if target.exists():
        raise InvalidRequest(f"{target} exists; a backup never overwrites a file", field="path")
    return await asyncio.to_thread(vacuum_into, store.sqlite_path, target)
