"""harness.md §15: the quota admission primitive — 20 per agent, 100 per group, group overrides."""

from __future__ import annotations

from typing import Any

import pytest

from wakeful.harness.errors import NotFound, QuotaExceeded
from wakeful.harness.store import agents, artifacts, groups, loops, quota, sessions

ELF = b"\x7fELF" + b"\x02" * 64


async def _setup(store: Any, limits: dict[str, int] | None = None) -> tuple[Any, list[Any], str]:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g", limits=limits)
        people = []
        for n in range(2):
            agent = await agents.create_agent(tx, group_id=group.id, name=f"a{n}")
            people.append((agent, await sessions.create_session(tx, agent_id=agent.id)))
        art = await artifacts.put_artifact(tx, group_id=group.id, elf=ELF, origin="build", created_by="t")
    return group, people, art.sha256


async def _create(store: Any, group: Any, who: Any, sha: str, defaults: Any = None) -> None:
    agent, session = who
    async with store.tx() as tx:
        await quota.admit_active(tx, group_id=group.id, agent_id=agent.id, defaults=defaults)
        await loops.insert_loop(
            tx,
            group_id=group.id,
            agent_id=agent.id,
            session_id=session.id,
            artifact_sha256=sha,
            config={},
            creator="operator",
        )


async def test_agent_limit_then_group_limit(store: Any) -> None:
    group, people, sha = await _setup(store)
    small = quota.QuotaLimits(loops_per_agent=3, loops_per_group=5)
    for _ in range(3):
        await _create(store, group, people[0], sha, small)
    with pytest.raises(QuotaExceeded) as info:
        await _create(store, group, people[0], sha, small)
    assert (info.value.code, info.value.details) == ("quota_exceeded", {"scope": "agent", "limit": 3})
    for _ in range(2):
        await _create(store, group, people[1], sha, small)
    with pytest.raises(QuotaExceeded) as info:
        await _create(store, group, people[1], sha, small)
    assert info.value.details == {"scope": "group", "limit": 5}
    async with store.tx(readonly=True) as tx:
        assert await quota.count_active(tx, group_id=group.id) == 5  # the refused ones wrote nothing


async def test_only_active_loops_count(store: Any) -> None:
    group, people, sha = await _setup(store)
    small = quota.QuotaLimits(loops_per_agent=1)
    await _create(store, group, people[0], sha, small)
    async with store.tx() as tx:
        (only,) = await loops.list_loops(tx, agent_id=people[0][0].id)
        await loops.update_loop(tx, only.id, state="paused", pause_reason="manual")
    await _create(store, group, people[0], sha, small)


async def test_defaults_and_group_overrides(store: Any) -> None:
    group, people, sha = await _setup(store, limits={"loops_per_agent": 2})
    async with store.tx(readonly=True) as tx:
        limits = await quota.effective_limits(tx, group.id)
    assert limits == quota.QuotaLimits(loops_per_agent=2, loops_per_group=100)
    assert quota.QuotaLimits() == quota.QuotaLimits(20, 100)
    for _ in range(2):
        await _create(store, group, people[0], sha)
    with pytest.raises(QuotaExceeded):
        await _create(store, group, people[0], sha)
    with pytest.raises(NotFound):
        async with store.tx() as tx:
            await quota.admit_active(tx, group_id="grp_missing", agent_id="agt_x")


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_the_group_lock_carries_the_transactions_store_clock_reading(
        harness_runner: Any, store_url: str) -> None:
    """issue 16 (a batch of creates): on PostgreSQL the store clock is read with the group's quota lock, not by a
    round trip of its own right after it (harness.md §3: still one reading per transaction, after the lock)."""
    from support.ingress_harness import counting_statements

    from wakeful.harness.store import Store

    store = await Store.open(store_url)  # the store's own clock (no injected one): read from PostgreSQL
    try:
        async with store.tx() as tx:
            group = await groups.create_group(tx, name="g-clock")
        async with store.tx() as tx:
            with counting_statements(store) as sql:
                await quota.lock_group_quota(tx, group.id)
                first = await tx.now_ms()
                assert await tx.now_ms() == first
        assert len(sql) == 1 and "pg_advisory_xact_lock" in sql[0], sql
        assert first >= group.created_ms
    finally:
        await store.close()
