"""A retry that races its own original (control-plane.md §4.1 steps 1–2, §4.3 #4): the same envelope submitted
several times at once — a client that timed out and retried while the first attempt was still committing — is
applied exactly once on SQLite and PostgreSQL; every other submission answers the identical stored receipt with
``replayed: true``. The same holds for ``goal.create``, whose operation ids are unique per group."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa
from support.control_kernel import make_kit

from wakeful.control import schema as S
from wakeful.control.canonical import canonical

COPIES = 6


def _split(receipts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    fresh = [r for r in receipts if "replayed" not in r]
    replayed = [{k: v for k, v in r.items() if k != "replayed"} for r in receipts if r.get("replayed") is True]
    assert len(fresh) + len(replayed) == len(receipts)
    return fresh, replayed


async def test_concurrent_copies_of_one_envelope_apply_once(store: Any) -> None:
    kit = await make_kit(store)
    item = await kit.add(title="x")
    envelope = {"operation_id": "retry-race", "goal_id": kit.goal_id,
                "command": {"type": "work.update", "item": item, "detail": "once"}, "expected": {"item_revision": 1}}
    receipts = await asyncio.gather(*(kit.control.submit(kit.agents[0], envelope) for _ in range(COPIES)))
    fresh, replayed = _split(list(receipts))
    assert len(fresh) == 1 and len(replayed) == COPIES - 1
    assert {canonical(r) for r in replayed} == {canonical(fresh[0])}
    assert (await kit.control.item(kit.goal_id, item))["revision"] == 2  # applied once
    async with store.tx(readonly=True) as tx:
        K = S.control_commit
        ops = (await tx.execute(sa.select(K.c.operation_id).where(K.c.goal_id == kit.goal_id))).scalars().all()
    assert list(ops).count("retry-race") == 1

    create = {"operation_id": "create-race", "command": {"type": "goal.create", "title": "t", "objective": "o"}}
    made = await asyncio.gather(*(kit.control.submit(kit.person, create) for _ in range(COPIES)))
    fresh, replayed = _split(list(made))
    assert len(fresh) == 1 and {canonical(r) for r in replayed} == {canonical(fresh[0])}
    goals = await kit.control.goals(kit.group_id)
    assert sum(g["title"] == "t" for g in goals) == 1
