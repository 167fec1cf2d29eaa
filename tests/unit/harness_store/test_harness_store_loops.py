"""harness.md §2.5, §2.7, §4.3, §5: Loop rows, the incarnation bump, fenced writes, cascade delete and
retention of logs (200) and transitions (100), on both backends."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from support.calls import record_calls
from support.ingress_harness import counting_statements
from support.store_rows import loop_row, sibling_rows

from wakeful.harness.errors import InvalidRequest, NotFound
from wakeful.harness.store import agents, loops, schema
from wakeful.harness.store.loops import LogLine

ELF = b"\x7fELF" + b"\x01" * 64


async def _loop(store: Any, **kwargs: Any) -> loops.Loop:
    return await loop_row(store, elf=ELF, config={"threshold": 3}, capabilities=[{"name": "agent.notify"}],
                          artifact_path="/loops/main.elf", **kwargs)


async def test_insert_defaults(store: Any) -> None:
    loop = await _loop(store)
    assert loop.id.startswith("lp_") and loop.name == f"loop-{loop.id[-6:]}"
    assert (loop.state, loop.pause_reason, loop.incarnation) == ("active", None, 0)
    assert loop.config == {"threshold": 3} and loop.capabilities == [{"name": "agent.notify"}]
    assert loop.checkpoint is None and loop.checkpoint_bytes == 0 and loop.dropped_logs == 0
    assert loop.activated_ms == loop.created_ms == loop.updated_ms
    assert loop.notified_since_activation is False and loop.object_id is None


async def test_insert_refuses_foreign_session_and_bad_state(store: Any) -> None:
    loop = await _loop(store)
    async with store.tx() as tx:
        other = await agents.create_agent(tx, group_id=loop.group_id, name="other")
    base = {
        "group_id": loop.group_id,
        "session_id": loop.session_id,
        "artifact_sha256": loop.artifact_sha256,
        "config": {},
        "creator": "operator",
    }
    with pytest.raises(InvalidRequest) as info:
        async with store.tx() as tx:
            await loops.insert_loop(tx, agent_id=other.id, **base)
    assert info.value.details["field"] == "session_id"
    for bad_name in ("", "n" * 81):
        with pytest.raises(InvalidRequest):
            async with store.tx() as tx:
                await loops.insert_loop(tx, agent_id=loop.agent_id, name=bad_name, **base)
    for state, reason in (("paused", None), ("active", "manual"), ("paused", "sleepy"), ("gone", None)):
        with pytest.raises(InvalidRequest):
            async with store.tx() as tx:
                await loops.insert_loop(tx, agent_id=loop.agent_id, state=state, pause_reason=reason, **base)
    async with store.tx(readonly=True) as tx:
        assert len(await loops.list_loops(tx, agent_id=loop.agent_id)) == 1  # nothing half-written


async def test_begin_incarnation_only_when_active(store: Any) -> None:
    loop = await _loop(store)
    async with store.tx() as tx:
        assert await loops.begin_incarnation(tx, loop.id, node_id="node_a") == 1
        assert await loops.attach_object(tx, loop.id, 1, "obj-1") is True
        assert await loops.begin_incarnation(tx, loop.id, node_id="node_a") == 2
        row = await loops.get_loop(tx, loop.id)
    assert (row.incarnation, row.node_id, row.object_id) == (2, "node_a", None)
    async with store.tx() as tx:
        assert await loops.attach_object(tx, loop.id, 1, "obj-stale") is False  # §5: stale report ignored
        assert await loops.update_loop(
            tx, loop.id, where_state="active", state="paused", pause_reason="manual"
        )
        assert await loops.begin_incarnation(tx, loop.id, node_id="node_a") is None
        assert await loops.attach_object(tx, loop.id, 2, "obj-2") is False
        assert await loops.detach_object(tx, loop.id, 2) is True
        row = await loops.get_loop(tx, loop.id)
    assert (row.state, row.pause_reason, row.incarnation, row.object_id) == ("paused", "manual", 2, None)


async def test_attach_objects_attaches_each_loop_only_at_its_incarnation_while_active(store: Any) -> None:
    """§4.3 step 4 for a batch: each Loop gets its own object id, only where its incarnation and state = active
    still match; the ids attached are returned, the others' rows are left as they were."""
    first = await loop_row(store)
    async with store.tx() as tx:
        rows = [first] + [await loops.insert_loop(
            tx, group_id=first.group_id, agent_id=first.agent_id, session_id=first.session_id,
            artifact_sha256=first.artifact_sha256, config={}, creator=first.creator) for _ in range(3)]
        ids = [r.id for r in rows]
        began = {r.id: r.incarnation for r in await loops.begin_incarnations(tx, ids, node_id="node_a")}
        assert await loops.update_loop(tx, ids[3], where_state="active", state="paused", pause_reason="manual")
    async with store.tx() as tx:
        with counting_statements(store) as seen:
            attached = await loops.attach_objects(tx, [
                (ids[0], began[ids[0]], "o1"), (ids[1], began[ids[1]] + 1, "o2"),  # a stale incarnation
                (ids[2], began[ids[2]], "o3"), (ids[3], began[ids[3]], "o4"),  # o4: no longer active
            ])
        after = {i: await loops.get_loop(tx, i) for i in ids}
    assert attached == {ids[0], ids[2]}
    if store.dialect == "postgresql":  # issue 16: the batch in one statement, not one per Loop and a read
        assert len([q for q in seen if q.lstrip().upper().startswith(("UPDATE", "SELECT"))]) == 1, seen
    assert [after[i].object_id for i in ids] == ["o1", None, "o3", None]
    assert after[ids[0]].incarnation == began[ids[0]]


