"""issue 16 / harness.md §15: the group's active count kept by the store (migration 6, ``loop_active_count``).

The quota admission read ``count(*)`` of every Loop of the group under the group's lock, once per batch of creates:
a read that grew with the group (10.9 ms a batch at N = 10,000 on PostgreSQL). The store now keeps the count with
triggers on ``loop``; these tests hold it to the Loop rows through every kind of change, at the quota's edge under
concurrent creates on two stores ("nodes"), and check that an admission reads no Loop row of the group."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from wakeful.harness.errors import QuotaExceeded
from wakeful.harness.store import Store, agents, artifacts, groups, loops, quota, schema, sessions

ELF = b"\x7fELF" + b"\x05" * 64
L = schema.loop


async def _tenant(store: Any, agents_n: int = 2, limits: dict[str, int] | None = None) -> tuple[str, list[Any], str]:
    async with store.tx() as tx:
        group = await groups.create_group(tx, name="g", limits=limits)
        people = []
        for n in range(agents_n):
            agent = await agents.create_agent(tx, group_id=group.id, name=f"a{n}")
            people.append((agent.id, (await sessions.create_session(tx, agent_id=agent.id)).id))
        art = await artifacts.put_artifact(tx, group_id=group.id, elf=ELF, origin="build", created_by="t")
    return group.id, people, art.sha256


async def _counts(store: Any) -> dict[str, tuple[int, int]]:
    """Each group's (kept count, active Loop rows)."""
    C = schema.loop_active_count
    async with store.tx(readonly=True) as tx:
        kept = {r.group_id: int(r.n) for r in await tx.execute(
            sa.select(C.c.group_id, sa.func.sum(C.c.n).label("n")).group_by(C.c.group_id))}
        rows = {r.group_id: int(r.n) for r in await tx.execute(
            sa.select(L.c.group_id, sa.func.count().label("n")).where(L.c.state == "active").group_by(L.c.group_id))}
    return {g: (kept.get(g, 0), rows.get(g, 0)) for g in set(kept) | set(rows)}


async def _assert_kept(store: Any) -> dict[str, int]:
    counts = await _counts(store)
    assert all(k == r for k, r in counts.values()), counts
    return {g: r for g, (_, r) in counts.items()}


def _values(group_id: str, who: tuple[str, str], sha: str, n: int, state: str = "active") -> dict[str, Any]:
    return loops.new_loop_values(
        loop_id=f"lp_bulk{n:06d}{group_id[-6:]}", group_id=group_id, agent_id=who[0], session_id=who[1], name=None,
        artifact_sha256=sha, artifact_path=None, config={}, capabilities=None, creator="t", now=1,
        state=state, pause_reason="manual" if state == "paused" else None)


async def test_the_store_keeps_each_groups_active_count_through_every_change(store: Any) -> None:
    g1, people1, sha1 = await _tenant(store)
    g2, people2, sha2 = await _tenant(store)
    async with store.tx() as tx:  # one statement of several rows (a create batch), and single inserts
        await loops.insert_created(tx, [_values(g1, people1[n % 2], sha1, n) for n in range(5)])
        one = await loops.insert_loop(tx, group_id=g2, agent_id=people2[0][0], session_id=people2[0][1],
                                      artifact_sha256=sha2, config={}, creator="t")
        paused = await loops.insert_loop(tx, group_id=g2, agent_id=people2[1][0], session_id=people2[1][1],
                                         artifact_sha256=sha2, config={}, creator="t", state="paused",
                                         pause_reason="manual")
    assert await _assert_kept(store) == {g1: 5, g2: 1}
    with pytest.raises(RuntimeError):  # a change that rolls back leaves the count as it was
        async with store.tx() as tx:
            await loops.update_loop(tx, one.id, state="failed")
            await loops.insert_created(tx, [_values(g2, people2[0], sha2, 90)])
            raise RuntimeError("rolled back")
    assert await _assert_kept(store) == {g1: 5, g2: 1}
    async with store.tx() as tx:
        await loops.update_loop(tx, paused.id, state="active", pause_reason=None)  # resume: in
        await loops.update_loop(tx, one.id, state="paused", pause_reason="manual")  # pause: out
        await loops.update_loop(tx, one.id, checkpoint={"k": 1})  # no move: nothing
        await loops.update_loop(tx, one.id, state="failed", pause_reason=None)  # paused → failed: nothing
        first = sorted((await loops.list_loops(tx, group_id=g1)), key=lambda r: r.id)
        await loops.update_loop(tx, first[0].id, state="failed")
        await loops.delete_loop(tx, first[1].id)  # an active Loop deleted: out
        await loops.delete_loop(tx, one.id)  # a failed one: nothing
        assert await quota.group_active(tx, g1) == 3
    assert await _assert_kept(store) == {g1: 3, g2: 1}
    async with store.tx() as tx:  # the fold under the lock leaves one row per group
        for g in (g1, g2):
            await quota.lock_group_quota(tx, g)
            assert await quota.group_active(tx, g) == {g1: 3, g2: 1}[g]
        C = schema.loop_active_count
        assert (await tx.execute(sa.select(sa.func.count()).select_from(C))).scalar_one() == 2
    assert await _assert_kept(store) == {g1: 3, g2: 1}


