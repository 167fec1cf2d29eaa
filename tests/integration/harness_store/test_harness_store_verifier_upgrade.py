"""A version-2 store (before webhook verifiers) upgrades to version 3 keeping its Loops, whose webhooks then take a
verifier (issue 19); SQLite and PostgreSQL."""

from __future__ import annotations

from wakeful.harness.store import Store, agents, artifacts, groups, loops, sessions
from wakeful.harness.store.migrations import HEAD, MIGRATIONS, migrate, stored_version
from wakeful.harness.verifiers import set_verifier, show_verifier


async def _v2_loop(store: Store) -> str:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        agent = await agents.create_agent(tx, group_id=group.id, name="bot")
        session = await sessions.create_session(tx, agent_id=agent.id)
        art = await artifacts.put_artifact(tx, group_id=group.id, elf=b"\x7fELF" + b"\x01" * 64, origin="build",
                                           created_by="t")
        loop = await loops.insert_loop(tx, group_id=group.id, agent_id=agent.id, session_id=session.id,
                                       artifact_sha256=art.sha256, config={}, capabilities=[], creator="t")
    return loop.id


async def test_version_2_store_upgrades_and_takes_a_verifier(store_url: str) -> None:
    store = await Store.open(store_url, migrate=False)
    try:
        await migrate(store, allow_upgrade=True, migrations=MIGRATIONS[:2])
        assert await stored_version(store) == 2
        loop_id = await _v2_loop(store)
    finally:
        await store.close()
    store = await Store.open(store_url, upgrade=True)
    try:
        assert store.migration is not None and (store.migration.from_version, store.migration.to_version) == (2, HEAD)  # later migrations run too
        made = await set_verifier(store, loop_id, {"scheme": "github", "secret": "upgraded-store-secret"})
        assert made["verifier"]["scheme"] == "github"
        assert (await show_verifier(store, loop_id))["verifier"] == made["verifier"]
    finally:
        await store.close()