async def test_attach_objects_that_all_match_is_one_statement(store: Any) -> None:
    """issue 16 (a burst of creates attaches every Loop it loaded): when each Loop still matches, step 4 for the
    batch is one statement — PostgreSQL's update answers the ids it attached, SQLite's count of changed rows says
    all of them — not an update and a read of what it left."""
    first = await loop_row(store)
    async with store.tx() as tx:
        rows = await sibling_rows(tx, first, 2)
        began = await loops.begin_incarnations(tx, [r.id for r in rows], node_id="node_a")
        await tx.now_ms()  # (the transaction's store-clock reading is not the step's statement)
        with counting_statements(store) as sql:
            attached = await loops.attach_objects(tx, [(r.id, r.incarnation, f"o-{r.id}") for r in began])
    assert attached == {r.id for r in rows}
    assert len(sql) == 1, sql
    async with store.tx(readonly=True) as tx:
        assert {(await loops.get_loop(tx, r.id)).object_id for r in rows} == {f"o-{r.id}" for r in rows}


async def test_attach_objects_on_postgresql_reads_the_store_clock_in_its_one_statement(
    harness_runner: Any, store_url: str,
) -> None:
    """issue 16 (a restart at N = 10,000 on PostgreSQL): with the store clock not injected and not yet read by the
    transaction, step 4 for a batch is still one statement — the clock read in the UPDATE, not a SELECT before it —
    so the node can run it without BEGIN and COMMIT (``Store.single``): 1 round trip a batch, not 4."""
    from wakeful.harness.store.core import Store

    if not store_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's statement")
    store = await Store.open(store_url)  # the real store clock
    try:
        first = await loop_row(store)
        async with store.tx() as tx:
            rows = [first, await loops.insert_loop(
                tx, group_id=first.group_id, agent_id=first.agent_id, session_id=first.session_id,
                artifact_sha256=first.artifact_sha256, config={}, creator=first.creator)]
            began = await loops.begin_incarnations(tx, [r.id for r in rows], node_id="node_a")
        before = {r.id: r.updated_ms for r in began}
        with counting_statements(store) as sql:
            attached = await store.single(
                lambda tx: loops.attach_objects(tx, [(r.id, r.incarnation, f"o-{r.id}") for r in began]))
        assert attached == {r.id for r in rows}
        assert len(sql) == 1, sql  # previously 2: the clock's SELECT, then the UPDATE
        async with store.tx(readonly=True) as tx:
            after = {r.id: await loops.get_loop(tx, r.id) for r in rows}
        assert {a.object_id for a in after.values()} == {f"o-{r.id}" for r in rows}
        assert all(after[i].updated_ms >= before[i] for i in before)
        assert len({a.updated_ms for a in after.values()}) == 1  # one clock reading for the statement
    finally:
        await store.close()


