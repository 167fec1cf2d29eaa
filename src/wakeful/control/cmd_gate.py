"""Decision gates (control-plane.md §2.6, §3.5): gate.ask and gate.resolve in one commit over the gate and its
targets. Done targets are never touched: a late decision cannot revive finished work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wakeful.control.errors import ControlRefused
from wakeful.control.rules import covers

if TYPE_CHECKING:
    from wakeful.control.kernel import Ctx

__all__ = ["ask", "resolve"]


async def ask(ctx: Ctx) -> None:
    gate = await ctx.item(ctx.command["item"])
    if gate["class"] != "user_gate":
        raise ControlRefused("illegal_transition", f"item {gate['id']} is not a gate", cls=gate["class"])
    if gate["status"] != "open":
        raise ControlRefused("illegal_transition", f"gate {gate['id']} is {gate['status']}", status=gate["status"])
    if gate["asked_ms"] is None:
        await ctx.write_item(gate, asked_ms=ctx.now)


async def resolve(ctx: Ctx) -> None:
    gate = await ctx.item(ctx.command["item"])
    if gate["class"] != "user_gate":
        raise ControlRefused("illegal_transition", f"item {gate['id']} is not a gate", cls=gate["class"])
    ctx.expect_item_revision(gate)
    if gate["status"] not in ("open", "deferred"):
        raise ControlRefused("illegal_transition", f"gate {gate['id']} is {gate['status']}", status=gate["status"])
    outcome = ctx.command["outcome"]
    by = ctx.actor.ref
    if outcome == "defer":
        conditions = ctx.command.get("resume_when", [])
        if not conditions:
            raise ControlRefused("invalid_command", "a deferral needs a resume condition",
                                 field="command.resume_when")
        if gate["status"] != "open":
            raise ControlRefused("illegal_transition", f"gate {gate['id']} is already deferred", status="deferred")
        await ctx.write_item(gate, status="deferred", outcome="defer", resume_when=conditions, resolved_by=by)
        return
    if outcome == "cancel":
        await ctx.write_item(gate, status="done", done_kind="cancelled", outcome="cancel", resolved_by=by,
                             done_ms=ctx.now)
        return
    if outcome == "approve" and gate.get("proposal"):  # an approved proposal applies in this same commit
        from wakeful.control.cmd_proposal import apply_proposal

        await apply_proposal(ctx, gate)
    await ctx.write_item(gate, status="done", done_kind="resolved", outcome=outcome, resolved_by=by,
                         done_ms=ctx.now)
    for ref in gate["targets"]:
        target = await ctx.item(ref)
        if target["status"] == "done":
            continue
        if outcome == "approve":
            covered = [s for s in target["required_scopes"]
                       if covers(gate["scope"], s) and s not in target["satisfied_scopes"]]
            changes: dict[str, Any] = {}
            if covered:
                changes["satisfied_scopes"] = [*target["satisfied_scopes"], *covered]
            if target["status"] == "blocked" and target["blocked_reason"] in (f"gate:{gate['id']}",):
                changes.update(status="open", blocked_reason=None, resume_when=[])
            if changes:
                await ctx.write_item(target, **changes)
        elif target["status"] == "open":
            await ctx.write_item(target, status="blocked", blocked_reason=f"gate_rejected:{gate['id']}")
