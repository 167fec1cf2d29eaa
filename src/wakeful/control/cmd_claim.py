"""Claim commands (control-plane.md §2.5, §3.2): acquire (with takeover after expiry), renew, transfer, release.

A claim is one row per item whose ``epoch`` rises on acquire, takeover and transfer and is never reused
(released rows stay); claim commands are fenced by the claim and do not bump the item's revision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from wakeful.control import rows
from wakeful.control import schema as S
from wakeful.control.cmd_work import dependencies_open, missing_scopes
from wakeful.control.errors import ControlRefused
from wakeful.control.rules import scopes_overlap
from wakeful.harness.store import loops as harness_loops

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = ["MAX_CLAIMS_PER_AGENT", "acquire", "claim_view", "release", "renew", "transfer"]

MAX_CLAIMS_PER_AGENT = 5
CLAIMABLE = ("advancement", "blocker", "monitor")


def claim_view(claim: dict[str, Any]) -> dict[str, Any]:
    """The receipt's ``claim`` member (§2.9)."""
    return {"item": claim["item_id"], "holder": claim["holder"], "epoch": claim["epoch"], "key": claim["key"],
            "expires_ms": claim["expires_ms"]}


async def _live_claims(ctx: Ctx) -> list[dict[str, Any]]:
    C = S.work_claim
    stmt = sa.select(C).where(C.c.goal_id == ctx.goal_id, C.c.status == "active", C.c.expires_ms > ctx.now)
    return [rows.claim_row(r) for r in (await ctx.tx.execute(stmt)).all()]


async def acquire(ctx: Ctx) -> None:
    agent, key = ctx.actor.id, ctx.command["key"]
    item = await ctx.item(ctx.command["item"])
    claim = await ctx.claim(item["id"])
    ttl_s = int(ctx.command.get("ttl_s", ctx.claim_ttl_s))
    # §2.5: same holder + key while active → the same claim (idempotent); other parameters → key reuse
    if ctx.claim_live(claim) and claim is not None and claim["holder"] == agent and claim["key"] == key:
        if claim["ttl_s"] != ttl_s:
            raise ControlRefused("idempotency_key_reuse", "this claim key was used with another ttl_s",
                                 item=item["id"], ttl_s=claim["ttl_s"])
        ctx.receipt_extra["claim"] = claim_view(claim)
        return
    # step 4: authority and scope
    if item["bound_agent"] and item["bound_agent"] != agent:
        raise ControlRefused("forbidden", f"item {item['id']} is bound to another agent", item=item["id"])
    if agent in item["excluded_agents"]:
        raise ControlRefused("forbidden", f"agent {agent} is excluded from item {item['id']}", item=item["id"])
    missing = missing_scopes(item)
    if missing and item["status"] != "done":
        raise ControlRefused("gate_required", "required scopes need a person's approval", scopes=missing)
    live = await _live_claims(ctx)
    if ctx.claim_live(claim) and claim is not None and claim["holder"] != agent:
        raise ControlRefused("claimed_by_other", f"item {item['id']} is claimed by {claim['holder']}",
                             item=item["id"], holder=claim["holder"], expires_ms=claim["expires_ms"])
    if item["write_scopes"]:
        for other in live:
            if other["item_id"] == item["id"]:
                continue
            other_item = await rows.load_item(ctx.tx, ctx.goal_id, other["item_id"])
            if other_item is not None and scopes_overlap(item["write_scopes"], other_item["write_scopes"]):
                raise ControlRefused("write_scope_conflict", f"write scopes overlap with {other['item_id']}",
                                     item=other["item_id"], holder=other["holder"])
    # step 7: claims per agent per goal
    mine = [c for c in live if c["holder"] == agent and c["item_id"] != item["id"]]
    if len(mine) >= MAX_CLAIMS_PER_AGENT:
        raise ControlRefused("budget_exceeded", f"an agent holds at most {MAX_CLAIMS_PER_AGENT} claims per goal",
                             limit=MAX_CLAIMS_PER_AGENT)
    # step 8: open, claimable class, runnable (§7.2 except "claimed")
    if item["status"] != "open":
        raise ControlRefused("illegal_transition", f"item {item['id']} is {item['status']}", status=item["status"])
    if item["class"] not in CLAIMABLE:
        raise ControlRefused("illegal_transition", f"a {item['class']} item is not claimed", cls=item["class"])
    pending = await dependencies_open(ctx, item)
    if pending:
        raise ControlRefused("dependencies_open", "dependencies are not done", items=pending)
    if item["class"] == "monitor" and item["loop_id"]:
        loop = await harness_loops.find_loop(ctx.tx, item["loop_id"])
        if loop is not None and loop.state == "active":
            raise ControlRefused("illegal_transition", "the monitor's Loop is active: the item is watching",
                                 reason="watching", loop_id=item["loop_id"])
    epoch = (claim["epoch"] if claim else 0) + 1
    new = {"item_id": item["id"], "goal_id": ctx.goal_id, "holder": agent, "epoch": epoch,
           "version": (claim["version"] if claim else 0) + 1, "key": key, "ttl_s": ttl_s,
           "acquired_ms": ctx.now, "renewed_ms": ctx.now, "expires_ms": ctx.now + ttl_s * 1000,
           "status": "active"}
    merged = await ctx.write_claim(item["id"], claim, new)
    ctx.receipt_extra["claim"] = claim_view(merged)


