"""Numbered schema migrations and the start-up version rules of harness.md §3.

Each migration is a module ``NNNN_<what>.py`` with ``upgrade(conn)`` (sync Core DDL plus data moves) run in
one transaction; harness and control-plane tables share this one sequence. No downgrades.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from wakeful import __version__
from wakeful.harness.errors import SchemaTooNew, UpgradeRequired
from wakeful.harness.store import schema

if TYPE_CHECKING:
    from wakeful.harness.store.core import Store

__all__ = ["HEAD", "MIGRATIONS", "Migration", "MigrationOutcome", "migrate", "stored_version"]

# the session advisory lock held by the PostgreSQL upgrade so only one node runs it (harness.md §3); keyed on
# the schema, so stores in different schemas of one database do not wait for each other
_LOCK_KEY = sa.text("SELECT hashtext('wakeful.upgrade:' || current_schema())")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    upgrade: Callable[[Connection], None]


@dataclass(frozen=True)
class MigrationOutcome:
    """What start-up did: ``from_version`` None means the store was empty."""

    from_version: int | None
    to_version: int
    backup: Path | None


def _discover() -> tuple[Migration, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        head, _, rest = info.name.partition("_")
        if len(head) == 4 and head.isdigit() and rest:
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append(Migration(int(head), rest, module.upgrade))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations are not numbered 1..n: {[m.version for m in found]}")
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _discover()
_NO_STATEMENT_TIMEOUT = "SET LOCAL statement_timeout = 0"
HEAD: int = MIGRATIONS[-1].version


async def stored_version(store: Store) -> int | None:
    """The highest applied version, or None for an empty store (no ``schema_meta`` table)."""
    async with store.tx(readonly=True) as tx:
        has_meta = await tx.conn.run_sync(lambda c: sa.inspect(c).has_table("schema_meta"))
        if not has_meta:
            return None
        value = (await tx.execute(sa.select(sa.func.max(schema.schema_meta.c.version)))).scalar()
        return None if value is None else int(value)


# harness.md §3: the start-up table (equal → start, older → upgrade, newer → refuse, empty → head)
async def migrate(
    store: Store, *, allow_upgrade: bool, migrations: Sequence[Migration] = MIGRATIONS
) -> MigrationOutcome:
    if store.dialect == "postgresql":
        return await _migrate_pg(store, allow_upgrade, migrations)
    return await _migrate_sqlite(store, migrations)


async def _migrate_sqlite(store: Store, migrations: Sequence[Migration]) -> MigrationOutcome:
    head = migrations[-1].version
    current = await stored_version(store)
    _refuse_newer(current, head)
    backup = None
    if current is not None and current < head:
        assert store.sqlite_path is not None
        backup = await asyncio.to_thread(_vacuum_into, store.sqlite_path, current)
    await _apply(store, current, migrations)
    return MigrationOutcome(current, head, backup)


async def _migrate_pg(store: Store, allow_upgrade: bool, migrations: Sequence[Migration]) -> MigrationOutcome:
    head = migrations[-1].version
    current = await stored_version(store)
    _refuse_newer(current, head)
    if current == head:
        return MigrationOutcome(current, head, None)
    if current is not None and not allow_upgrade:
        raise UpgradeRequired(
            f"the PostgreSQL schema is at version {current}, the code at {head}: "
            "run `wakeful db upgrade` or start with --upgrade",
            stored=current,
            code_version=head,
        )
    async with store.engine.connect() as lock_conn:
        key = (await lock_conn.execute(_LOCK_KEY)).scalar_one()
        await lock_conn.execute(sa.text(_NO_STATEMENT_TIMEOUT))  # waiting out another node's upgrade is fine
        await lock_conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": key})
        await lock_conn.commit()
        try:
            current = await stored_version(store)  # re-read under the lock: another node may have run it
            _refuse_newer(current, head)
            await _apply(store, current, migrations)
        finally:
            await lock_conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            await lock_conn.commit()
    return MigrationOutcome(current, head, None)


def _refuse_newer(current: int | None, head: int) -> None:
    if current is not None and current > head:
        raise SchemaTooNew(
            f"the store's schema version {current} is newer than this wakeful's {head}; upgrade wakeful",
            stored=current,
            code_version=head,
        )


async def _apply(store: Store, current: int | None, migrations: Sequence[Migration]) -> None:
    for migration in migrations:
        if current is not None and migration.version <= current:
            continue
        # harness.md §3: each migration is one transaction of Core DDL plus data moves
        async with store.tx() as tx:
            if store.dialect == "postgresql":  # a long data move is not a stuck session (engine.session_timeouts)
                await tx.execute(sa.text(_NO_STATEMENT_TIMEOUT))
                await tx.execute(sa.text("SET LOCAL idle_in_transaction_session_timeout = 0"))
            await tx.conn.run_sync(migration.upgrade)
            await tx.execute(
                schema.schema_meta.insert().values(
                    version=migration.version, wakeful_version=__version__, upgraded_ms=await tx.now_ms()
                )
            )


# harness.md §3: SQLite copies the file with VACUUM INTO <db>.bak-v<old> before upgrading
def _vacuum_into(db_path: Path, old_version: int) -> Path:
    backup = Path(f"{db_path}.bak-v{old_version}")
    n = 1
    while backup.exists():
        backup = Path(f"{db_path}.bak-v{old_version}.{n}")
        n += 1
    from wakeful.harness.store.backup import vacuum_into

    return vacuum_into(db_path, backup)
