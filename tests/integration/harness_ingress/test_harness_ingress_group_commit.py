"""Group commit of admitted events (issue 16), on SQLite and PostgreSQL, in store and scheduler terms.

Admissions queued while a batch commits go into the next transaction together: fewer commits than events, and
each request still gets its own §10.2 answer — duplicates (with and without a payload mismatch), the mailbox
bound, an inactive Loop, a Loop out of scope — exactly as if it had been admitted alone, and none before the
transaction holding its event committed. With the Loop resident, the committed events reach the object without
a replay read of the store, in admission order."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event as sa_event
from support.calls import record_calls
from support.commit_gate import Gate
from support.ingress_harness import counter_loop, counting_statements, event_rows, seen, statuses
from support.loops_harness import started, until

from wakeful.harness.config import Limits
from wakeful.harness.errors import LoopMailboxFull, LoopNotActive, NotFound
from wakeful.harness.intake import Intake
from wakeful.harness.node import Node
from wakeful.harness.store import Store, jsontext


async def _until_waiting(intake: Intake, n: int) -> None:
    while intake.waiting < n:
        await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion


async def _detached(store_url: str, clock: Any, data: Path, compile_c: Any) -> tuple[Store, Intake, dict[str, str]]:
    """Two tenants' counter Loops (the second paused), then a node over the same store that runs none of them:
    only admissions write, so every commit counted is an admission batch."""
    h = await started(store_url, clock, data, limits=Limits(pending_events=4))
    try:
        group, _, _, loop_id = await counter_loop(h, compile_c, name="a1")
        other_group, _, _, paused = await counter_loop(h, compile_c, name="b1")
        await h.pause_loop(paused)
    finally:
        await h.stop()
    store = await Store.open(store_url, clock=clock)
    node = Node(store, h.config)
    return store, Intake(node), {"group": group, "loop": loop_id, "other_group": other_group, "paused": paused}


async def test_one_batch_answers_each_admission_on_its_own(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    store, intake, t = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    try:
        loop_id, group = t["loop"], t["group"]

        def admit(event_id: str, payload: Any = None, *, loop: str = loop_id, group_id: str | None = group) -> Any:
            return asyncio.create_task(intake.admit(loop_id=loop, topic="t", payload=payload, event_id=event_id,
                                                    source="api", group_id=group_id))

        gate = Gate()
        store.before_commit.append(gate)
        first = admit("e0", {"n": 0})
        await gate.entered.wait()
        batch = [
            admit("e1", {"n": 1}),
            admit("e1", {"n": 1}),  # a duplicate of an event admitted earlier in the same transaction
            admit("e1", {"n": 9}),  # … with another payload
            admit("e2", {"n": 2}),
            admit("e3", {"n": 3}),  # the 4th pending event: the bound
            admit("e4", {"n": 4}),  # mailbox full
            admit("e3", {"n": 3}),  # a duplicate is answered before the bound is checked (§10.2 step 3)
            admit("p1", loop=t["paused"], group_id=t["other_group"]),  # not active
            admit("x1", group_id=t["other_group"]),  # another group's Loop: not found
            admit("e5", {"n": 5}),  # still full
        ]
        await _until_waiting(intake, len(batch))
        commits = store.commits
        assert not first.done() and not any(task.done() for task in batch)  # none answered before its commit
        assert await event_rows(store, loop_id) == []
        gate.release.set()
        assert (await first)["duplicate"] is False
        answers = await asyncio.gather(*batch, return_exceptions=True)
        assert store.commits - commits == 2  # the held batch and one for the other ten
        assert answers[:5] == [
            {"status": "accepted", "event_id": "e1", "duplicate": False},
            {"status": "accepted", "event_id": "e1", "duplicate": True},
            {"status": "accepted", "event_id": "e1", "duplicate": True, "payload_mismatch": True},
            {"status": "accepted", "event_id": "e2", "duplicate": False},
            {"status": "accepted", "event_id": "e3", "duplicate": False},
        ]
        assert isinstance(answers[5], LoopMailboxFull) and answers[5].details == {"retry_after_s": 5}
        assert answers[6] == {"status": "accepted", "event_id": "e3", "duplicate": True}
        assert isinstance(answers[7], LoopNotActive) and answers[7].details["state"] == "paused"
        assert isinstance(answers[8], NotFound)
        assert isinstance(answers[9], LoopMailboxFull)
        rows = await event_rows(store, loop_id)
        assert [r.event_id for r in rows] == ["e0", "e1", "e2", "e3"]  # admission order kept in received_ms
        assert len({r.received_ms for r in rows}) == 4
        assert [r.payload for r in rows][1] == '{"n":1}'  # the first payload is kept
        assert await event_rows(store, t["paused"]) == []
    finally:
        await store.close()


async def test_a_refusal_in_a_batch_does_not_fail_the_others_and_a_lone_admission_commits_at_once(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    store, intake, t = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    try:
        commits = store.commits
        alone = await intake.admit(loop_id=t["loop"], topic="t", payload=None, event_id="solo", source="api")
        assert alone["duplicate"] is False and store.commits - commits == 1  # no wait for company
        results = await asyncio.gather(*(intake.admit(
            loop_id=t["paused"] if n % 2 else t["loop"], topic="t", payload=n, event_id=f"m{n}", source="api")
            for n in range(6)), return_exceptions=True)
        assert [type(r).__name__ if isinstance(r, Exception) else r["event_id"] for r in results] == [
            "m0", "LoopNotActive", "m2", "LoopNotActive", "m4", "LoopNotActive"]
        assert {r.event_id for r in await event_rows(store, t["loop"])} == {"solo", "m0", "m2", "m4"}
    finally:
        await store.close()


async def test_events_reach_a_resident_loop_in_order_without_a_replay_read(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, _, _, loop_id = await counter_loop(h, compile_c)
        await h.node.settle()
        with counting_statements(h.store) as sql:
            answers = await asyncio.gather(*(h.intake.admit(
                loop_id=loop_id, topic="t", payload={"n": n}, event_id=f"r{n:02d}", source="api", group_id=group)
                for n in range(12)))
            assert all(a["duplicate"] is False for a in answers)

            async def all_acked() -> bool:
                return set((await statuses(h, loop_id)).values()) == {"acked"} and len(await seen(h, loop_id)) == 12

            await until(all_acked)
        rows = await event_rows(h, loop_id)
        assert await seen(h, loop_id) == [r.event_id for r in rows]  # delivered in admission order
        assert all(r.first_delivered_ms is not None and r.deadline_ms == r.first_delivered_ms + 900_000
                   for r in rows)  # the delivery stamp of §11, written for the handed-off events
        replay_reads = [s for s in sql if s.startswith("SELECT loop_event.event_id, loop_event.topic, loop_event.payload")]
        assert replay_reads == []  # no pending-event read: every event was handed over after its commit
    finally:
        await h.stop()


async def test_the_scope_check_of_a_resident_loop_reads_nothing_and_a_deleted_loop_is_read_again(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, agent, _, loop_id = await counter_loop(h, compile_c)
        other_group, other_agent, _, _ = await counter_loop(h, compile_c, name="b1")
        await h.node.settle()
        with counting_statements(h.store) as sql:  # not even a first read: the node loaded its row (issue 16)
            await h.intake.loop_in_scope(group, loop_id, agent)
            await h.intake.loop_in_scope(group, loop_id, None)
            for wrong_group, wrong_agent in ((other_group, None), (group, other_agent)):
                with pytest.raises(NotFound):
                    await h.intake.loop_in_scope(wrong_group, loop_id, wrong_agent)
        assert sql == []  # answered from what the node knows of its resident Loop
        await h.delete_loop(loop_id)
        await h.node.settle()
        assert h.node.resident(loop_id) is None
        with counting_statements(h.store) as sql, contextlib.suppress(NotFound):
            await h.intake.loop_in_scope(group, loop_id, agent)
        assert sql  # no longer resident: the store is asked again
    finally:
        await h.stop()


async def test_the_delivery_stamp_of_a_handed_off_event_is_written_by_its_insert(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """No write of its own for §11's stamp of an event handed to the object after its commit; an event whose
    hand-off is refused (the object's mailbox full: four envelopes of 15 KB handed over at once — the first may go
    straight to a guest that waits, two fill the 32 KiB mailbox, so at least the last is refused whether or not the
    guest is still busy with b0) is stamped again by the replay that delivers it."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, _, _, loop_id = await counter_loop(h, compile_c)
        await h.node.settle()
        big = "x" * 15_000

        def admit(n: int) -> Any:
            return asyncio.create_task(h.intake.admit(loop_id=loop_id, topic="t", payload={"n": n, "pad": big},
                                                      event_id=f"b{n}", source="api", group_id=group))

        with counting_statements(h.store) as sql:
            gate = Gate()
            h.store.before_commit.append(gate)
            first = admit(0)
            await gate.entered.wait()
            batch = [admit(n) for n in range(1, 5)]  # one batch: handed over back to back after its commit
            await _until_waiting(h.intake, len(batch))
            gate.release.set()
            answers = [await first, *await asyncio.gather(*batch)]
            h.store.before_commit.remove(gate)
            assert all(a["duplicate"] is False for a in answers)

            async def all_acked() -> bool:
                await h.node.replay(loop_id)  # the next pass of §11 (a refused event waits for one)
                return set((await statuses(h, loop_id)).values()) == {"acked"} and len(await seen(h, loop_id)) == 5

            await until(all_acked)
        rows = await event_rows(h, loop_id)
        assert await seen(h, loop_id) == ["b0", "b1", "b2", "b3", "b4"]
        assert all(r.first_delivered_ms is not None and r.deadline_ms == r.first_delivered_ms + 900_000
                   for r in rows)
        stamps = [s for s in sql if s.startswith("UPDATE loop_event SET first_delivered_ms")]
        # only the refused ones (one or two of the four), each stamped again by the replay that delivers it
        assert 1 <= len(stamps) <= 2 and all(" OR " in s for s in stamps)
        res = h.node.resident(loop_id)
        assert res is not None and not res.stamp_again
    finally:
        await h.stop()