async def _create(store: Any, group_id: str, who: tuple[str, str], sha: str) -> str:
    try:
        async with store.tx() as tx:
            await quota.admit_active(tx, group_id=group_id, agent_id=who[0])
            await asyncio.sleep(0)  # let the others run between the count and the write
            await loops.insert_loop(tx, group_id=group_id, agent_id=who[0], session_id=who[1],
                                    artifact_sha256=sha, config={}, creator="t")
    except QuotaExceeded as exc:
        assert exc.details == {"scope": "group", "limit": 10}
        return "refused"
    return "admitted"


async def _pause(store: Any, loop_id: str) -> None:
    async with store.tx() as tx:
        await loops.get_loop(tx, loop_id, for_update=True)
        await asyncio.sleep(0)
        await loops.update_loop(tx, loop_id, where_state="active", state="paused", pause_reason="manual")


async def test_concurrent_creates_on_two_nodes_at_the_group_edge_never_go_over(store: Any, store_url: str) -> None:
    group_id, people, sha = await _tenant(store, agents_n=5, limits={"loops_per_group": 10})
    async with store.tx() as tx:
        await loops.insert_created(tx, [_values(group_id, people[n % 5], sha, n) for n in range(7)])
        standing = [r.id for r in await loops.list_loops(tx, group_id=group_id)]
    second = store if store.dialect == "sqlite" else await Store.open(store_url)  # a second PG "node"
    try:
        outcomes = await asyncio.gather(*(_create(store if n % 2 else second, group_id, people[n % 5], sha)
                                          for n in range(30)))
        assert outcomes.count("admitted") == 3 and outcomes.count("refused") == 27
        assert await _assert_kept(store) == {group_id: 10}
        # pauses (leaving) racing creates (entering) on both nodes: never over, and the count follows the rows
        racing = [_pause(second, standing[0]), _pause(store, standing[1])]
        racing += [_create(store if n % 2 else second, group_id, people[n % 5], sha) for n in range(12)]
        outcomes = [o for o in await asyncio.gather(*racing) if o is not None]
        assert outcomes.count("admitted") <= 2
        active = (await _assert_kept(store))[group_id]
        assert active == 8 + outcomes.count("admitted") <= 10
    finally:
        if second is not store:
            await second.close()


