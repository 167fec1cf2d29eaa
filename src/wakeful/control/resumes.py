"""Resume conditions (control-plane.md §3.4): which deferred items a commit (or the clock) has made resumable.

A firing is committed as ``work.resume`` by ``system`` with operation id ``resume:<item>:<item revision>``, so one
deferral resumes at most once. ``loop_wake:<loop>`` fires on a wake observed after the deferral (an evidence row
of kind ``loop_wake`` on an item backed by that Loop, committed later than the deferral), so a lost post-commit
step is caught by the next evaluation rather than forgotten.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.harness.store.core import Tx
from wakeful.harness.store.schema import loop as LOOP

__all__ = ["due_resumes", "fired"]


async def fired(tx: Tx, goal_id: str, item: dict[str, Any], condition: str, now: int) -> bool:
    kind, _, arg = condition.partition(":")
    if kind in ("work_done", "gate_resolved"):
        other = await rows.load_item(tx, goal_id, arg)
        return other is not None and other["status"] == "done"
    if kind == "time":
        return arg.isdigit() and now >= int(arg)
    if kind == "effect_settled":
        F = S.effect
        stmt = sa.select(F.c.state).where(F.c.goal_id == goal_id, F.c.request_key == arg)
        return (await tx.execute(stmt)).scalar() in ("succeeded", "failed")
    if kind == "loop_active":
        return (await tx.execute(sa.select(LOOP.c.state).where(LOOP.c.id == arg))).scalar() == "active"
    if kind == "loop_wake":
        E, W = S.evidence, S.work_item
        backed = sa.select(W.c.id).where(W.c.goal_id == goal_id, W.c.loop_id == arg)
        stmt = sa.select(sa.func.count()).select_from(E).where(
            E.c.goal_id == goal_id, E.c.kind == "loop_wake", E.c.seq > int(item["status_seq"]),
            E.c.work_item_id.in_(backed))
        return int((await tx.execute(stmt)).scalar_one()) > 0
    return False


async def due_resumes(tx: Tx, goal_id: str, now: int) -> list[tuple[str, int, str]]:
    """``(item id, item revision, condition)`` for each deferred item of the goal with a fired condition."""
    due = []
    for item in await rows.load_items(tx, goal_id, status="deferred"):
        for condition in item["resume_when"]:
            if await fired(tx, goal_id, item, condition, now):
                due.append((str(item["id"]), int(item["revision"]), condition))
                break
    return due