class _CountingIds(dict[str, int]):
    """The Resident's ``delivered`` map, counting how often an id is looked up in it."""

    lookups = 0

    def __contains__(self, key: object) -> bool:
        type(self).lookups += 1
        return super().__contains__(key)


async def test_a_batch_plans_the_hand_off_of_a_loops_events_looking_at_each_pending_id_once(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """Issue 16: each event of a batch is handed to the resident object when every older pending event of its Loop
    reached the object or is handed ahead of it; a batch of n events for one Loop looked at the whole pending list
    for every event (n²/2 lookups, and a copy of the list each). Now each pending id is looked at once per batch."""
    h = await started(store_url, store_clock, tmp_path / "data", limits=Limits(pending_events=128))
    try:
        group, _, _, loop_id = await counter_loop(h, compile_c)
        await h.node.settle()
        res = h.node.resident(loop_id)
        assert res is not None
        res.delivered = _CountingIds(res.delivered)
        gate = Gate()
        h.store.before_commit.append(gate)
        first = asyncio.create_task(h.intake.admit(loop_id=loop_id, topic="t", payload=0, event_id="h0",
                                                   source="api", group_id=group))
        await gate.entered.wait()
        batch = [asyncio.create_task(h.intake.admit(loop_id=loop_id, topic="t", payload=n, event_id=f"h{n}",
                                                    source="api", group_id=group)) for n in range(1, 61)]
        await _until_waiting(h.intake, len(batch))
        planned = Gate()  # the batch is held after its unit planned the hand-offs, before its COMMIT
        h.store.before_commit.remove(gate)
        h.store.before_commit.append(planned)
        _CountingIds.lookups = 0
        gate.release.set()
        await first
        await planned.entered.wait()
        lookups = _CountingIds.lookups  # h0's hand-off and the batch's planning pass
        h.store.before_commit.remove(planned)
        planned.release.set()
        answers = await asyncio.gather(*batch)
        assert all(a["duplicate"] is False for a in answers)
        rows = {r.event_id: r for r in await event_rows(h, loop_id)}
        assert all(rows[f"h{n}"].first_delivered_ms is not None for n in range(1, 61))  # all handed over
        assert lookups <= 61 + 2  # one per pending id (h0 and the batch's own); was ~1,800
    finally:
        await h.stop()


async def test_an_event_handed_to_the_resident_object_is_not_decoded_again(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 16: the hand-off after the commit gave the runtime the stored payload text decoded once more (the
    body was parsed already); it gives the admitted payload, which the runtime copies, and the guest gets the same
    events in the same order."""
    h = await started(store_url, store_clock, tmp_path / "data")
    try:
        group, _, _, loop_id = await counter_loop(h, compile_c)
        await h.node.settle()
        decoded = record_calls(monkeypatch, jsontext, "decode")
        payloads = [{"n": n, "mark": "hand-off", "x": [1.5, -0.0, None, True]} for n in range(3)]
        for n, payload in enumerate(payloads):
            answer = await h.intake.admit(loop_id=loop_id, topic="t", payload=payload, event_id=f"d{n}",
                                          source="api", group_id=group)
            assert answer["duplicate"] is False
            payload["n"] = -1  # the caller's value changes after its answer: the guest got its own copy

        async def all_acked() -> bool:
            return set((await statuses(h, loop_id)).values()) == {"acked"} and len(await seen(h, loop_id)) == 3

        await until(all_acked)
        assert await seen(h, loop_id) == ["d0", "d1", "d2"]
        rows = await event_rows(h, loop_id)
        assert all(r.first_delivered_ms is not None for r in rows)  # handed over, not replayed
        assert [t for t in decoded if isinstance(t, str) and "hand-off" in t] == []
    finally:
        await h.stop()


async def test_a_postgresql_batch_inserts_its_events_in_one_execution(
    harness_runner: Any, store_url: str, store_clock: Any, tmp_path: Path, compile_c: Any,
) -> None:
    """A batch's new events are one INSERT with one parameter set (the columns as arrays), not an executemany that
    the server runs — and plans — once per event; the rows, their order and the duplicates' answers are the same."""
    if not store_url.startswith("postgresql"):
        pytest.skip("executions on the PostgreSQL server")
    store, intake, t = await _detached(store_url, store_clock, tmp_path / "data", compile_c)
    inserts: list[tuple[bool, int]] = []  # (executemany, parameter sets) of each INSERT INTO loop_event

    def count(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        if statement.lstrip().startswith("INSERT INTO loop_event"):
            inserts.append((executemany, len(params) if executemany else 1))

    try:
        def admit(event_id: str) -> Any:
            return asyncio.create_task(intake.admit(loop_id=t["loop"], topic="t", payload={"e": event_id},
                                                    event_id=event_id, source="api", group_id=t["group"]))

        gate = Gate()
        store.before_commit.append(gate)
        first = admit("e0")
        await gate.entered.wait()
        batch = [admit("e1"), admit("e2"), admit("e1"), admit("e3")]
        await _until_waiting(intake, len(batch))
        sa_event.listen(store.engine.sync_engine, "before_cursor_execute", count)
        try:
            gate.release.set()
            await first
            answers = await asyncio.gather(*batch)
        finally:
            sa_event.remove(store.engine.sync_engine, "before_cursor_execute", count)
        assert [a["duplicate"] for a in answers] == [False, False, True, False]
        assert inserts == [(False, 1)], inserts  # base: [(True, 3)] — three executions on the server
        rows = await event_rows(store, t["loop"])
        assert [r.event_id for r in rows] == ["e0", "e1", "e2", "e3"]
        assert [r.payload for r in rows][1:] == ['{"e":"e1"}', '{"e":"e2"}', '{"e":"e3"}']
        assert len({r.received_ms for r in rows}) == 4 and all(r.status == "pending" for r in rows)
    finally:
        await store.close()