async def _loop_rows_read(store: Any, tx: Any, action: Any) -> int:
    """Rows of ``loop`` that ``action`` reads in ``tx``: PostgreSQL's counters of this transaction; SQLite: the
    statements whose plan reads ``loop`` by anything but a key (counted as the group's size)."""
    if store.dialect == "postgresql":
        stats = sa.text("SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                        "FROM pg_stat_xact_user_tables WHERE relname = 'loop' AND schemaname = current_schema()")
        before = (await tx.execute(stats)).scalar() or 0
        await action()
        return int((await tx.execute(stats)).scalar() or 0) - int(before)
    ran: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        ran.append((statement, params))

    event.listen(store.engine.sync_engine, "before_cursor_execute", seen)
    try:
        await action()
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", seen)
    walked = 0
    for statement, params in ran:
        if statement.lstrip().upper().startswith("SELECT"):
            plan = " / ".join(str(r[-1]) for r in (await tx.conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN " + statement, tuple(params))).all())
            walked += ("loop_group_id_id" in plan or "SCAN loop" in plan or "loop_state_updated" in plan)
    return walked


async def test_an_admission_reads_no_loop_row_of_its_group_however_many_it_holds(store: Any) -> None:
    group_id, people, sha = await _tenant(store, agents_n=21)
    async with store.tx() as tx:  # 400 Loops of 20 agents; the 21st agent has none
        await loops.insert_created(tx, [_values(group_id, people[n % 20], sha, n) for n in range(400)])
        if store.dialect == "postgresql":
            await tx.execute(sa.text("ANALYZE loop"))
    async with store.tx() as tx:

        async def admit() -> None:
            await quota.admit_active(tx, group_id=group_id, agent_id=people[20][0],
                                     defaults=quota.QuotaLimits(loops_per_group=1000))

        assert await _loop_rows_read(store, tx, admit) == 0


async def test_a_keyed_read_prepared_on_a_small_store_reads_only_its_keys_once_the_store_grew(store: Any) -> None:
    """PostgreSQL keeps a prepared statement's generic plan, made at its sixth run: made while ``loop`` was small,
    ``id = ANY($1)`` stayed a scan of the table as it grew (issue 16: 15.0 M rows read for 10,000 creates). The
    node's sessions plan each execution with its parameters (``plan_cache_mode``)."""
    if store.dialect != "postgresql":
        pytest.skip("PostgreSQL's plan cache")
    group_id, people, sha = await _tenant(store, agents_n=200)
    async with store.tx() as tx:  # one session: its prepared statements
        await loops.insert_created(tx, [_values(group_id, people[n % 200], sha, n) for n in range(20)])
        first = sorted(r.id for r in await loops.list_loops(tx, group_id=group_id))
        for _ in range(8):  # past the five custom plans: the plan cache settles on a plan for the small table
            await loops.find_loops(tx, first[:2])
            await quota.count_active_by_agent(tx, [people[0][0], people[1][0]])
        await loops.insert_created(tx, [_values(group_id, people[n % 200], sha, n) for n in range(20, 3000)])

        async def reads() -> None:
            assert len(await loops.find_loops(tx, first[:2])) == 2
            assert await quota.count_active_by_agent(tx, [people[0][0]]) == {people[0][0]: 15}

        assert await _loop_rows_read(store, tx, reads) <= 15 + 2



async def test_an_agents_count_reads_the_agents_loops_when_the_statistics_are_of_a_smaller_store(store: Any) -> None:
    """ANALYZE ran while the store held no Loop (autovacuum runs once a minute at most; a create burst outgrows
    it): the count of an agent's active Loops is still read by the agent's key, not through the state index."""
    if store.dialect != "postgresql":
        pytest.skip("PostgreSQL's statistics")
    group_id, people, sha = await _tenant(store, agents_n=200)
    async with store.tx() as tx:  # (the bench's store: analyzed by autovacuum before its first Loop)
        await tx.execute(sa.text("ANALYZE loop"))
    async with store.tx() as tx:
        await loops.insert_created(tx, [_values(group_id, people[n % 200], sha, n) for n in range(3000)])

        async def count() -> None:
            assert await quota.count_active_by_agent(tx, [people[0][0]]) == {people[0][0]: 15}

        assert await _loop_rows_read(store, tx, count) <= 15

async def test_a_postgresql_admission_is_the_lock_one_read_of_the_group_and_the_agents_count(store: Any) -> None:
    """Under the group's lock the group's limits and its count are one statement (one round trip fewer while the
    lock serialises the group's creates)."""
    if store.dialect != "postgresql":
        pytest.skip("round trips to PostgreSQL")
    group_id, people, sha = await _tenant(store, limits={"loops_per_group": 1})
    ran: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        ran.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", seen)
    try:
        await _create_any(store, group_id, people[0], sha)
        admitted = list(ran)
        with pytest.raises(QuotaExceeded) as refused:
            await _create_any(store, group_id, people[1], sha)
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", seen)
    assert refused.value.details == {"scope": "group", "limit": 1}
    before_insert = admitted[:next(i for i, s in enumerate(admitted) if s.lstrip().startswith("INSERT INTO loop"))]
    assert len([s for s in before_insert if not s.lstrip().upper().startswith(("BEGIN", "SELECT SESSION"))]) == 3, \
        before_insert


async def _create_any(store: Any, group_id: str, who: tuple[str, str], sha: str) -> None:
    async with store.tx() as tx:
        await quota.admit_active(tx, group_id=group_id, agent_id=who[0])
        await loops.insert_loop(tx, group_id=group_id, agent_id=who[0], session_id=who[1],
                                artifact_sha256=sha, config={}, creator="t")
