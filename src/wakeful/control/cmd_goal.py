"""Goal-level commands (control-plane.md §3.2): goal.create/update/pause/resume/close, agent.register/exclude,
subject.set (with re-assessment, §5) and budget.spend.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.control.applicability import acceptance_status, assess
from wakeful.control.errors import ControlRefused
from wakeful.harness.store import agents as harness_agents

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = [
    "budget_spend", "close", "create", "spend", "exclude", "pause", "reassess", "register", "resume", "subject_set",
    "update",
]


async def create(ctx: Ctx) -> None:
    cmd, actor = ctx.command, ctx.actor
    if actor.kind == "agent":
        agent = await harness_agents.find_agent(ctx.tx, actor.id)
        if agent is None or agent.group_id != actor.group_id or agent.status != "active":
            raise ControlRefused("unknown_actor", f"agent {actor.id} is not an active agent of this group")
    ctx.goal.update(title=cmd["title"], objective=cmd["objective"], claim_mode=cmd.get("claim_mode", "soft"),
                    subjects=cmd.get("subjects", {}), budget=cmd.get("budget"))
    from wakeful.control.kernel import goal_values

    await ctx.tx.execute(S.goal.insert().values(**goal_values(ctx.goal)))  # first: registrations reference it
    if actor.kind == "agent":  # an agent creator is registered
        await ctx.insert_row("registration", S.goal_agent, {
            "goal_id": ctx.goal_id, "agent_id": actor.id, "status": "active", "registered_ms": ctx.now,
            "registered_by": actor.ref}, row_id=actor.id, status="active")


async def _active_claims(ctx: Ctx) -> int:
    """Live claims (active and unexpired: an expired one only allows a takeover)."""
    C = S.work_claim
    stmt = sa.select(sa.func.count()).select_from(C).where(C.c.goal_id == ctx.goal_id, C.c.status == "active",
                                                           C.c.expires_ms > ctx.now)
    return int((await ctx.tx.execute(stmt)).scalar_one())


async def update(ctx: Ctx) -> None:
    await apply_goal_changes(ctx, {k: ctx.command[k] for k in ("title", "objective", "claim_mode", "budget")
                                   if k in ctx.command})


async def apply_goal_changes(ctx: Ctx, changes: dict[str, Any]) -> None:
    """goal.update, and an approved goal.propose."""
    if "claim_mode" in changes and changes["claim_mode"] != ctx.goal["claim_mode"] and await _active_claims(ctx):
        raise ControlRefused("illegal_transition", "claim_mode changes only while no claim is active",
                             reason="claims_active")
    ctx.set_goal(**changes)


async def pause(ctx: Ctx) -> None:
    ctx.set_goal(status="paused")


async def resume(ctx: Ctx) -> None:
    if ctx.goal["status"] != "paused":
        raise ControlRefused("illegal_transition", "only a paused goal resumes", status=ctx.goal["status"])
    ctx.set_goal(status="active")


async def goal_acceptance_status(ctx: Ctx, *, subjects: dict[str, str] | None = None,
                                 contract: dict[str, Any] | None = None, use_current: bool = True) -> tuple[
                                     str, dict[str, str]]:
    """The goal's acceptance status and each criterion's status, under ``subjects``/``contract`` if given."""
    if use_current:
        contract = await ctx.contract()
    items = {i["id"]: i for i in await rows.load_items(ctx.tx, ctx.goal_id)}
    evidence = await rows.load_evidence(ctx.tx, ctx.goal_id)
    statuses = assess(contract, evidence, items, subjects if subjects is not None else ctx.goal["subjects"])
    flat = {cid: s.status for cid, s in statuses.items()}
    return acceptance_status(flat.values(), has_contract=contract is not None), flat


async def close(ctx: Ctx) -> None:
    W = S.work_item
    status, _ = await goal_acceptance_status(ctx)
    if ctx.actor.kind == "agent" and status != "accepted":
        raise ControlRefused("forbidden", "an agent closes a goal only when its acceptance is accepted",
                             acceptance=status)
    stmt = sa.select(W.c.id, W.c["class"], W.c.status, W.c.loop_id).where(
        W.c.goal_id == ctx.goal_id, W.c.status.in_(("open", "blocked")))
    open_items = [m["id"] for m in ((await ctx.tx.execute(stmt)).mappings().all())
                  if m["class"] in ("advancement", "blocker", "user_gate")
                  or (m["class"] == "monitor" and m["status"] == "open")]
    if open_items:
        raise ControlRefused("illegal_transition", "open work remains", reason="work_open", items=open_items[:32])
    F = S.effect
    stmt = sa.select(F.c.request_key).where(F.c.goal_id == ctx.goal_id, F.c.state.in_(("intended", "unknown")))
    unsettled = [r[0] for r in (await ctx.tx.execute(stmt)).all()]
    if unsettled:
        raise ControlRefused("effect_unsettled", "effects are unsettled", request_keys=unsettled[:32])
    if status not in ("none", "accepted"):
        raise ControlRefused("acceptance_unmet", f"the acceptance is {status}", acceptance=status)
    ctx.set_goal(status="closed", closed_ms=ctx.now)


async def register(ctx: Ctx) -> None:
    agent_id = ctx.command["agent_id"]
    if ctx.actor.kind == "agent" and agent_id != ctx.actor.id:
        raise ControlRefused("forbidden", "an agent registers only itself")
    agent = await harness_agents.find_agent(ctx.tx, agent_id)
    if agent is None or agent.group_id != ctx.goal["group_id"]:
        raise ControlRefused("not_found", f"agent {agent_id} is not an agent of this group", resource="agent")
    status = await ctx.agent_status(agent_id)
    if status == "excluded":
        raise ControlRefused("excluded", f"agent {agent_id} is excluded from this goal")
    if status is None:
        await ctx.insert_row("registration", S.goal_agent, {
            "goal_id": ctx.goal_id, "agent_id": agent_id, "status": "active", "registered_ms": ctx.now,
            "registered_by": ctx.actor.ref}, row_id=agent_id, status="active")


async def exclude(ctx: Ctx) -> None:
    agent_id = ctx.command["agent_id"]
    status = await ctx.agent_status(agent_id)
    if status is None:
        raise ControlRefused("not_found", f"agent {agent_id} is not registered on this goal", resource="agent")
    GA = S.goal_agent
    if status != "excluded":
        where = sa.and_(GA.c.goal_id == ctx.goal_id, GA.c.agent_id == agent_id)
        await ctx.update_row("registration", GA, where, {"status": status}, {"status": "excluded"},
                             row_id=agent_id, status="excluded")
    C = S.work_claim
    stmt = sa.select(C.c.item_id).where(C.c.goal_id == ctx.goal_id, C.c.holder == agent_id, C.c.status == "active")
    for (item_id,) in (await ctx.tx.execute(stmt)).all():
        await ctx.release_claim(item_id)


async def reassess(ctx: Ctx, before: dict[str, str], after: dict[str, str]) -> None:
    """§5: record which criterion statuses a subject or contract change moved."""
    moved = {cid: [before.get(cid), st] for cid, st in after.items() if before.get(cid) != st}
    moved.update({cid: [st, None] for cid, st in before.items() if cid not in after})
    if moved:
        ctx.event("acceptance", ctx.goal_id, "reassessed", criteria=moved)


async def subject_set(ctx: Ctx) -> None:
    name, revision = ctx.command["name"], ctx.command["revision"]
    subjects = dict(ctx.goal["subjects"])
    if name not in subjects and len(subjects) >= 16:
        raise ControlRefused("budget_exceeded", "a goal has at most 16 subjects", limit=16)
    _, before = await goal_acceptance_status(ctx)
    subjects[name] = revision
    _, after = await goal_acceptance_status(ctx, subjects=subjects)
    ctx.set_goal(subjects=subjects)
    await reassess(ctx, before, after)


async def budget_spend(ctx: Ctx) -> None:
    item_id = ctx.command.get("item")
    if item_id is not None:
        await _written_back(ctx, str(item_id))
    await spend(ctx, int(ctx.command["units"]))


async def _written_back(ctx: Ctx, item_id: str) -> None:
    """Issue 20: spend for an item is recorded only once its work is written back — the item is done, or the
    spender recorded evidence on it."""
    item = await ctx.item(item_id, field_name="command.item")
    if item["status"] == "done":
        return
    E = S.evidence
    stmt = sa.select(sa.func.count()).select_from(E).where(E.c.work_item_id == item_id,
                                                           E.c.recorded_by == ctx.actor.ref)
    if int((await ctx.tx.execute(stmt)).scalar_one()) == 0:
        raise ControlRefused("illegal_transition", f"nothing of item {item_id} is written back yet: record its "
                             "evidence or complete it (or send spend with that command)", reason="not_written_back",
                             item=item_id)


async def spend(ctx: Ctx, units: int) -> None:
    """Add ``units`` to today's spend (budget.spend, and the ``spend`` member of work.complete/evidence.add)."""
    budget = ctx.goal["budget"]
    if budget is None:
        raise ControlRefused("illegal_transition", "this goal has no budget", reason="no_budget")
    day = dt.datetime.fromtimestamp(ctx.now / 1000, tz=dt.UTC).strftime("%Y-%m-%d")
    B = S.budget_spend
    where = sa.and_(B.c.goal_id == ctx.goal_id, B.c.day == day)
    spent = (await ctx.tx.execute(sa.select(B.c.units).where(where))).scalar()
    total = (spent or 0) + units
    if total > int(budget["units_per_day"]):
        raise ControlRefused("budget_exceeded", f"{units} units would exceed today's budget",
                             spent=spent or 0, units_per_day=budget["units_per_day"], day=day)
    if spent is None:
        await ctx.insert_row("budget", B, {"goal_id": ctx.goal_id, "day": day, "units": total}, row_id=day,
                             revision=total)
    else:
        await ctx.update_row("budget", B, where, {"units": spent}, {"units": total}, row_id=day, revision=total)