async def _presented(ctx: Ctx, *, person_free: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The item and its claim; holders present the current epoch and key (a person may skip it)."""
    item = await ctx.item(ctx.command["item"])
    claim = await ctx.claim(item["id"])
    presented = ctx.expected.get("claim")
    if ctx.actor.is_person and person_free and presented is None:
        if claim is None or claim["status"] != "active":
            raise ControlRefused("illegal_transition", "the item has no active claim", item=item["id"])
        return item, claim
    if presented is None:
        raise ControlRefused("claim_required", "present the claim (expected.claim: epoch and key)",
                             item=item["id"])
    if claim is None:
        raise ControlRefused("claim_required", "the item has no claim", item=item["id"])
    if presented["epoch"] != claim["epoch"] or presented["key"] != claim["key"] or claim["status"] != "active":
        raise ControlRefused("claim_stale", "the presented claim is not the current one", item=item["id"],
                             current_epoch=claim["epoch"])
    if ctx.actor.kind == "agent" and claim["holder"] != ctx.actor.id:
        raise ControlRefused("claim_stale", "the current claim belongs to another agent", item=item["id"],
                             current_epoch=claim["epoch"])
    return item, claim


async def renew(ctx: Ctx) -> None:
    _, claim = await _presented(ctx, person_free=False)
    if int(claim["expires_ms"]) <= ctx.now:
        raise ControlRefused("claim_expired", "the claim has expired", item=claim["item_id"],
                             expires_ms=claim["expires_ms"])
    merged = await ctx.write_claim(claim["item_id"], claim, {
        "renewed_ms": ctx.now, "expires_ms": ctx.now + int(claim["ttl_s"]) * 1000, "version": claim["version"] + 1})
    ctx.receipt_extra["claim"] = claim_view(merged)


async def transfer(ctx: Ctx) -> None:
    item, claim = await _presented(ctx, person_free=True)
    to = ctx.command["to"]
    if await ctx.agent_status(to) != "active":
        raise ControlRefused("not_registered", f"agent {to} is not registered on this goal", agent_id=to)
    if item["bound_agent"] and item["bound_agent"] != to or to in item["excluded_agents"]:
        raise ControlRefused("forbidden", f"agent {to} may not hold item {item['id']}", agent_id=to)
    if ctx.actor.kind == "agent" and int(claim["expires_ms"]) <= ctx.now:
        raise ControlRefused("claim_expired", "the claim has expired", item=item["id"],
                             expires_ms=claim["expires_ms"])
    merged = await ctx.write_claim(item["id"], claim, {
        "holder": to, "key": ctx.command["key"], "epoch": claim["epoch"] + 1, "version": claim["version"] + 1,
        "acquired_ms": ctx.now, "renewed_ms": ctx.now, "expires_ms": ctx.now + int(claim["ttl_s"]) * 1000})
    ctx.receipt_extra["claim"] = claim_view(merged)


async def release(ctx: Ctx) -> None:
    item, claim = await _presented(ctx, person_free=True)
    await ctx.write_claim(item["id"], claim, {"status": "released", "version": claim["version"] + 1,
                                              "renewed_ms": ctx.now})
