"""``loop.ack`` as a batch (issue 16), on SQLite and PostgreSQL, in store terms: the acks waiting together are
one unit of the group commit with a fixed number of statements for the whole batch, and each ack still gets the
answer of harness.md §9.6 it would get alone — acked once, a duplicate (also of an ack earlier in the same batch),
``unknown_event`` for an unknown or discarded id, ``stale_incarnation`` / ``not_active`` from the fence — and
none is answered before the transaction holding it committed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.commit_gate import Gate
from support.harness_fixtures import pg_url_with_schema
from support.ingress_harness import counter_loop, counting_statements, event_rows, executed_statements
from support.loops_harness import started

from wakeful.harness import selfcalls
from wakeful.harness.config import Limits
from wakeful.harness.errors import HostCallRefused
from wakeful.harness.intake import Intake
from wakeful.harness.node import Node
from wakeful.harness.store import Store, schema

E, L = schema.loop_event, schema.loop




async def _incarnation(store: Store, loop_id: str) -> int:
    async with store.tx(readonly=True) as tx:
        return int((await tx.execute(sa.select(L.c.incarnation).where(L.c.id == loop_id))).scalar_one())


async def test_acks_waiting_together_are_one_batch_of_three_statements_each_answered_as_alone(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data", limits=Limits(pending_events=64))
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c, name="a1")
        _, _, _, other = await counter_loop(h, compile_c, name="a2")
        _, _, _, paused = await counter_loop(h, compile_c, name="b1")
        await h.pause_loop(paused)
    finally:
        await h.stop()
    store = await Store.open(store_url, clock=store_clock)  # a node that runs none of them: only acks write
    intake = Intake(Node(store, h.config))
    try:
        for target in (loop_id, other):
            for n in range(12):
                await intake.admit(loop_id=target, topic="t", payload=n, event_id=f"e{n}", source="api")
        async with store.tx() as tx:
            await tx.execute(sa.update(E).where(E.c.loop_id == loop_id, E.c.event_id == "e11").values(
                status="discarded"))
        inc, other_inc = await _incarnation(store, loop_id), await _incarnation(store, other)
        await selfcalls.ack(store, loop_id, inc, {"event_id": "e0"})  # acked before the batch

        def ack(event_id: str, *, loop: str = loop_id, incarnation: int = inc) -> Any:
            return asyncio.create_task(selfcalls.ack(store, loop, incarnation, {"event_id": event_id}))

        gate = Gate()
        store.before_commit.append(gate)
        first = ack("e1")
        await gate.entered.wait()
        batch = [ack(f"e{n}") for n in range(2, 10)] + [
            ack("e2"),  # acked earlier in the same batch: a duplicate
            ack("e0"),  # acked before: a duplicate
            ack("nope"),  # unknown
            ack("e11"),  # discarded
            ack("e3", incarnation=inc + 1),  # an incarnation that is not the Loop's: stale
            ack("e0", loop=paused, incarnation=await _incarnation(store, paused)),  # not active
        ] + [ack(f"e{n}", loop=other, incarnation=other_inc) for n in range(1, 7)]  # another Loop, same batch
        acks = store.lane(selfcalls.ACK_LANE)
        while acks.collecting("loop.ack") + acks.queued < len(batch):  # (in a unit or queued)
            await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
        assert not first.done() and not any(task.done() for task in batch)  # none answered before its commit
        commits = store.commits
        with counting_statements(store) as sql:
            gate.release.set()
            assert await first == {"status": "acked", "event_id": "e1", "duplicate": False}
            answers = await asyncio.gather(*batch, return_exceptions=True)
        assert store.commits - commits == 2  # the held transaction and one for the twenty acks
        batch_sql = [s for s in sql if s.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT", "DELETE"))]
        assert len([s for s in batch_sql if s.lstrip().upper().startswith("UPDATE")]) == 1  # one UPDATE for all
        assert len(batch_sql) <= 4  # the fence, the statuses, the store clock, the UPDATE — not three per ack
        assert answers[:8] == [{"status": "acked", "event_id": f"e{n}", "duplicate": False} for n in range(2, 10)]
        assert answers[8:10] == [{"status": "acked", "event_id": "e2", "duplicate": True},
                                 {"status": "acked", "event_id": "e0", "duplicate": True}]
        assert [(type(a).__name__, a.code) for a in answers[10:14] if isinstance(a, HostCallRefused)] == [
            ("HostCallRefused", "unknown_event"), ("HostCallRefused", "unknown_event"),
            ("HostCallRefused", "stale_incarnation"), ("HostCallRefused", "not_active")]
        assert answers[14:] == [{"status": "acked", "event_id": f"e{n}", "duplicate": False} for n in range(1, 7)]
        rows = {r.event_id: r for r in await event_rows(store, loop_id)}
        assert {i for i, r in rows.items() if r.status == "acked"} == {f"e{n}" for n in range(10)}
        assert rows["e11"].status == "discarded" and rows["e10"].status == "pending"
        assert {r.acked_incarnation for r in rows.values() if r.status == "acked"} == {inc}
        others = {r.event_id: r for r in await event_rows(store, other)}
        assert {i for i, r in others.items() if r.status == "acked"} == {f"e{n}" for n in range(1, 7)}
        assert {r.acked_incarnation for r in others.values() if r.status == "acked"} == {other_inc}
    finally:
        await store.close()


@pytest.mark.integration
async def test_on_postgresql_an_ack_batch_is_two_statements_of_one_text_whatever_its_size(
    harness_runner: Any, pg_schema: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """Issue 16: the Loop rows with the store clock (PostgreSQL's own here: no statement of its own for it), then
    one UPDATE of the pending events returning those it acked, with array parameters — a batch of 3 acks and one
    of 8 send the same two texts. The previous code sent four (the rows, the events FOR UPDATE, the clock, the
    UPDATE), their texts changing with the batch's size. And both are the same statement objects in every batch, run
    with the batch's values as bind parameters (built anew for each batch before ingest-pg)."""
    url = pg_url_with_schema(pg_schema)
    h = await started(url, store_clock, tmp_path / "data", limits=Limits(pending_events=64))
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c, name="a1")
    finally:
        await h.stop()
    store = await Store.open(url)  # PostgreSQL's clock; a node that runs the Loop not: only acks write
    intake = Intake(Node(store, h.config))
    try:
        for n in range(12):
            await intake.admit(loop_id=loop_id, topic="t", payload=n, event_id=f"e{n}", source="api")
        inc = await _incarnation(store, loop_id)
        texts: list[list[str]] = []
        built: list[list[Any]] = []
        for ids in (["e1", "e2", "e3"], [f"e{n}" for n in range(4, 12)]):
            gate = Gate()
            store.before_commit.append(gate)
            held = asyncio.create_task(selfcalls.ack(store, loop_id, inc, {"event_id": "e0"}))
            await gate.entered.wait()
            batch = [asyncio.create_task(selfcalls.ack(store, loop_id, inc, {"event_id": i})) for i in ids]
            acks = store.lane(selfcalls.ACK_LANE)
            while acks.collecting("loop.ack") + acks.queued < len(batch):
                await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
            with counting_statements(store) as sql, executed_statements(store) as statements:
                store.before_commit.remove(gate)
                gate.release.set()
                await held
                answers = await asyncio.gather(*batch)
            assert answers == [{"status": "acked", "event_id": i, "duplicate": False} for i in ids]
            assert len(sql) == 2 and sql[1].startswith("UPDATE loop_event"), sql
            texts.append(sql)
            built.append(statements)
        assert texts[0] == texts[1]
        assert len(built[0]) == 2 and all(a is b for a, b in zip(*built)), built
        assert {r.status for r in await event_rows(store, loop_id)} == {"acked"}
    finally:
        await store.close()



