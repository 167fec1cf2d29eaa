"""A store created before the control plane (schema version 1) upgrades to the head version with the control tables,
keeping its rows (SQLite after its VACUUM INTO backup; PostgreSQL only with the upgrade flag), and
``Control.open`` refuses a store that has not been upgraded."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from wakeful.control import Control
from wakeful.control import schema as control_schema
from wakeful.harness.errors import UpgradeRequired
from wakeful.harness.store import Store, agents, groups
from wakeful.harness.store.migrations import MIGRATIONS, migrate, stored_version


async def test_version_1_store_upgrades_to_the_control_tables(store_url: str) -> None:
    store = await Store.open(store_url, migrate=False)
    try:
        await migrate(store, allow_upgrade=True, migrations=MIGRATIONS[:1])
        assert await stored_version(store) == 1
        async with store.tx() as tx:
            group = await groups.create_group(tx, name="before")
            await agents.create_agent(tx, group_id=group.id, name="bot")
        with pytest.raises(UpgradeRequired):
            await Control(store).open()
    finally:
        await store.close()
    if store_url.startswith("postgresql"):
        with pytest.raises(UpgradeRequired):
            await Store.open(store_url)
    store = await Store.open(store_url, upgrade=True)
    try:
        assert store.migration is not None and (store.migration.from_version, store.migration.to_version) == (1, MIGRATIONS[-1].version)
        if store.dialect == "sqlite":
            assert store.migration.backup is not None and store.migration.backup.name.endswith(".bak-v1")
        async with store.tx(readonly=True) as tx:
            names = await tx.conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
            assert set(control_schema.metadata.tables) <= names
            assert (await groups.get_group(tx, group.id)).name == "before"
        await Control(store).open()
    finally:
        await store.close()
