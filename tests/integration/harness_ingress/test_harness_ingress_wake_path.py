"""The statements of the event → wake path (issue 16, benchmarks.md §2.1 step 6), counted on both stores.

On PostgreSQL every statement of a transaction is a round trip to the server (plus BEGIN and COMMIT), and the path
of a wake is serial transactions: the event's admission, beside it the guest's ack of the event before (the guest
takes the next event only after that ack's commit), then the wake itself. The store clock here is the database's
own (no injected clock): on PostgreSQL reading it is a statement unless it rides on another one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.commit_gate import Gate
from support.ingress_harness import counter_loop, counting_statements, event_rows, round_trips
from support.loops_harness import started

from wakeful.harness import selfcalls
from wakeful.harness.errors import HostCallRefused
from wakeful.harness.intake import Intake
from wakeful.harness.node import Node
from wakeful.harness.store import Store, schema

E, L = schema.loop_event, schema.loop


def _work(sql: list[str]) -> list[str]:
    return [s for s in sql if s.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT", "DELETE", "WITH"))]


async def _detached(store_url: str, clock: Any, data: Path, compile_c: Any) -> tuple[Store, Intake, str, int]:
    """A counter Loop, then a node over the same store (on the database's clock) that runs none: (store, intake,
    loop id, incarnation)."""
    h = await started(store_url, clock, data)
    try:
        _, _, _, loop_id = await counter_loop(h, compile_c, name="a1")
    finally:
        await h.stop()
    store = await Store.open(store_url)
    async with store.tx(readonly=True) as tx:
        inc = int((await tx.execute(sa.select(L.c.incarnation).where(L.c.id == loop_id))).scalar_one())
    return store, Intake(Node(store, h.config)), loop_id, inc


async def test_a_lone_admission_is_three_statements(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """The Loop row locked with the store clock read beside it, the step 3–5 and ordering figures in one read, the
    insert — was six statements on SQLite and seven on PostgreSQL (four reads and a clock of their own)."""
    store, intake, loop_id, _ = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    try:
        await intake.admit(loop_id=loop_id, topic="t", payload=0, event_id="e0", source="api")
        with counting_statements(store) as sql:
            answer = await intake.admit(loop_id=loop_id, topic="t", payload=1, event_id="e1", source="api")
        assert answer == {"status": "accepted", "event_id": "e1", "duplicate": False}
        assert len(_work(sql)) == 3, sql
        with counting_statements(store) as sql:
            again = await intake.admit(loop_id=loop_id, topic="t", payload=2, event_id="e1", source="api")
        assert again == {"status": "accepted", "event_id": "e1", "duplicate": True, "payload_mismatch": True}
        assert len(_work(sql)) == 2, sql  # a duplicate writes nothing
        rows = await event_rows(store, loop_id)
        assert [r.event_id for r in rows] == ["e0", "e1"] and rows[0].received_ms < rows[1].received_ms
        assert [r.payload for r in rows] == ["0", "1"]
    finally:
        await store.close()


async def test_a_lone_ack_is_two_statements_and_a_repeat_three(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """The Loop row fenced and locked with the store clock beside it, one UPDATE of the pending event that returns
    it — was three statements on SQLite, four on PostgreSQL; an ack that finds no pending event reads its status
    (duplicate or unknown) and writes nothing. On PostgreSQL a lone ack on an idle ack lane is one statement (the
    UPDATE fenced on the shared Loop row, committing as it runs); one that acks nothing is then answered by the batch
    unit (a repeat: that statement, then the batch's three)."""
    store, intake, loop_id, inc = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    try:
        for n in range(3):
            await intake.admit(loop_id=loop_id, topic="t", payload=n, event_id=f"e{n}", source="api")
        async with store.tx() as tx:
            await tx.execute(sa.update(E).where(E.c.event_id == "e2").values(status="discarded"))
        pg = store.dialect == "postgresql"
        with counting_statements(store) as sql:
            answer = await selfcalls.ack(store, loop_id, inc, {"event_id": "e0"})
        assert answer == {"status": "acked", "event_id": "e0", "duplicate": False}
        assert len(_work(sql)) == (1 if pg else 2), sql
        with counting_statements(store) as sql:
            repeat = await selfcalls.ack(store, loop_id, inc, {"event_id": "e0"})
        assert repeat == {"status": "acked", "event_id": "e0", "duplicate": True}
        assert len(_work(sql)) == (4 if pg else 3), sql
        for event_id in ("e2", "nope"):  # discarded, unknown
            with pytest.raises(HostCallRefused) as refused:
                await selfcalls.ack(store, loop_id, inc, {"event_id": event_id})
            assert refused.value.code == "unknown_event"
        with pytest.raises(HostCallRefused) as stale:
            await selfcalls.ack(store, loop_id, inc + 1, {"event_id": "e1"})
        assert stale.value.code == "stale_incarnation"
        rows = {r.event_id: r for r in await event_rows(store, loop_id)}
        assert [rows[i].status for i in ("e0", "e1", "e2")] == ["acked", "pending", "discarded"]
        assert rows["e0"].acked_incarnation == inc and rows["e0"].acked_ms >= rows["e0"].received_ms
    finally:
        await store.close()


async def _with_pending(store_url: str, clock: Any, data: Path, compile_c: Any, n: int) -> tuple[Store, str, int]:
    """``_detached``'s store, Loop id and incarnation, with the events e0 … e<n - 1> admitted."""
    store, intake, loop_id, inc = await _detached(store_url, clock, data, compile_c)
    try:
        for i in range(n):
            await intake.admit(loop_id=loop_id, topic="t", payload=i, event_id=f"e{i}", source="api")
    except BaseException:
        await store.close()
        raise
    return store, loop_id, inc


async def test_a_lone_ack_is_one_round_trip_and_one_commit_on_postgresql(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """issue 16 (event → wake): the guest takes its next event only after its ack of the one before committed. A
    lone ack on an idle ack lane was BEGIN, the fenced share with the clock, the UPDATE and COMMIT (four round trips);
    it is now the UPDATE alone, fenced on the Loop row in the same statement, committed as it runs. A stale ack still
    writes nothing and is refused."""
    if "postgresql" not in store_url:
        pytest.skip("SQLite: no round trips to the server")
    store, loop_id, inc = await _with_pending(store_url, store_clock, tmp_path / "data", compile_c, 2)
    try:
        commits = store.commits
        with round_trips(store) as sql:
            answer = await selfcalls.ack(store, loop_id, inc, {"event_id": "e0"})
        assert answer == {"status": "acked", "event_id": "e0", "duplicate": False}
        assert len(sql) == 1 and sql[0].lstrip().upper().startswith("WITH"), sql
        assert store.commits == commits + 1
        with pytest.raises(HostCallRefused) as stale:
            await selfcalls.ack(store, loop_id, inc + 1, {"event_id": "e1"})
        assert stale.value.code == "stale_incarnation"
        rows = {r.event_id: r for r in await event_rows(store, loop_id)}
        assert [rows[i].status for i in ("e0", "e1")] == ["acked", "pending"]
        assert rows["e0"].acked_incarnation == inc and rows["e0"].acked_ms >= rows["e0"].received_ms
        assert store.lane(selfcalls.ACK_LANE).idle
    finally:
        await store.close()


async def test_concurrent_acks_share_commits_while_a_lone_ack_is_in_flight(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """issue 16: the single-statement ack occupies the ack lane while it runs, so the acks that come meanwhile batch
    — session 10's version (``bf8e650``, reverted) let every ack that found no batch running be a commit of its own,
    and under ingest made 1.19 commits per event. Many concurrent acks, twice: at most two commits each round (the
    first ack alone, all the others one batch)."""
    store, intake, loop_id, inc = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    try:
        ids = [f"e{n:02}" for n in range(60)]
        for part in (ids[:30], ids[30:]):  # (a Loop holds at most 32 pending events)
            for event_id in part:
                await intake.admit(loop_id=loop_id, topic="t", payload=0, event_id=event_id, source="api")
            commits = store.commits
            answers = await asyncio.gather(*(selfcalls.ack(store, loop_id, inc, {"event_id": i}) for i in part))
            assert store.commits - commits <= 2, store.commits - commits
            assert answers == [{"status": "acked", "event_id": i, "duplicate": False} for i in part]
            assert store.lane(selfcalls.ACK_LANE).idle
        assert {r.status for r in await event_rows(store, loop_id)} == {"acked"}
    finally:
        await store.close()


async def test_acks_that_come_while_a_single_ack_runs_batch_after_it_on_postgresql(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """issue 16: the acks that come while a single-statement ack is in flight are collected, and their batch unit
    starts only when the single has answered — so the lane stays busy from then on while acks keep coming (one
    single per quiet spell), instead of a single beside every batch (PostgreSQL ingest at N = 1,000 went from 0.08
    to 0.12–0.36 commits per event with the batch running beside the single)."""
    if "postgresql" not in store_url:
        pytest.skip("SQLite: acks are never single statements")
    store, loop_id, inc = await _with_pending(store_url, store_clock, tmp_path / "data", compile_c, 3)
    try:
        lane = store.lane(selfcalls.ACK_LANE)
        entered, release = asyncio.Event(), asyncio.Event()

        async def held(tx: Any) -> bool:  # a single ack in flight that has not answered yet
            entered.set()
            await release.wait()
            return await selfcalls._ack_single(tx, loop_id, inc, "e0")

        first = asyncio.ensure_future(lane.single(held))
        await entered.wait()
        commits = store.commits
        later = [asyncio.ensure_future(selfcalls.ack(store, loop_id, inc, {"event_id": i})) for i in ("e1", "e2")]
        for _ in range(10):  # scheduler turns: the acks collect; a batch beside the single would be queued by now
            await asyncio.sleep(0)
        assert lane.collecting(selfcalls.ACK_LANE) == 2 and not lane.batching and store.commits == commits
        release.set()
        assert await first is True
        assert await asyncio.gather(*later) == [{"status": "acked", "event_id": i, "duplicate": False}
                                                for i in ("e1", "e2")]
        assert store.commits == commits + 2 and lane.idle
    finally:
        await store.close()


async def _until(check: Any) -> bool:
    for _ in range(2000):  # polling for a scheduler state (a guard against a hang, not a timing assertion)
        if await check():
            return True
        await asyncio.sleep(0.005)
    return False


async def test_an_ack_commits_while_an_admission_of_its_loop_waits_at_its_commit_on_postgresql(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """The guest's ack of an event and the admission of the next event of its Loop share the Loop row (both FOR
    SHARE on PostgreSQL): the ack is answered while the admission's transaction still waits at its COMMIT — it
    waited for that commit when the admission held the row FOR UPDATE (the bench's wake step: the low event's ack
    behind the high event's admission). Nothing is answered before its own commit."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite: one writer, no row lock")
    store, intake, loop_id, inc = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    try:
        await intake.admit(loop_id=loop_id, topic="t", payload=0, event_id="low", source="api")
        gate = Gate()
        store.before_commit.append(gate)
        high = asyncio.create_task(intake.admit(loop_id=loop_id, topic="t", payload=1, event_id="high", source="api"))
        await gate.entered.wait()  # the admission holds its Loop row, at its COMMIT
        ack = asyncio.create_task(selfcalls.ack(store, loop_id, inc, {"event_id": "low"}))

        async def acked() -> bool:
            return ack.done()

        assert await _until(acked)
        assert ack.result() == {"status": "acked", "event_id": "low", "duplicate": False}
        assert not high.done()
        gate.release.set()
        assert (await high)["duplicate"] is False
        rows = {r.event_id: r.status for r in await event_rows(store, loop_id)}
        assert rows == {"low": "acked", "high": "pending"}
    finally:
        await store.close()


async def test_two_nodes_admissions_of_one_loop_still_exclude_each_other_on_postgresql(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """Sharing the Loop row, two admissions of one Loop from two nodes are kept apart by the Loop's intake lock (a
    transaction advisory lock): the second waits for the first's commit, then reads what it wrote — the pending
    bound and the admission order hold as when each locked the row FOR UPDATE."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite: one writer")
    store, intake, loop_id, _ = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    other_store = await Store.open(store_url, migrate=False)
    other = Intake(Node(other_store, intake.node.config))
    try:
        gate = Gate()
        store.before_commit.append(gate)
        first = asyncio.create_task(intake.admit(loop_id=loop_id, topic="t", payload=1, event_id="a", source="api"))
        await gate.entered.wait()  # holds the Loop's intake lock, at its COMMIT
        second = asyncio.create_task(other.admit(loop_id=loop_id, topic="t", payload=2, event_id="b", source="api"))

        async def waiting() -> bool:
            async with other_store.tx(readonly=True) as tx:
                return bool((await tx.execute(sa.text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"))).scalar_one())

        assert await _until(waiting)  # the second admission waits for the first one's intake lock
        assert not second.done()
        gate.release.set()
        assert (await first)["duplicate"] is False and (await second)["duplicate"] is False
        rows = await event_rows(store, loop_id)
        assert [r.event_id for r in rows] == ["a", "b"] and rows[0].received_ms < rows[1].received_ms
    finally:
        await other_store.close()
        await store.close()
