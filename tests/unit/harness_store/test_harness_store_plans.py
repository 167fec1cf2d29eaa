"""Query plans of a create's statements on SQLite (issue 16: creates slowed as the store grew). Without statistics
SQLite's planner took the index ``loop_state_updated`` (state, updated_ms, id) for ``state = 'active' AND id IN (…)``
and ``… AND agent_id IN (…)`` — a walk over every active Loop per statement, 4–7 ms a batch of creates at
N = 10,000 — instead of key lookups. Each statement here is run as the store runs it, then explained with its own
text and parameters."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event
from support.store_rows import loop_row, sibling_rows

from wakeful.harness.placement import leases
from wakeful.harness.store import agents, artifacts, loops, quota

pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


async def _plans(store: Any, tx: Any, action: Any) -> list[tuple[str, str]]:
    """(statement, its plan) of each statement ``action`` runs in ``tx``."""
    ran: list[tuple[str, Any]] = []

    def before(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        ran.append((statement, params[0] if executemany else params))

    event.listen(store.engine.sync_engine, "before_cursor_execute", before)
    try:
        await action()
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", before)
    out = []
    for statement, params in ran:
        if not statement.lstrip().upper().startswith(("SELECT", "UPDATE")):
            continue
        rows = (await tx.conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, tuple(params))).all()
        out.append((statement, " / ".join(str(r[-1]) for r in rows)))
    return out


async def test_a_create_batch_reads_and_raises_loops_by_key_not_by_walking_every_active_loop(store: Any) -> None:
    first = await loop_row(store)
    async with store.tx() as tx:
        made = [first] + [await loops.insert_loop(
            tx, group_id=first.group_id, agent_id=first.agent_id, session_id=first.session_id,
            artifact_sha256=first.artifact_sha256, config={}, creator=first.creator) for _ in range(4)]
        ids = [m.id for m in made]

        async def steps() -> None:
            await quota.count_active_by_agent(tx, [first.agent_id, "ag-other-1", "ag-other-2"])
            await quota.count_active(tx, agent_id=first.agent_id)
            began = await loops.begin_incarnations(tx, ids, node_id="node_a")
            # a stale incarnation among them: the attach reads back what it left
            await loops.attach_objects(tx, [(r.id, r.incarnation + (r.id == ids[0]), f"o-{r.id}") for r in began])

        plans = await _plans(store, tx, steps)
    assert len(plans) >= 5, plans
    for statement, plan in plans:
        assert "loop_state_updated" not in plan, (statement, plan)
        assert "SCAN loop" not in plan, (statement, plan)


async def test_pairs_of_a_drain_a_renewal_and_an_artifact_read_search_their_tables_not_scan_them(store: Any) -> None:
    """issue 16 (restart-3s3): SQLite plans a row value ``IN (VALUES …)`` as a scan of the whole table. A drain's
    detach of many incarnations (on the SIGTERM path at N = 10,000), a node's lease renewal and release and a
    create batch's artifact read pass their pairs as one JSON parameter read with ``json_each`` (store/each.py),
    which searches the table's key."""
    first = await loop_row(store)
    async with store.tx() as tx:
        made = await sibling_rows(tx, first, 3)
        began = await loops.begin_incarnations(tx, [m.id for m in made], node_id="node_a")
        a, b, c = [first.agent_id] + [(await agents.create_agent(tx, group_id=first.group_id, name=n)).id
                                      for n in ("b", "c")]
        for agent in (a, b, c):
            await leases.claim(tx, agent, "node_a", 10_000)
        held = {a: 1, b: 1, c: 7}  # c at an epoch it does not hold
        detached: set[str] = set()
        lost: set[str] = set()
        released: set[str] = set()
        resolved: list[Any] = []

        async def steps() -> None:
            nonlocal detached, lost, released, resolved
            stale = [(r.id, r.incarnation + (r.id == began[0].id)) for r in began]
            detached = await loops.detach_objects(tx, stale)
            lost = await leases.renew(tx, "node_a", held, 10_000)
            released = await leases.release(tx, "node_a", held)
            resolved = await artifacts.resolve_artifacts(tx, [
                (first.group_id, first.agent_id, f"sha256:{first.artifact_sha256}"),
                (first.group_id, first.agent_id, "sha256:" + "0" * 64)])

        plans = await _plans(store, tx, steps)
    # the answers are those of the pairs, not of the scan
    assert detached == {r.id for r in began[1:]}
    assert lost == {c} and released == {a, b}
    assert isinstance(resolved[0], artifacts.Artifact) and resolved[0].sha256 == first.artifact_sha256
    assert not isinstance(resolved[1], artifacts.Artifact)
    tables = {"loop": "UPDATE loop", "agent_lease": "UPDATE agent_lease", "artifact": "FROM artifact"}
    seen = set()
    for statement, plan in plans:
        for table, mark in tables.items():
            if mark in statement:
                seen.add(table)
                assert f"SCAN {table}" not in plan.replace(f"SCAN {table}_", ""), (statement, plan)
    assert seen == set(tables), plans
