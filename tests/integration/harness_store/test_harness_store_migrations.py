"""harness.md §3 schema versions: empty → head, equal → start, newer → schema_too_new, older → upgrade
(SQLite after a VACUUM INTO backup; PostgreSQL only when allowed, under an advisory lock). Version 2 is a
synthetic migration defined here, applied to a database written at version 1 with data in it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from wakeful.harness.errors import SchemaTooNew, UpgradeRequired
from wakeful.harness.store import Store, agents, groups, schema
from wakeful.harness.store.migrations import HEAD, MIGRATIONS, Migration, migrate, stored_version


def _add_note(conn: Connection) -> None:
    conn.execute(sa.text("ALTER TABLE agent_group ADD COLUMN note VARCHAR(120)"))
    conn.execute(sa.text("UPDATE agent_group SET note = 'was ' || name"))


def _broken(conn: Connection) -> None:
    conn.execute(sa.text("ALTER TABLE agent_group ADD COLUMN note VARCHAR(120)"))
    raise RuntimeError("migration bug")


# one schema_meta row per applied migration: an empty store runs every migration up to HEAD
AT_HEAD = [(v, "0.1.0") for v in range(1, HEAD + 1)]
V2 = (*MIGRATIONS, Migration(HEAD + 1, "add_note", _add_note))
V2_BROKEN = (*MIGRATIONS, Migration(HEAD + 1, "broken", _broken))


async def _meta(store: Any) -> list[tuple[int, str]]:
    async with store.tx(readonly=True) as tx:
        rows = await tx.execute(sa.select(schema.schema_meta).order_by(schema.schema_meta.c.version))
        return [(r.version, r.wakeful_version) for r in rows]


async def _seed(url: str) -> str:
    store = await Store.open(url)
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="kept")
        await agents.create_agent(tx, group_id=group.id, name="bot")
    await store.close()
    return group.id


async def test_empty_store_is_created_at_head_with_every_table(store_url: str) -> None:
    store = await Store.open(store_url)
    try:
        assert await _meta(store) == AT_HEAD
        async with store.tx(readonly=True) as tx:
            names = await tx.conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
        assert set(schema.metadata.tables) <= names
    finally:
        await store.close()


async def test_equal_version_starts_without_changes(store_url: str, tmp_path: Path) -> None:
    group_id = await _seed(store_url)
    store = await Store.open(store_url)
    try:
        assert await _meta(store) == AT_HEAD
        async with store.tx(readonly=True) as tx:
            assert (await groups.get_group(tx, group_id)).name == "kept"
    finally:
        await store.close()
    assert not list(tmp_path.glob("*.bak-*"))


async def test_newer_store_is_refused(store_url: str) -> None:
    store = await Store.open(store_url)
    async with store.tx() as tx:
        await tx.execute(
            schema.schema_meta.insert().values(version=HEAD + 1, wakeful_version="9.9", upgraded_ms=1)
        )
    await store.close()
    with pytest.raises(SchemaTooNew) as info:
        await Store.open(store_url)
    assert info.value.code == "schema_too_new" and info.value.details == {
        "stored": HEAD + 1,
        "code_version": HEAD,
    }


async def test_older_store_upgrades_and_keeps_data(store_url: str) -> None:
    group_id = await _seed(store_url)  # a database written at version 1
    store = await Store.open(store_url, migrate=False)
    try:
        if store.dialect == "postgresql":
            with pytest.raises(UpgradeRequired):  # refused unless `wakeful db upgrade` / --upgrade
                await migrate(store, allow_upgrade=False, migrations=V2)
            assert await stored_version(store) == HEAD
        outcome = await migrate(store, allow_upgrade=True, migrations=V2)
        assert (outcome.from_version, outcome.to_version) == (HEAD, HEAD + 1)
        assert [v for v, _ in await _meta(store)] == [*range(1, HEAD + 1), HEAD + 1]
        async with store.tx(readonly=True) as tx:
            note = (
                await tx.execute(sa.text("SELECT note FROM agent_group WHERE id = :g"), {"g": group_id})
            ).scalar()
        assert note == "was kept"
        if store.dialect == "sqlite":
            assert outcome.backup is not None and outcome.backup.name == f"wakeful.db.bak-v{HEAD}"
            with sqlite3.connect(outcome.backup) as old:  # the backup is the version-1 database
                assert old.execute("SELECT max(version) FROM schema_meta").fetchone() == (HEAD,)
                assert old.execute("SELECT name FROM agent_group").fetchall() == [("kept",)]
                columns = [r[1] for r in old.execute("PRAGMA table_info(agent_group)")]
                assert "note" not in columns
        else:
            assert outcome.backup is None
        again = await migrate(store, allow_upgrade=True, migrations=V2)
        assert again.from_version == HEAD + 1 and again.backup is None  # equal: nothing to do
    finally:
        await store.close()


async def test_a_failing_migration_changes_nothing(store_url: str) -> None:
    await _seed(store_url)
    store = await Store.open(store_url, migrate=False)
    try:
        with pytest.raises(RuntimeError, match="migration bug"):
            await migrate(store, allow_upgrade=True, migrations=V2_BROKEN)
        assert await stored_version(store) == HEAD
        async with store.tx(readonly=True) as tx:
            columns = await tx.conn.run_sync(
                lambda c: [x["name"] for x in sa.inspect(c).get_columns("agent_group")]
            )
        assert "note" not in columns
    finally:
        await store.close()


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_concurrent_starts_on_an_empty_store_create_it_once(store_url: str) -> None:
    stores = [await Store.open(store_url, migrate=False) for _ in range(3)]
    try:
        outcomes = await asyncio.gather(*(migrate(s, allow_upgrade=False) for s in stores))
        assert sorted(o.from_version is None for o in outcomes).count(True) >= 1
        assert await _meta(stores[0]) == AT_HEAD
    finally:
        for s in stores:
            await s.close()