async def test_a_read_of_several_loops_finds_the_column_positions_once(store: Any, monkeypatch: Any) -> None:
    """issue 16 (a create burst's replay and bridge reads): ``find_loops`` finds where each column is in its result
    once, not once per row (a row's ``_fields`` builds a key view each time), and answers the same Loops."""
    first = await _loop(store)
    async with store.tx() as tx:
        more = [await loops.insert_loop(
            tx, group_id=first.group_id, agent_id=first.agent_id, session_id=first.session_id,
            artifact_sha256=first.artifact_sha256, config={"n": n}, creator=first.creator) for n in range(2)]
    ids = [first.id, *(r.id for r in more)]
    found_by = record_calls(monkeypatch, loops, "_getter")
    async with store.tx(readonly=True) as tx:
        found = await loops.find_loops(tx, ids)
    assert len(found_by) == 1
    assert found == {r.id: r for r in (first, *more)}


async def test_conditional_update_and_json_columns(store: Any, store_clock: Any) -> None:
    loop = await _loop(store)
    store_clock.advance(s=2)
    async with store.tx() as tx:
        assert await loops.update_loop(tx, loop.id, where_incarnation=1, failure="x") is False
        assert await loops.update_loop(
            tx,
            loop.id,
            where_incarnation=0,
            where_state="active",
            checkpoint={"n": [1, "é"]},
            checkpoint_bytes=13,
        )
        row = await loops.get_loop(tx, loop.id, for_update=True)
    assert (
        row.checkpoint == {"n": [1, "é"]} and row.failure is None and row.updated_ms == loop.created_ms + 2000
    )
    async with store.tx() as tx:
        await loops.update_loop(tx, loop.id, checkpoint=None)
        assert (await loops.get_loop(tx, loop.id)).checkpoint is None
    with pytest.raises(ValueError):
        async with store.tx() as tx:
            await loops.update_loop(tx, loop.id, no_such_column=1)


async def test_delete_cascades_and_not_found(store: Any) -> None:
    loop = await _loop(store)
    async with store.tx() as tx:
        await loops.append_logs(tx, loop.id, [LogLine(1, 1, "guest", "hello")])
        await loops.add_transition(
            tx,
            loop.id,
            from_state=None,
            from_reason=None,
            to_state="active",
            to_reason=None,
            incarnation=0,
            actor="operator",
        )
        await tx.execute(
            schema.loop_event.insert().values(
                loop_id=loop.id,
                event_id="e1",
                group_id=loop.group_id,
                topic="t",
                payload="{}",
                payload_sha256="0" * 64,
                envelope_bytes=40,
                status="pending",
                source="api",
                received_ms=1,
            )
        )
        assert await loops.delete_loop(tx, loop.id) is True
        assert await loops.delete_loop(tx, loop.id) is False
        for table in (schema.loop_event, schema.loop_log, schema.loop_transition):
            assert (await tx.execute(sa.select(sa.func.count()).select_from(table))).scalar_one() == 0
    with pytest.raises(NotFound):
        async with store.tx(readonly=True) as tx:
            await loops.get_loop(tx, loop.id)


async def test_log_retention_keeps_newest_200_and_cuts_long_lines(store: Any) -> None:
    loop = await _loop(store)
    for batch in range(3):
        lines = [LogLine(batch * 100 + i, 1, "guest", f"line {batch * 100 + i}") for i in range(100)]
        async with store.tx() as tx:
            await loops.append_logs(tx, loop.id, lines)
    async with store.tx() as tx:
        await loops.append_logs(tx, loop.id, [LogLine(999, 1, "harness", "x" * 5000)])
        await loops.add_dropped_logs(tx, loop.id, 7)
        kept = await loops.list_logs(tx, loop.id)
        later = await loops.list_logs(tx, loop.id, after_seq=kept[-3].seq)
        dropped = (await loops.get_loop(tx, loop.id)).dropped_logs
    assert len(kept) == 200 and kept[0].text == "line 101" and len(kept[-1].text) == 1024
    assert [ln.text for ln in later][0] == "line 299" and len(later) == 2
    assert dropped == 7


async def test_transition_retention_keeps_newest_100(store: Any) -> None:
    loop = await _loop(store)
    async with store.tx() as tx:
        for inc in range(105):
            await loops.add_transition(
                tx,
                loop.id,
                from_state="active",
                from_reason=None,
                to_state="active",
                to_reason=None,
                incarnation=inc,
                actor="system",
                detail="d" * 3000,
            )
        kept = await loops.list_transitions(tx, loop.id)
    assert len(kept) == 100 and [t.incarnation for t in kept] == list(range(5, 105))
    assert len(kept[0].detail or "") == 2000


