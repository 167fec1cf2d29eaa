"""harness.md §15, §21 "quota races": 50 concurrent creates for one agent admit exactly 20 (SQLite; PostgreSQL
with two stores standing in for two nodes), and resume/create racing at 19 active end at 20."""

from __future__ import annotations

import asyncio
from typing import Any

from wakeful.harness.errors import QuotaExceeded
from wakeful.harness.store import Store, agents, artifacts, groups, loops, quota, sessions

ELF = b"\x7fELF" + b"\x03" * 64


async def _setup(store: Any) -> tuple[str, str, str, str]:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        agent = await agents.create_agent(tx, group_id=group.id, name="bot")
        session = await sessions.create_session(tx, agent_id=agent.id)
        art = await artifacts.put_artifact(tx, group_id=group.id, elf=ELF, origin="build", created_by="t")
    return group.id, agent.id, session.id, art.sha256


async def _create(store: Any, ids: tuple[str, str, str, str]) -> str:
    group_id, agent_id, session_id, sha = ids
    try:
        async with store.tx() as tx:
            await quota.admit_active(tx, group_id=group_id, agent_id=agent_id)
            await asyncio.sleep(0)  # let the others run between the count and the write
            await loops.insert_loop(
                tx,
                group_id=group_id,
                agent_id=agent_id,
                session_id=session_id,
                artifact_sha256=sha,
                config={},
                creator="operator",
            )
    except QuotaExceeded as exc:
        assert exc.details == {"scope": "agent", "limit": 20}
        return "refused"
    return "admitted"


async def test_fifty_concurrent_creates_admit_exactly_twenty(store: Any, store_url: str) -> None:
    ids = await _setup(store)
    second = store if store.dialect == "sqlite" else await Store.open(store_url)  # a second PG "node"
    try:
        outcomes = await asyncio.gather(*(_create(store if n % 2 else second, ids) for n in range(50)))
    finally:
        if second is not store:
            await second.close()
    assert outcomes.count("admitted") == 20 and outcomes.count("refused") == 30
    async with store.tx(readonly=True) as tx:
        assert await quota.count_active(tx, agent_id=ids[1]) == 20
        assert len(await loops.list_loops(tx, agent_id=ids[1])) == 20


async def _resume(store: Any, ids: tuple[str, str, str, str], loop_id: str) -> str:
    try:
        async with store.tx() as tx:
            await quota.admit_active(tx, group_id=ids[0], agent_id=ids[1])
            row = await loops.get_loop(tx, loop_id, for_update=True)
            await asyncio.sleep(0)
            await loops.update_loop(tx, row.id, where_state="paused", state="active", pause_reason=None)
    except QuotaExceeded:
        return "refused"
    return "admitted"


async def test_resume_and_create_racing_at_nineteen(store: Any) -> None:
    ids = await _setup(store)
    for _ in range(19):
        assert await _create(store, ids) == "admitted"
    async with store.tx() as tx:
        paused = await loops.insert_loop(
            tx,
            group_id=ids[0],
            agent_id=ids[1],
            session_id=ids[2],
            artifact_sha256=ids[3],
            config={},
            creator="operator",
            state="paused",
            pause_reason="manual",
        )
    outcomes = await asyncio.gather(_resume(store, ids, paused.id), _create(store, ids), _create(store, ids))
    assert sorted(outcomes) == ["admitted", "refused", "refused"]
    async with store.tx(readonly=True) as tx:
        assert await quota.count_active(tx, agent_id=ids[1]) == 20
