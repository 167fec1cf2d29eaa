"""Agent lease operations (harness.md §2.8, §19.2) on the store clock, on SQLite and PostgreSQL: claim only when
absent or expired, epoch +1 on every claim, renew and release conditional on holder and epoch."""

from __future__ import annotations

from typing import Any

from wakeful.harness.placement import leases, nodes
from wakeful.harness.store import agents, groups

TTL = 30_000


async def _agent(store: Any) -> str:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        return (await agents.create_agent(tx, group_id=group.id, name="a")).id


async def _claim(store: Any, agent: str, node: str) -> Any:
    async with store.tx() as tx:
        return await leases.claim(tx, agent, node, TTL)


async def _renew(store: Any, node: str, held: dict[str, int]) -> set[str]:
    async with store.tx() as tx:
        return await leases.renew(tx, node, held, TTL)


async def test_claim_takes_a_free_lease_and_refuses_an_unexpired_one(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    now = await store.now_ms()
    first = await _claim(store, agent, "n1")
    assert (first.node_id, first.epoch, first.expires_ms) == ("n1", 1, now + TTL)
    store_clock.advance(ms=TTL - 1)
    assert await _claim(store, agent, "n2") is None  # still valid by the store clock
    assert await _claim(store, agent, "n1") is None  # not even the holder re-claims a live lease
    store_clock.advance(ms=1)
    second = await _claim(store, agent, "n2")
    assert (second.node_id, second.epoch) == ("n2", 2)
    async with store.tx(readonly=True) as tx:
        assert (await leases.lease_of(tx, agent)) == second


async def test_renew_keeps_only_leases_still_held_at_the_believed_epoch(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    await _claim(store, agent, "n1")
    store_clock.advance(s=10)
    assert await _renew(store, "n1", {agent: 1}) == set()  # nothing lost
    async with store.tx(readonly=True) as tx:
        lease = await leases.lease_of(tx, agent)
    assert lease is not None and lease.expires_ms == await store.now_ms() + TTL
    assert await _renew(store, "n1", {agent: 7}) == {agent}  # a wrong epoch is not ours
    assert await _renew(store, "n2", {agent: 1}) == {agent}  # neither is another node's
    store_clock.advance(ms=TTL)
    await _claim(store, agent, "n2")  # expired → taken at epoch 2
    assert await _renew(store, "n1", {agent: 1}) == {agent}  # the old holder learns it lost the lease
    assert await _renew(store, "n2", {agent: 2}) == set()


async def test_a_renewal_of_an_expired_but_unclaimed_lease_still_holds(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    await _claim(store, agent, "n1")
    store_clock.advance(ms=TTL * 2)  # nobody claimed it meanwhile: the epoch fences, so renewing is safe
    assert await _renew(store, "n1", {agent: 1}) == set()
    assert await _claim(store, agent, "n2") is None


async def test_release_makes_the_lease_claimable_at_once(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    await _claim(store, agent, "n1")
    async with store.tx() as tx:
        assert await leases.release(tx, "n2", {agent: 1}) == set()  # not n2's to release
        assert await leases.release(tx, "n1", {agent: 1}) == {agent}
    third = await _claim(store, agent, "n2")
    assert third is not None and third.epoch == 2


async def test_a_wall_clock_jump_back_does_not_extend_a_release(store: Any, store_clock: Any) -> None:
    agent = await _agent(store)
    await _claim(store, agent, "n1")
    store_clock.jump_wall(s=-3600)
    async with store.tx() as tx:
        await leases.release(tx, "n1", {agent: 1})
        lease = await leases.lease_of(tx, agent)
        assert lease is not None and lease.expires_ms == await tx.now_ms()


async def test_node_rows_register_heartbeat_and_count_as_dead_by_the_store_clock(
    store: Any, store_clock: Any,
) -> None:
    async with store.tx() as tx:
        await nodes.register(tx, node_id="n1", name="one", host="h", pid=1, version="v", capacity=10)
        await nodes.register(tx, node_id="n2", name="two", host="h", pid=2, version="v", capacity=10)
    agent = await _agent(store)
    await _claim(store, agent, "n1")
    store_clock.advance(s=15)
    async with store.tx() as tx:
        assert await nodes.heartbeat(tx, "n2", objects=3)
        assert await nodes.live_nodes(tx, 20_000) == 2
    store_clock.advance(s=6)
    async with store.tx() as tx:
        assert await nodes.live_nodes(tx, 20_000) == 1  # n1's heartbeat is 21 s old
        listed = {n.name: n for n in await nodes.list_nodes(tx, 20_000)}
        assert listed["one"].dead and not listed["two"].dead and listed["two"].objects == 3
        assert listed["one"].leases == 1  # its lease runs until 30 s: a dead heartbeat alone frees nothing
    assert await _claim(store, agent, "n2") is None
    store_clock.advance(s=600)
    async with store.tx() as tx:
        assert await nodes.sweep_gone(tx) == 2
        await nodes.set_state(tx, "n2", "draining")
        states = {n.name: n.state for n in await nodes.list_nodes(tx, 20_000)}
    assert states == {"one": "gone", "two": "draining"}


async def test_one_renewal_answers_for_every_lease_of_the_node(store: Any, store_clock: Any) -> None:
    """issue 16: a node's leases are renewed in one statement however many it holds; each agent is kept only at
    the holder and epoch the node believes."""
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        ids = [(await agents.create_agent(tx, group_id=group.id, name=f"a{i}")).id for i in range(600)]
    for agent in ids:
        await _claim(store, agent, "n1" if agent != ids[1] else "n2")
    store_clock.advance(s=10)
    held = {agent: 1 for agent in ids}
    held[ids[0]] = 2  # a stale belief about the epoch
    assert await _renew(store, "n1", held) == {ids[0], ids[1]}  # the answer names only the agents lost
    async with store.tx(readonly=True) as tx:
        expiries = {lease.agent_id: lease.expires_ms for lease in await leases.list_leases(tx)}
    assert {expiries[a] for a in ids[2:]} == {await store.now_ms() + TTL}


async def test_reclaim_reads_the_active_loops_once_not_once_per_released_lease(store: Any, store_clock: Any) -> None:
    """issue 16: a node started again after a clean drain takes back the leases its drain released, those whose agent
    has an active Loop. The agents with an active Loop are read once for the statement: on a fresh PostgreSQL store
    (no statistics yet) the join was planned per released lease over the whole state index — 8.7 s for 500 leases
    over 10,000 Loops, past the statement timeout. Counted on PostgreSQL as the scans of ``loop`` the statement
    started (sequential and index scans): a few, not two per released lease."""
    from support.store_rows import ELF

    from wakeful.harness.store import artifacts, loops, sessions

    agents_n, per_agent = 12, 3
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g")
        art = await artifacts.put_artifact(tx, group_id=group.id, elf=ELF, origin="build", created_by="t")
        mine = []
        for i in range(agents_n):
            agent = await agents.create_agent(tx, group_id=group.id, name=f"a{i}")
            session = await sessions.create_session(tx, agent_id=agent.id)
            for _ in range(per_agent):
                await loops.insert_loop(tx, group_id=group.id, agent_id=agent.id, session_id=session.id,
                                        artifact_sha256=art.sha256, config={}, creator="operator")
            mine.append(agent.id)
        idle = await agents.create_agent(tx, group_id=group.id, name="idle")  # no Loop: not taken back
    for agent in [*mine, idle.id]:
        await _claim(store, agent, "n1")
    store_clock.advance(ms=TTL)  # the drain released them: expired, still under n1
    async with store.tx() as tx:
        before = await _loop_scans(tx)
        taken = await leases.reclaim(tx, "n1", TTL, released=100)
        scans = await _loop_scans(tx) - before
    assert sorted(taken) == sorted(mine) and set(taken.values()) == {2}
    if store.dialect == "postgresql":
        assert scans <= 2, scans


async def _loop_scans(tx: Any) -> int:
    """Scans of ``loop`` started so far in this transaction (PostgreSQL; 0 on SQLite)."""
    if tx.dialect != "postgresql":
        return 0
    import sqlalchemy as sa

    row = (await tx.execute(sa.text(
        "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables "
        "WHERE relname = 'loop' AND schemaname = current_schema()"))).scalar()
    return int(row or 0)
