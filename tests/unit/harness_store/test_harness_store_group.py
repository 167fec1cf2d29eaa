"""Group commit (issue 16, ``Store.grouped``) on both stores, in store and scheduler terms: units queued while a
batch commits share the next transaction (one commit), no unit is answered before its commit, a typed refusal is
that unit's own answer, and any other failure reruns the batch unit by unit so only the bad unit fails."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from support.commit_gate import Gate

from wakeful.harness.errors import InvalidRequest
from wakeful.harness.store import Store, Tx, groups, schema


async def _names(store: Store) -> list[str]:
    async with store.tx(readonly=True) as tx:
        return sorted((await tx.execute(sa.select(schema.agent_group.c.name))).scalars())


def _create(name: str, *, refuse: bool = False, explode: bool = False) -> Any:
    async def unit(tx: Tx) -> str:
        if refuse:
            raise InvalidRequest(f"{name} refused", field="name")
        group = await groups.create_group(tx, name=name)
        if explode:  # after its write: a failure that is not a typed refusal
            raise RuntimeError(f"{name} exploded")
        return group.name
    return unit




async def _until(check: Any) -> None:
    while not check():
        await asyncio.sleep(0.005)  # polling for a scheduler state, not a timing assertion


async def test_units_queued_behind_a_commit_share_one_transaction(store: Store) -> None:
    gate = Gate()
    store.before_commit.append(gate)
    first = asyncio.create_task(store.grouped(_create("first")))
    await gate.entered.wait()
    rest = [asyncio.create_task(store.grouped(_create(f"g{n:02d}"))) for n in range(20)]
    await _until(lambda: store.grouping.queued == 20)
    commits = store.commits
    assert not first.done() and not any(t.done() for t in rest)  # nothing answered before its commit
    assert await _names(store) == []  # and nothing visible to a reader either
    gate.release.set()
    assert await first == "first"
    assert await asyncio.gather(*rest) == [f"g{n:02d}" for n in range(20)]
    assert store.commits - commits == 2  # the held batch and one batch of 20: fewer commits than units
    assert store.grouping.largest == 20
    assert len(await _names(store)) == 21


async def test_a_unit_is_answered_only_after_its_commit(store: Store) -> None:
    gate = Gate()
    store.before_commit.append(gate)
    task = asyncio.create_task(store.grouped(_create("held")))
    await gate.entered.wait()
    for _ in range(20):  # the transaction stays open as long as the hook holds it: the caller keeps waiting
        await asyncio.sleep(0)
    assert not task.done()
    assert await _names(store) == []
    gate.release.set()
    assert await task == "held"
    assert await _names(store) == ["held"]


async def test_a_typed_refusal_is_its_own_answer_and_the_batch_commits(store: Store) -> None:
    gate = Gate()
    store.before_commit.append(gate)
    first = asyncio.create_task(store.grouped(_create("first")))
    await gate.entered.wait()
    units = [_create("a"), _create("b", refuse=True), _create("c")]
    tasks = [asyncio.create_task(store.grouped(u)) for u in units]
    await _until(lambda: store.grouping.queued == 3)
    commits = store.commits
    gate.release.set()
    await first
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == "a" and results[2] == "c"
    assert isinstance(results[1], InvalidRequest) and results[1].details == {"field": "name"}
    assert store.commits - commits == 2
    assert await _names(store) == ["a", "c", "first"]


async def test_another_failure_reruns_the_batch_unit_by_unit(store: Store) -> None:
    gate = Gate()
    store.before_commit.append(gate)
    first = asyncio.create_task(store.grouped(_create("first")))
    await gate.entered.wait()
    units = [_create("a"), _create("bad", explode=True), _create("c")]
    tasks = [asyncio.create_task(store.grouped(u)) for u in units]
    await _until(lambda: store.grouping.queued == 3)
    gate.release.set()
    await first
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[0] == "a" and results[2] == "c"
    assert isinstance(results[1], RuntimeError)
    assert await _names(store) == ["a", "c", "first"]  # the bad unit's write rolled back, the others committed


async def test_a_failed_commit_fails_every_unit_and_answers_none_as_committed(store: Store) -> None:
    async def broken_commit(tx: Tx) -> None:
        raise RuntimeError("the disk is full")

    store.before_commit.append(broken_commit)
    results = await asyncio.gather(*(store.grouped(_create(f"x{n}")) for n in range(3)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    store.before_commit.clear()
    assert await _names(store) == []


@pytest.mark.parametrize("n", [1, 2])
async def test_a_cancelled_caller_does_not_stop_the_others(store: Store, n: int) -> None:
    gate = Gate()
    store.before_commit.append(gate)
    first = asyncio.create_task(store.grouped(_create("first")))
    await gate.entered.wait()
    tasks = [asyncio.create_task(store.grouped(_create(f"c{i}"))) for i in range(3)]
    await _until(lambda: store.grouping.queued == 3)
    for t in tasks[:n]:
        t.cancel()
    gate.release.set()
    await first
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(d, asyncio.CancelledError) for d in done[:n]) and done[n:] == [f"c{i}" for i in range(n, 3)]
    assert await _names(store) == sorted(["first", *[f"c{i}" for i in range(n, 3)]])