async def test_one_ack_batch_over_loops_of_different_incarnations_stores_each_its_own(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """An ack batch records each event's acking incarnation, also when the batch's Loops are at different ones
    (on SQLite the batch's UPDATE takes one incarnation as a parameter when all agree — issue 16 — and a CASE over
    the Loops otherwise)."""
    h = await started(store_url, store_clock, tmp_path / "data", limits=Limits(pending_events=64))
    try:
        _, _, _, first = await counter_loop(h, compile_c, name="a1")
        _, _, _, second = await counter_loop(h, compile_c, name="a2")
    finally:
        await h.stop()
    store = await Store.open(store_url, clock=store_clock)
    intake = Intake(Node(store, h.config))
    try:
        async with store.tx() as tx:
            await tx.execute(sa.update(L).where(L.c.id == second).values(incarnation=L.c.incarnation + 4))
        incs = {first: await _incarnation(store, first), second: await _incarnation(store, second)}
        assert incs[first] != incs[second]
        for target in (first, second):
            for n in range(3):
                await intake.admit(loop_id=target, topic="t", payload=n, event_id=f"e{n}", source="api")
        gate = Gate()
        store.before_commit.append(gate)
        held = asyncio.create_task(selfcalls.ack(store, first, incs[first], {"event_id": "e0"}))
        await gate.entered.wait()
        batch = [asyncio.create_task(selfcalls.ack(store, loop, incs[loop], {"event_id": f"e{n}"}))
                 for loop in (first, second) for n in (1, 2)]
        acks = store.lane(selfcalls.ACK_LANE)
        while acks.collecting("loop.ack") + acks.queued < len(batch):
            await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion
        gate.release.set()
        await held
        assert [a["duplicate"] for a in await asyncio.gather(*batch)] == [False] * 4
        for loop in (first, second):
            rows = {r.event_id: r for r in await event_rows(store, loop)}
            assert {i for i, r in rows.items() if r.status == "acked"} == ({"e0", "e1", "e2"} if loop == first
                                                                             else {"e1", "e2"})
            assert {r.acked_incarnation for r in rows.values() if r.status == "acked"} == {incs[loop]}
    finally:
        await store.close()
