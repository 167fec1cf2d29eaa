"""The operator's store operations (harness.md §3; interfaces.md §4.2 ``wakeful db``): schema version, upgrade,
retention and backup of the store at a URL. They run on the node's machine with the operator's authority (there
is no HTTP route) and each opens and closes the store itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_HEAD", "backup", "prune", "stored_version", "upgrade"]


def _head() -> int:
    from wakeful.harness.store.migrations import HEAD

    return HEAD


SCHEMA_HEAD = _head()
"""The schema version this code writes."""


async def stored_version(url: str) -> int | None:
    """The store's schema version (``None``: an empty store), changing nothing."""
    from wakeful.harness.store import Store
    from wakeful.harness.store.migrations import stored_version as read

    store = await Store.open(url, migrate=False)
    try:
        return await read(store)
    finally:
        await store.close()


async def upgrade(url: str, *, node_lock: bool = True) -> dict[str, Any]:
    """Bring the store to ``SCHEMA_HEAD`` (creating it when empty): ``{from, to, backup}``. With ``node_lock`` a
    node running on the same SQLite file refuses it (``node_locked``); a newer store is refused."""
    from wakeful.harness.store import Store

    store = await Store.open(url, upgrade=True, node_lock=node_lock)
    try:
        done = store.migration
        assert done is not None
        return {"from": done.from_version, "to": done.to_version,
                "backup": None if done.backup is None else str(done.backup)}
    finally:
        await store.close()


async def prune(url: str, *, retention_s: int, messages_older_than_days: int | None) -> dict[str, int]:
    """Retention: settled events, idle rate buckets, unreferenced artifacts (30 days), and messages older than the
    given age only when asked; the counts removed."""
    from wakeful.harness.store import Store
    from wakeful.harness.store.retention import prune_all

    store = await Store.open(url)
    try:
        async with store.tx() as tx:
            report = await prune_all(tx, retention_s=retention_s, messages_older_than_days=messages_older_than_days)
        return dict(report.__dict__)
    finally:
        await store.close()


async def backup(url: str, target: Path) -> Path:
    """A consistent copy of the SQLite store at ``target`` (``VACUUM INTO``; never overwrites)."""
    from wakeful.harness.store import Store
    from wakeful.harness.store.backup import backup as copy

    store = await Store.open(url)
    try:
        return await copy(store, target)
    finally:
        await store.close()