async def test_list_filters(store: Any) -> None:
    loop = await _loop(store)
    async with store.tx() as tx:
        second = await loops.insert_loop(
            tx,
            group_id=loop.group_id,
            agent_id=loop.agent_id,
            session_id=loop.session_id,
            artifact_sha256=loop.artifact_sha256,
            config={},
            creator="operator",
            name="second",
            state="paused",
            pause_reason="quota",
        )
        active = await loops.list_loops(tx, agent_id=loop.agent_id, state="active")
        every = await loops.list_loops(tx, group_id=loop.group_id)
        first_only = await loops.list_loops(tx, group_id=loop.group_id, limit=1)
    assert [x.id for x in active] == [loop.id]
    assert [x.id for x in every] == [loop.id, second.id] and [x.id for x in first_only] == [loop.id]
    assert second.activated_ms is None


async def test_a_page_of_a_group_is_read_in_index_order_not_sorted(store: Any) -> None:
    """issue 16: ``loops.list`` pages (a group's Loops in id order after a cursor) read through the index on
    (group_id, id): the store walks the page's rows in order instead of reading and sorting every Loop of the
    group for each page (the harness bench's listing of 10,000 Loops after a restart was O(N² / limit) rows)."""
    loop = await _loop(store)
    stmt = loops.page_query(group_id=loop.group_id, limit=201, after="lp_0", state="active")
    async with store.tx(readonly=True) as tx:
        sql = str(stmt.compile(dialect=tx.conn.dialect, compile_kwargs={"literal_binds": True}))
        if store.dialect == "sqlite":
            plan = " | ".join(str(r[-1]) for r in await tx.execute(sa.text("EXPLAIN QUERY PLAN " + sql)))
            assert "loop_group_id_id" in plan and "TEMP B-TREE" not in plan, plan
        else:  # a table this small is scanned by choice: forbid scans and sorts so the index must serve the order
            await tx.execute(sa.text("SET LOCAL enable_seqscan = off"))
            await tx.execute(sa.text("SET LOCAL enable_sort = off"))
            await tx.execute(sa.text("SET LOCAL enable_bitmapscan = off"))
            plan = " | ".join(str(r[0]) for r in await tx.execute(sa.text("EXPLAIN " + sql)))
            assert "loop_group_id_id" in plan and "Sort" not in plan, plan
        page = loops.loops_from_rows(await tx.execute(stmt))
    assert [x.id for x in page] == [loop.id]


async def test_a_batch_of_incarnation_bumps_reads_its_own_rows_only(store: Any) -> None:
    """issue 16: §4.3 step 1 for a batch reads the batch's rows by their ids. With ``id IN (…) AND state =
    'active'`` a PostgreSQL store without statistics yet (fresh: no ANALYZE) was planned on the state index, reading
    every active Loop of the store for each batch of a restart. Counted on PostgreSQL as the rows of ``loop`` the
    statement read."""
    first = await loop_row(store)
    async with store.tx() as tx:
        rows = [first] + [await loops.insert_loop(
            tx, group_id=first.group_id, agent_id=first.agent_id, session_id=first.session_id,
            artifact_sha256=first.artifact_sha256, config={}, creator=first.creator) for _ in range(39)]
    batch = sorted(r.id for r in rows)[:4]
    async with store.tx() as tx:
        if store.dialect == "postgresql":  # 40 rows fit a page, which is scanned whole by choice: as at N = 10,000
            await tx.execute(sa.text("SET LOCAL enable_seqscan = off"))
        before = await _loop_rows_read(tx)
        bumped = await loops.begin_incarnations(tx, batch, node_id="node_a")
        read = await _loop_rows_read(tx) - before
    assert sorted(r.id for r in bumped) == batch and {r.incarnation for r in bumped} == {1}
    if store.dialect == "postgresql":
        assert read <= 2 * len(batch), read


async def _loop_rows_read(tx: Any) -> int:
    """Rows of ``loop`` read so far in this transaction, by scans and index fetches (PostgreSQL; 0 on SQLite)."""
    if tx.dialect != "postgresql":
        return 0
    value = (await tx.execute(sa.text(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
        "WHERE relname = 'loop' AND schemaname = current_schema()"))).scalar()
    return int(value or 0)
